"""Hopping, tumbling, sliding and session aggregations against plain reference models: random
keys (a few, so that keys hold many windows), out-of-order timestamps within and beyond the
grace period, null keys and values, aggregates that delete their window (None), record by
record and in several batches over two partitions, with and without caching, in memory and on
RocksDB working copies.

The models keep every window in one dict and find a key's windows by scanning it; they apply
the operators' rules as their docstrings state them (Kafka Streams' rules), and a record cache
as :class:`~streamtable.processors.cache.ChangeForwarder` does: per commit, each window's first
old value and last new one, in the order of first change. Compared: every output record (key,
value, timestamp, in order), the stores' final contents and the records dropped as late.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections import Counter
from typing import Any

import pytest

from streamtable import (
    Materialized,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
    Windowed,
)

LATE_WINDOW = "late record for a closed window"
LATE_SESSION = "late record for a closed session"
KEYS = ["a", "b", "c", 7]
PARTITION = {"a": 0, "b": 1, "c": 0, 7: 1}

Change = tuple[Windowed, Any, Any, int]  # window, new aggregate, old aggregate, timestamp


def initializer() -> list[int]:
    return []


def add(key: Any, value: int, agg: list[int]) -> list[int]:
    return [*agg, value]


def add_or_delete(key: Any, value: int, agg: list[int]) -> list[int] | None:
    """``add``, except that every 11th value deletes its windows (a None aggregate)."""
    return None if value % 11 == 5 else [*agg, value]


def merge(key: Any, a: list[int], b: list[int]) -> list[int]:
    return a + b


class Model:
    """One task's store (window -> (aggregate, timestamp)), stream time and late records."""

    expire_by_end = False
    kept_past_retention = 0
    late_reason = LATE_WINDOW

    def __init__(self, windows: Any, retention: int, aggregator: Any = add) -> None:
        self.windows = windows
        self.retention = retention
        self.add = aggregator
        self.store: dict[Windowed, tuple[Any, int]] = {}
        self.stream_time = -1
        self.dropped: Counter[str] = Counter()

    def process(self, key: Any, value: Any, ts: int) -> list[Change]:
        self.stream_time = max(self.stream_time, ts)
        limit = self.stream_time - self.retention - self.kept_past_retention
        for w in [w for w in self.store if (w.end if self.expire_by_end else w.start) <= limit]:
            del self.store[w]
        if key is None or value is None:
            return []
        out: list[Change] = []
        self.aggregate(key, value, ts, out)
        return out

    def aggregate(self, key: Any, value: Any, ts: int, out: list[Change]) -> None:
        raise NotImplementedError

    def of_key(self, key: Any, lo: int, hi: int) -> list[tuple[Windowed, tuple[Any, int]]]:
        """``key``'s windows starting in ``[lo, hi]``, by start."""
        return sorted(((w, v) for w, v in self.store.items()
                       if w.key == key and lo <= w.start <= hi),
                      key=lambda wv: (wv[0].start, wv[0].end))

    def write(self, w: Windowed, new: Any, old: Any, ts: int, out: list[Change]) -> None:
        if new is None:
            self.store.pop(w, None)
        else:
            self.store[w] = (new, ts)
        out.append((w, new, old, ts))


class TimeModel(Model):
    """Each record goes into every window ``[start, start + size)`` holding it
    (``start`` a multiple of ``advance``), unless stream time is past the window's end plus
    grace."""

    def aggregate(self, key: Any, value: Any, ts: int, out: list[Change]) -> None:
        size, advance = self.windows.size, self.windows.advance
        close_time = self.stream_time - self.windows.grace
        for start in range(0, ts + 1, advance):
            if start + size <= ts:
                continue
            if start + size <= close_time:
                self.dropped[LATE_WINDOW] += 1
                continue
            w = Windowed(key, start, start + size)
            stored = self.store.get(w)
            if stored is None:
                self.write(w, self.add(key, value, initializer()), None, ts, out)
            else:
                self.write(w, self.add(key, value, stored[0]), stored[0], max(ts, stored[1]),
                           out)


