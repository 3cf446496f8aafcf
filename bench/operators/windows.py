"""Windowed aggregations: tumbling, tumbling with ``suppress``, hopping, sliding and session
windows. Each reads one keyed stream (``"k000042" -> {"n": i, "amount": a}``, the i-th record
on partition ``i % 2``) and writes one record per window change as
``"<key>@<start>-<end>" -> aggregate``.

No record of these inputs is late: records are at most ~1 s out of order, less than every
grace period here (10 s) and the session gap (30 s), so every record counts and the
references need no lateness rule (each family's ``generate`` asserts it).
"""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from bench.operators.family import Family
from bench.operators.inputs import (
    PARTITIONS,
    Clock,
    Input,
    Keys,
    encode,
    key_count,
    time_base,
)

GRACE_MS = 10_000


def window_key(window: Any, value: Any) -> str:
    """The output key of a window: ``"<key>@<start>-<end>"``."""
    return f"{window.key}@{window.start}-{window.end}"


def amount_sum(key: Any, value: Any, total: int) -> int:
    return total + value["amount"]


def zero() -> int:
    return 0


def keyed_stream(records: int, seed: int, *, end_markers: bool = False) -> Input:
    """One stream role ``in``: ``records`` records (the last two being end markers with
    ``end_markers``) over :func:`key_count` keys, the i-th on partition ``i % 2``."""
    rng = random.Random(seed)
    keys = Keys(key_count(records))
    clock = Clock(time_base(records), rng)
    n = records - (PARTITIONS if end_markers else 0)
    inp = Input(stats={"keys": len(keys.names)})
    for i in range(n):
        p = i % PARTITIONS
        j = rng.choice(keys.by_partition[p])
        inp.add("in", keys.encoded[j], encode({"n": i, "amount": rng.randint(1, 100)}),
                clock.at(i), p)
    if end_markers:
        inp.end_markers(["in"], clock.base + n)
    late = inp.max_disorder()
    assert late < GRACE_MS, f"a record {late} ms out of order: late for a grace of {GRACE_MS}"
    return inp


def times_by_key(inp: Input) -> dict[Any, list[int]]:
    out: dict[Any, list[int]] = defaultdict(list)
    for key, _, ts, _ in inp.decoded("in"):
        out[key].append(ts)
    for times in out.values():
        times.sort()
    return out


class Tumbling(Family):
    """Tumbling-window count: ``stream.group_by_key().windowed_by(TimeWindows.of(60 s)
    .with_grace(10 s)).count()``.

    Check (final windows): the last count written for each window equals the number of input
    records of that key whose timestamp falls in the window. How often a window's count was
    updated on the way depends on where micro-batches end (one update per window and batch
    with the record cache), so only the last value per window is compared.
    """

    name = "tumbling"
    title = "tumbling-window count (1 min, grace 10 s)"
    check = "last count per window = records per key and window"
    size = 60_000
    advance = 60_000

    def windowed(self, topics: Mapping[str, str]) -> Any:
        from streamtable import StreamsBuilder, TimeWindows

        b = StreamsBuilder()
        windows = TimeWindows.of(self.size).advance_by(self.advance).with_grace(GRACE_MS)
        return b, b.stream(topics["in"]).group_by_key().windowed_by(windows)

    def topology(self, topics: Mapping[str, str], output: str) -> Any:
        b, windowed = self.windowed(topics)
        windowed.count().to_stream(window_key).to(output)
        return b.build()

    def generate(self, records: int, seed: int) -> Input:
        return keyed_stream(records, seed)

    def window_starts(self, ts: int) -> list[int]:
        """Starts of the windows ``[start, start + size)`` holding ``ts``."""
        last = ts // self.advance * self.advance
        return list(range(last, ts - self.size, -self.advance))

    def reference(self, inp: Input) -> dict[Any, Any]:
        counts: Counter[str] = Counter()
        for key, _, ts, _ in inp.decoded("in"):
            for start in self.window_starts(ts):
                counts[f"{key}@{start}-{start + self.size}"] += 1
        return dict(counts)


class TumblingSuppressed(Tumbling):
    """The tumbling-window count through ``suppress(Suppressed.until_window_closes())``: one
    final result per window, once stream time has passed its end plus the grace period.

    The input ends with one end-of-input marker per partition (its own key, an hour after the
    last record), so every window of the generated keys closes in every task, however the input
    was cut into micro-batches.

    Check (every emitted record): the output holds each window exactly once, with its final
    count (the reference's number of records per key and window); a window emitted twice, or
    early with a partial count, or never, fails.
    """

    name = "tumbling-suppress"
    title = "tumbling-window count + suppress(until_window_closes)"
    check = "each window emitted exactly once, with its final count"
    kind = "multiset"

    def topology(self, topics: Mapping[str, str], output: str) -> Any:
        from streamtable import Suppressed

        b, windowed = self.windowed(topics)
        (windowed.count().suppress(Suppressed.until_window_closes())
         .to_stream(window_key).to(output))
        return b.build()

    def generate(self, records: int, seed: int) -> Input:
        return keyed_stream(records, seed, end_markers=True)

    def reference(self, inp: Input) -> dict[Any, Any]:
        return Counter({(k, n): 1 for k, n in super().reference(inp).items()})