class SessionModel(Model):
    """A record merges every session of its key that ends at most ``gap`` before it or starts
    at most ``gap`` after it (in end order) into one; the merged sessions get tombstones (at
    their end) unless the record only makes a session of itself, then the new session is
    written (at its end). Late: a merged session ending before stream time - grace - gap.
    A session expires once its end is more than the retention before stream time (with the
    default retention, once closed: a record at its end + gap still merges with it)."""

    expire_by_end = True
    kept_past_retention = 1

    def aggregate(self, key: Any, value: Any, ts: int, out: list[Change]) -> None:
        gap = self.windows.gap
        close_time = self.stream_time - self.windows.grace - gap
        sessions = sorted((w for w in self.store if w.key == key), key=lambda w: (w.end, w.start))
        merged = [w for w in sessions if w.end >= ts - gap and w.start <= ts + gap]
        agg, start, end = initializer(), ts, ts
        for w in merged:
            agg = merge(key, agg, self.store[w][0])
            start, end = min(start, w.start), max(end, w.end)
        if end < close_time:
            self.dropped[LATE_SESSION] += 1
            return
        if (start, end) != (ts, ts):
            for w in merged:
                self.write(w, None, self.store[w][0], w.end, out)
        self.write(Windowed(key, start, end), self.add(key, value, agg), None, end, out)


class SlidingModel(Model):
    """Kafka Streams' sliding windows (``KStreamSlidingWindowAggregate``), as
    ``processors/sliding.py`` describes them, over a scan of the key's windows."""

    def aggregate(self, key: Any, value: Any, ts: int, out: list[Change]) -> None:
        diff = self.windows.time_difference
        close_time = self.stream_time - self.windows.grace
        if ts + diff < close_time:
            self.dropped[LATE_WINDOW] += 1
            return
        self.args = (key, value, ts, close_time, out)
        if ts < diff:
            self.early()
        else:
            self.regular()

    def update(self, w: Windowed, stored: tuple[Any, int], exists: bool) -> None:
        key, value, ts, close_time, out = self.args
        if w.end < close_time:
            self.dropped[LATE_WINDOW] += 1
            return
        new_ts = max(ts, stored[1]) if exists else ts
        self.write(w, self.add(key, value, stored[0]), stored[0] if exists else None, new_ts,
                   out)

    def create(self, start: int, base: tuple[Any, int]) -> None:
        key = self.args[0]
        self.update(Windowed(key, start, start + self.windows.time_difference), base, False)

    def create_right(self, right: tuple[Any, int]) -> None:
        key, _, ts, _, out = self.args
        w = Windowed(key, ts + 1, ts + 1 + self.windows.time_difference)
        self.write(w, right[0], None, right[1], out)

    def regular(self) -> None:
        key, _, ts, _, _ = self.args
        diff = self.windows.time_difference
        starts = set()
        left = right = None
        left_exists = right_exists = False
        previous = None
        for w, stored in reversed(self.of_key(key, max(0, ts - 2 * diff), ts + 1)):
            starts.add(w.start)
            if w.start == ts + 1:
                right_exists = True
            elif w.end > ts:
                right = right or stored
                self.update(w, stored, True)
            elif w.end == ts:
                left_exists = True
                self.update(w, stored, True)
                if stored[1] >= ts:
                    return
                previous = stored[1]
            else:
                left, previous = stored, stored[1]
                break
        if previous is not None and previous + 1 not in starts and previous + 1 + diff >= ts:
            self.create(previous + 1, (initializer(), ts))
        if not left_exists:
            if previous is not None and left is not None and ts - diff <= previous:
                self.create(ts - diff, (left[0], ts))
            else:
                self.create(ts - diff, (initializer(), ts))
        if not right_exists and right is not None and right[1] > ts:
            self.create_right(right)

    def early(self) -> None:
        key, _, ts, _, _ = self.args
        combined = right = previous = None
        right_exists = False
        starts = set()
        for w, stored in self.of_key(key, 0, ts + 1):
            starts.add(w.start)
            if w.start == 0:
                combined = (w, stored)
                if stored[1] < ts:
                    previous = stored[1]
            elif w.start <= ts:
                right = stored
                self.update(w, stored, True)
            else:
                right_exists = True
        if right is None and combined is not None and combined[1][1] > ts:
            right = combined[1]
        if not right_exists and right is not None and right[1] > ts:
            self.create_right(right)
        if previous is not None and previous + 1 not in starts:
            self.create(previous + 1, (initializer(), ts))
        if combined is None:
            self.create(0, (initializer(), ts))
        else:
            self.update(combined[0], combined[1], True)


def reference(model: Any, records: list[tuple[Any, Any, int, int]], cuts: set[int],
              batch_mode: bool, cache: bool) -> tuple[list[Any], dict[Any, Any], Counter[str]]:
    """The output records, final store and late records of the model's tasks: one task for
    every record in record mode (committing after each record), one per partition in batch
    mode (committing after each batch, the tasks of a batch in partition order)."""
    tasks: dict[int, Model] = {}
    output: list[tuple[Any, Any, int]] = []

    def run(task_id: int, batch: list[tuple[Any, Any, int, int]]) -> None:
        task = tasks.setdefault(task_id, model())
        held: dict[Windowed, list[Any]] = {}
        for key, value, ts, _ in batch:
            for w, new, old, at in task.process(key, value, ts):
                if not cache:
                    output.append(([w.key, w.start, w.end], new, at))
                elif w in held:
                    held[w][1:] = [new, at]
                else:
                    held[w] = [old, new, at]
        for w, (old, new, at) in held.items():
            if new is not None or old is not None:
                output.append(([w.key, w.start, w.end], new, at))

    if not batch_mode:
        for r in records:
            run(0, [r])
    else:
        batches: list[list[tuple[Any, Any, int, int]]] = [[]]
        for i, r in enumerate(records):
            if i in cuts:
                batches.append([])
            batches[-1].append(r)
        for batch in batches:
            for p in sorted({r[3] for r in batch}):
                run(p, [r for r in batch if r[3] == p])
    store = {}
    dropped: Counter[str] = Counter()
    for task in tasks.values():
        store.update({(w.key, w.start, w.end): v for w, v in task.store.items()})
        dropped.update(task.dropped)
    return output, store, dropped


def random_records(rng: random.Random, n: int, early: int) -> list[tuple[Any, Any, int, int]]:
    """``(key, value, timestamp, partition)``: time advancing 0-2 ms a record from ``early``,
    a record now and then up to 90 ms behind (beyond most grace periods here)."""
    out = []
    t = early
    for i in range(n):
        t += rng.choice([0, 0, 1, 1, 1, 2])
        ts = max(0, t - rng.choice([0] * 12 + [1, 2, 3, 5, 8, 13, 40, 90]))
        key = None if rng.random() < 0.02 else rng.choice(KEYS)
        value = None if rng.random() < 0.02 else i
        out.append((key, value, ts, PARTITION.get(key, 0)))
    return out