class Hopping(Tumbling):
    """Hopping-window aggregate: ``windowed_by(TimeWindows.of(5 min).advance_by(1 min)
    .with_grace(10 s)).aggregate(0, total + value["amount"])`` (each record in five windows).

    Check (final windows): the last total written for each window equals the sum of the
    amounts of that key's records in the window; intermediate totals depend on where batches
    end and are not compared.
    """

    name = "hopping"
    title = "hopping-window aggregate (5 min / 1 min, grace 10 s)"
    check = "last sum per window = sum of amounts per key and window"
    size = 300_000
    advance = 60_000

    def topology(self, topics: Mapping[str, str], output: str) -> Any:
        b, windowed = self.windowed(topics)
        windowed.aggregate(zero, amount_sum).to_stream(window_key).to(output)
        return b.build()

    def reference(self, inp: Input) -> dict[Any, Any]:
        sums: Counter[str] = Counter()
        for key, value, ts, _ in inp.decoded("in"):
            for start in self.window_starts(ts):
                sums[f"{key}@{start}-{start + self.size}"] += value["amount"]
        return dict(sums)


class Sliding(Family):
    """Sliding-window count: ``windowed_by(SlidingWindows.of_time_difference_and_grace(10 s,
    10 s)).count()``; windows ``[start, start + 10 s]``, both ends inclusive.

    Check (final windows): Kafka Streams' sliding windows give every distinct set of records
    within 10 s of each other one window: the *left* window ``[t - 10 s, t]`` of every record
    time ``t``, and the *right* window ``[t + 1, t + 1 + 10 s]`` of every record time that has
    a later record within it. The last count written per window must equal the number of the
    key's records in it, for exactly those windows.
    """

    name = "sliding"
    title = "sliding-window count (10 s, grace 10 s)"
    check = "last count per window = records in it, for each left/right window"
    difference = 10_000

    def topology(self, topics: Mapping[str, str], output: str) -> Any:
        from streamtable import SlidingWindows, StreamsBuilder

        b = StreamsBuilder()
        windows = SlidingWindows.of_time_difference_and_grace(self.difference, GRACE_MS)
        (b.stream(topics["in"]).group_by_key().windowed_by(windows).count()
         .to_stream(window_key).to(output))
        return b.build()

    def generate(self, records: int, seed: int) -> Input:
        return keyed_stream(records, seed)

    def reference(self, inp: Input) -> dict[Any, Any]:
        d = self.difference
        out: dict[str, int] = {}
        for key, times in times_by_key(inp).items():
            for t in set(times):
                out[f"{key}@{t - d}-{t}"] = bisect_right(times, t) - bisect_left(times, t - d)
                inside = bisect_right(times, t + 1 + d) - bisect_left(times, t + 1)
                if inside:
                    out[f"{key}@{t + 1}-{t + 1 + d}"] = inside
        return out


class Session(Family):
    """Session-window count: ``windowed_by(SessionWindows.of_inactivity_gap_and_grace(30 s,
    10 s)).count()``. A new session replaces the sessions it merges: their keys get a
    tombstone. The grace period covers the input's disorder (as every family's does): without
    it a record up to half a second out of order could find its session expired and start a
    new one, which the reference does not model.

    Check (final sessions): after the tombstones, the output table holds exactly the final
    sessions: per key, the runs of records with at most 30 s between neighbours, each as
    ``[first, last]`` with its number of records. The sessions a record merged on the way, and
    when they were emitted, depend on where batches end and are not compared.
    """

    name = "session"
    title = "session-window count (gap 30 s, grace 10 s)"
    check = "final table = per key, runs of records ≤ 30 s apart, with their counts"
    gap = 30_000

    def topology(self, topics: Mapping[str, str], output: str) -> Any:
        from streamtable import SessionWindows, StreamsBuilder

        b = StreamsBuilder()
        (b.stream(topics["in"]).group_by_key()
         .windowed_by(SessionWindows.of_inactivity_gap_and_grace(self.gap, GRACE_MS)).count()
         .to_stream(window_key).to(output))
        return b.build()

    def generate(self, records: int, seed: int) -> Input:
        return keyed_stream(records, seed)

    def reference(self, inp: Input) -> dict[Any, Any]:
        out: dict[str, int] = {}
        for key, times in times_by_key(inp).items():
            start = prev = times[0]
            n = 0
            for t in times:
                if t - prev > self.gap:
                    out[f"{key}@{start}-{prev}"] = n
                    start, n = t, 0
                prev = t
                n += 1
            out[f"{key}@{start}-{prev}"] = n
        return out