def _driver(kind: str, windows: Any, retention: int | None, batch_mode: bool, cache: bool,
            rocksdb_dir: Any = None, aggregator: Any = add) -> TopologyTestDriver:
    b = StreamsBuilder()
    grouped = b.stream("in").group_by_key()
    mat = Materialized.as_("agg")
    if retention is not None:
        mat = mat.with_retention(retention)
    windowed = grouped.windowed_by(windows)
    if kind == "session":
        table = windowed.aggregate(initializer, aggregator, merge, mat)
    else:
        table = windowed.aggregate(initializer, aggregator, mat)
    table.to_stream(lambda w, v: [w.key, w.start, w.end]).to("out")
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 10**7 if cache else 0},
                                batch_mode=batch_mode)
    if rocksdb_dir is not None:  # the tasks' working copies in RocksDB, as with state.local.dir
        from streamtable.state.persistence import FileTaskStatePersistence
        from streamtable.testing.driver import _KeptStates

        driver._states = _KeptStates(FileTaskStatePersistence(
            f"memory://{uuid.uuid4().hex}", local_dir=str(rocksdb_dir)))
    return driver


def _case(kind: str, seed: int) -> tuple[Any, Any, int | None]:
    """Windows, the model class and a retention (None: the default) for ``seed``."""
    rng = random.Random(seed)
    if kind == "time":
        size = rng.randint(2, 60)
        windows = TimeWindows.of(size).advance_by(rng.randint(1, size)).with_grace(
            rng.randint(0, 10))
        least, model = windows.size + windows.grace, TimeModel
    elif kind == "sliding":
        windows = SlidingWindows.of_time_difference_and_grace(rng.randint(1, 30),
                                                               rng.randint(0, 10))
        least, model = 2 * windows.time_difference + windows.grace, SlidingModel
    else:
        windows = SessionWindows.of_inactivity_gap_and_grace(rng.randint(1, 20), rng.randint(0, 8))
        least, model = windows.gap + windows.grace, SessionModel
    retention = least + rng.choice([0, 0, 30, 200])
    return windows, model, (None if retention == least else retention)


MODES = [(False, False, False), (False, True, False), (True, False, False), (True, True, False),
         (True, True, True)]
CASES = ([(seed, *mode, add) for seed in range(6) for mode in MODES]
         + [(seed, *mode, add_or_delete) for seed in range(6, 9) for mode in MODES[::2]])


@pytest.mark.parametrize("seed,batch_mode,cache,rocksdb,aggregator", CASES)
@pytest.mark.parametrize("kind", ["time", "sliding", "session"])
def test_windowed_aggregation_matches_its_reference(kind, seed, batch_mode, cache, rocksdb,
                                                     aggregator, tmp_path, caplog):
    if rocksdb:
        pytest.importorskip("rocksdict")
    caplog.set_level(logging.ERROR)  # each late record is logged as a warning
    windows, model_class, retention = _case(kind, seed)
    rng = random.Random(1000 + seed)
    records = random_records(rng, 400, early=rng.choice([0, 3, 40]))
    cuts = set(rng.sample(range(1, len(records)), 4))
    driver = _driver(kind, windows, retention, batch_mode, cache,
                     tmp_path / "rocksdb" if rocksdb else None, aggregator)
    topic = driver.create_input_topic("in", partitions=2)
    out = driver.create_output_topic("out")
    for i, (key, value, ts, partition) in enumerate(records):
        if batch_mode and i in cuts:
            driver.run_batch()
        topic.pipe_input(key, value, timestamp=ts, partition=partition)
    if batch_mode:
        driver.run_batch()

    def model() -> Model:
        least = {TimeModel: lambda w: w.size + w.grace,
                 SlidingModel: lambda w: 2 * w.time_difference + w.grace,
                 SessionModel: lambda w: w.gap + w.grace}[model_class](windows)
        return model_class(windows, least if retention is None else retention, aggregator)

    expected, store, dropped = reference(model, records, cuts, batch_mode, cache)
    got = [(r.key, r.value, r.timestamp) for r in out.read_records()]
    assert got == expected
    final = {(w.key, w.start, w.end): v
             for w, v in driver.get_timestamped_key_value_store("agg").all()}
    assert final == store
    assert {r: n for r, n in driver.dropped_records.items()
            if r in (LATE_WINDOW, LATE_SESSION)} == dict(dropped)
    driver.close()
