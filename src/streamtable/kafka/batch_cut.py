"""Where a micro-batch ends on each partition when it may take only part of what is there.

A batch of a backlog takes at most a budget of records. Kafka Streams, catching up from the
same backlog, always processes the record with the smallest timestamp among a task's
partitions, so a sparse topic never runs ahead of a dense one in event time. A batch that gave
every partition an equal share of its budget would: its last records of the sparse topic are
far later than those of the dense one, the task's stream time jumps to them, and the dense
topic's next records arrive as late in the next batch (dropped by a window or a join whose
grace is shorter than the gap).

So the batch is cut at a timestamp: :func:`cut_at_timestamp` finds the largest ``T`` such
that the records before each partition's first record at or after ``T`` fit the budget, and
fills the rest of the budget with records at ``T`` itself (shared by count, which cannot
misalign them: they all have timestamp ``T``; a table's partitions first, which a task
processes first at equal timestamps too). Every partition's batch then ends at about the
same timestamp, and within the batch each task merges its partitions by timestamp
(:mod:`streamtable.engine.ordering`), as Kafka Streams does. ``lookup(T)`` answers, for every
partition, the earliest offset whose record's timestamp is ``T`` or later: Kafka's ListOffsets
by timestamp, or the records' timestamps read (:mod:`streamtable.kafka.timestamps`).

>>> timestamps = {"dense": [10, 20, 30, 40, 50, 60], "sparse": [15, 45]}
>>> def lookup(t):  # the earliest offset with a timestamp >= t, and that timestamp
...     return {p: next(((o, s) for o, s in enumerate(ts) if s >= t), (None, None))
...             for p, ts in timestamps.items()}
>>> cut_at_timestamp({"dense": 0, "sparse": 0}, {"dense": 6, "sparse": 2}, 5, lookup).ends
{'dense': 4, 'sparse': 1}
>>> split_budget({"dense": 6, "sparse": 2}, 5)  # by count: the sparse topic runs ahead
{'dense': 3, 'sparse': 2}
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

__all__ = ["BatchCutter", "Cut", "Found", "Lookup", "cut_at_timestamp", "split_budget"]

Key = TypeVar("Key", bound=Hashable)

#: what a lookup says of one partition for a timestamp ``T``: the earliest offset whose record's
#: timestamp is ``T`` or later and that record's timestamp (``None``: not known), or
#: ``(None, None)`` when no record of the partition is (the cut then takes it to its end)
Found = tuple[int | None, int | None]

#: ``lookup(T)``: :data:`Found` for each partition; an offset before a partition's start or after
#: its end counts as its start or end
Lookup = Callable[[int], Mapping[Key, Found]]

#: bounds the search: from the lowest timestamp to the highest and back takes ~125 lookups
MAX_LOOKUPS = 200
#: the highest timestamp the search asks about (Kafka's are longs)
MAX_TIMESTAMP = 2**62


def split_budget(available: Mapping[Key, int], budget: int) -> dict[Key, int]:
    """Split ``budget`` records over partitions with ``available`` records, as evenly as possible.

    Partitions with less than their fair share get all they have, the rest is shared among the
    others; any remainder goes one record at a time in key order, so the result is
    deterministic and sums to ``min(budget, sum(available))``.

    >>> split_budget({"a": 1, "b": 10, "c": 10}, 9)
    {'a': 1, 'b': 4, 'c': 4}
    >>> split_budget({"a": 5, "b": 5}, 3)
    {'a': 2, 'b': 1}
    """
    result = {key: 0 for key in available}
    remaining = max(0, int(budget))
    pending = sorted(
        (k for k in available if available[k] > 0), key=lambda k: (available[k], str(k))
    )
    while pending and remaining > 0:
        share = remaining // len(pending)
        if share == 0:
            for key in sorted(pending, key=str)[:remaining]:
                result[key] += 1
            remaining = 0
            break
        next_pending = []
        for key in pending:
            take = min(share, available[key] - result[key])
            result[key] += take
            remaining -= take
            if result[key] < available[key]:
                next_pending.append(key)
        pending = next_pending
    return result


@dataclass(frozen=True)
class Cut(Generic[Key]):
    """The end offset of each partition, the cut's timestamp ``T`` (every partition's records
    before its first record at or after ``T`` are in, and some of those at ``T``; ``None``:
    no lookup was needed, or the batch holds only records before any timestamp) and how many
    lookups it took."""

    ends: dict[Key, int]
    timestamp: int | None
    lookups: int


class _Counts(Generic[Key]):
    """``lookup`` clamped to each partition's range, and what the search learnt from it."""

    def __init__(self, starts: Mapping[Key, int], ends: Mapping[Key, int],
                 lookup: Lookup[Key]) -> None:
        self.starts, self.ends, self.lookup = starts, ends, lookup
        self.lookups = 0

    def at(self, t: int) -> tuple[int, dict[Key, int], int]:
        """Records before ``t`` (before each partition's first record at or after ``t``),
        the offsets that are those ends, and the smallest timestamp found at them: every
        timestamp from ``t`` to it gives the same offsets."""
        self.lookups += 1
        found = self.lookup(t)
        offsets: dict[Key, int] = {}
        flat_to: int | None = None
        for key, start in self.starts.items():
            end = self.ends[key]
            offset, stamp = found.get(key, (None, None))
            if offset is None or offset >= end:
                offsets[key] = end
                continue
            offsets[key] = max(start, offset)
            # the records before `offset` are all earlier than `t`, the one at it is `stamp`:
            # nothing changes for this partition up to `stamp`
            reach = stamp if stamp is not None and stamp > t else t
            flat_to = reach if flat_to is None else min(flat_to, reach)
        total = sum(offsets[k] - self.starts[k] for k in offsets)
        return total, offsets, t if flat_to is None else flat_to


def cut_at_timestamp(starts: Mapping[Key, int], ends: Mapping[Key, int], budget: int,
                     lookup: Lookup[Key], *, lower: int | None = None,
                     span: int | None = None,
                     first_at_cut: Collection[Key] = ()) -> Cut[Key]:
    """The end offsets of a batch of at most ``budget`` records (at least one while any is
    available) from ``starts`` to ``ends``, ending on every partition at about the same
    timestamp (see the module's doc).

    ``lower``: a timestamp where the search may begin (the previous batch's cut), and
    ``span``: how far above it the cut is likely to be (the previous batch's time span, scaled
    to this budget); the answer depends on neither. Without ``span`` it takes about two lookups
    per bit of the batch's time span (~35 for a batch spanning 100 s). With it, the search
    gallops up from ``lower`` by ``span`` (never further than a quarter past where the records
    counted so far put the budget), and once the cut is bracketed each probe goes where
    the records counted so far put the budget (interpolation, while the bracket holds more than
    a few records a partition, followed by a halving whenever it did not halve the bracket), so
    a batch of evenly spread records takes a few lookups (on Kafka each is a ListOffsets
    request for the batch's partitions). A partition whose timestamps are not in order is cut
    before its first record at or after ``T``, like Kafka's ``offsetsForTimes``; records
    without a timestamp count as earlier than any. A lookup that knows nothing (every
    partition at its start whatever ``T``) gives the split by count of :func:`split_budget`.
    The records at ``T`` of the partitions in ``first_at_cut`` (a table's) go in before the
    others' at ``T``, so no record of another partition at ``T`` is in a batch before them.

    >>> lookup = lambda t: {"a": (0, 7) if t <= 7 else (None, None)}  # 3 records at 7
    >>> cut_at_timestamp({"a": 0}, {"a": 3}, 2, lookup)  # all at one time: still progress
    Cut(ends={'a': 2}, timestamp=7, lookups=3)
    >>> both = lambda t: {"a": (0, 7) if t <= 7 else (None, None),
    ...                   "b": (0, 7) if t <= 7 else (None, None)}  # 3 records each, all at 7
    >>> cut_at_timestamp({"a": 0, "b": 0}, {"a": 3, "b": 3}, 4, both, first_at_cut={"b"}).ends
    {'a': 1, 'b': 3}
    """
    budget = max(0, int(budget))
    available = {k: max(0, ends[k] - starts[k]) for k in starts}
    if sum(available.values()) <= budget:
        return Cut(dict(ends), None, 0)
    active = [k for k in sorted(available, key=str) if available[k] > 0]
    counts = _Counts({k: starts[k] for k in active}, {k: ends[k] for k in active}, lookup)
    # invariant: at most `budget` records before `low` (-1: before every record, timestamps
    # are >= 0), more than `budget` before `high` (None: after every record)
    low, low_offsets, low_total = -1, {k: starts[k] for k in active}, 0
    high: int | None = None
    high_offsets, high_total = {k: ends[k] for k in active}, sum(available.values())
    if lower is not None and lower >= 0:
        total, offsets, flat_to = counts.at(lower)
        if total <= budget:
            low, low_offsets, low_total = flat_to, offsets, total
        else:
            high, high_offsets, high_total = lower, offsets, total
    step = max(1, span or 1)
    advance = 0  # how far the last aimed probe went past `low` (see below)
    bisect = False  # the last interpolation did not halve the bracket: halve it next
    while (high is None or high > low + 1) and counts.lookups < MAX_LOOKUPS:
        width = None if high is None else high - low
        if high is None:
            probe = low + step  # galloping up: the cut is usually near the last one
            step *= 2
            if lower is not None and low > lower and low_total > 0:
                # not as far as the doubled step where the records so far put the budget (a
                # quarter more): a probe far past the cut makes the lookup read records that
                # far, on the development broker while the batch waits. An aimed probe that
                # fell short goes at least twice as far the next time, so records that thin
                # out (a burst, then a pause) cost a few lookups more, not one each
                aim = low + (budget - low_total) * (low - lower) * 5 // (4 * low_total) + 1
                if aim < probe:
                    probe = min(probe, max(aim, low + 2 * advance))
                    advance = probe - low
            if probe > MAX_TIMESTAMP:
                break  # no record is that late: the lookup cannot place the records
        elif span is None or bisect or high_total - low_total <= 4 * len(active):
            probe = (low + high) // 2
        else:  # where the budget lies if the records between are spread evenly in time
            share = (budget - low_total) / (high_total - low_total)
            probe = min(high - 1, max(low + 1, low + round(share * (high - low))))
        total, offsets, flat_to = counts.at(probe)
        if total <= budget:
            low, low_offsets, low_total = (flat_to if high is None else min(flat_to, high - 1),
                                           offsets, total)
        else:
            high, high_offsets, high_total, step = probe, offsets, total, 1
        # an interpolation that did not halve the bracket (it fell on a plateau of the counts)
        # is followed by a halving
        bisect = (width is not None and not bisect and high is not None
                  and 2 * (high - low) > width)
    # the records from `low` to before `high` (all at `low` once the search ends) fill the
    # rest of the budget, shared by count: those of `first_at_cut` first, then the others
    taken = sum(low_offsets[k] - starts[k] for k in active)
    at_cut = {k: max(0, high_offsets[k] - low_offsets[k]) for k in active}
    extra = split_budget({k: n for k, n in at_cut.items() if k in first_at_cut}, budget - taken)
    extra.update(split_budget({k: n for k, n in at_cut.items() if k not in extra},
                              budget - taken - sum(extra.values())))
    result = dict(ends)
    for k in starts:
        result[k] = low_offsets[k] + extra[k] if k in extra else starts[k]
    return Cut(result, low if low >= 0 else None, counts.lookups)


#: a topic partition
TopicPartitionKey = tuple[str, int]


class BatchCutter:
    """Shares the budget of each batch of a backlog over its partitions: the topics read first
    take what they have (a global table's: Kafka Streams restores it before processing), then
    the others are cut at a timestamp (``split="timestamp"``, :func:`cut_at_timestamp`,
    starting each search at the last batch's cut, the records at the cut of ``tables`` first)
    or share the rest by count (``split="count"``, :func:`split_budget`).

    ``lookups(starts, ends, budget)`` makes the ``lookup`` of one batch's search (see
    :mod:`streamtable.kafka.timestamps`); when it fails the batch is shared by count, with a
    warning, rather than not made.

    >>> stamps = {("bids", 0): [1, 2, 3, 4, 5, 6], ("persons", 0): [1, 5]}
    >>> def lookups(starts, ends, budget):
    ...     return lambda t: {k: next(((o, s) for o, s in enumerate(stamps[k]) if s >= t),
    ...                               (None, None)) for k in starts}
    >>> cutter = BatchCutter(lookups)
    >>> cutter.share({("bids", 0): 0, ("persons", 0): 0}, {("bids", 0): 6, ("persons", 0): 2}, 5)
    {('bids', 0): 4, ('persons', 0): 1}
    """

    def __init__(self, lookups: Callable[[Mapping[TopicPartitionKey, int],
                                          Mapping[TopicPartitionKey, int], int],
                                         Lookup[TopicPartitionKey]],
                 split: str = "timestamp", read_first: Collection[str] = (),
                 tables: Collection[str] = ()) -> None:
        self.lookups = lookups
        self.split = split
        self.read_first = frozenset(read_first)
        self.tables = frozenset(tables)
        self.last_cut: int | None = None  # the timestamp the last batch was cut at
        # the last batch's records and time span (from the cut before it), for the next search
        self._last: tuple[int, int] | None = None
        self.last_lookups = 0  # how many lookups the last cut took

    def share(self, starts: Mapping[TopicPartitionKey, int],
              available: Mapping[TopicPartitionKey, int],
              budget: int) -> dict[TopicPartitionKey, int]:
        """The records each partition gives a batch of ``budget``, from ``starts`` on."""
        first = {k: n for k, n in available.items() if k[0] in self.read_first}
        rest = {k: n for k, n in available.items() if k not in first}
        share = split_budget(first, budget)
        left = budget - sum(share.values())
        if sum(rest.values()) <= left:
            share.update(rest)
        elif left <= 0:
            share.update({k: 0 for k in rest})
        elif self.split == "count":
            share.update(split_budget(rest, left))
        else:
            share.update(self._cut(starts, rest, left))
        return share

    def _cut(self, starts: Mapping[TopicPartitionKey, int],
             available: Mapping[TopicPartitionKey, int],
             budget: int) -> dict[TopicPartitionKey, int]:
        begins = {k: starts[k] for k in available}
        ends = {k: begins[k] + n for k, n in available.items()}
        began = time.monotonic()
        span = None
        if self._last is not None and self._last[0] > 0:
            span = max(1, self._last[1] * budget // self._last[0])
        try:
            lookup = self.lookups(begins, ends, budget)
            lower = self.last_cut
            if lower is None:
                # a first search starts at the earliest first record's time: galloping up from
                # no time at all, its last doubling probes far past the cut, and a lookup on the
                # development broker reads the records that far
                firsts = [stamp for _, stamp in lookup(0).values() if stamp is not None]
                lower = min(firsts) if firsts else None
            cut = cut_at_timestamp(begins, ends, budget, lookup, lower=lower, span=span,
                                   first_at_cut={k for k in begins if k[0] in self.tables})
        except Exception as exc:
            logger.warning(
                "could not cut a batch of %d records at a timestamp, so its partitions share "
                "it by count and a sparse topic may run ahead of a dense one (whose records "
                "can then come late for windows and joins): %s", budget, exc)
            return split_budget(available, budget)
        if cut.timestamp is not None:
            if self.last_cut is not None and cut.timestamp > self.last_cut:
                self._last = (budget, cut.timestamp - self.last_cut)
            self.last_cut = cut.timestamp
        self.last_lookups = cut.lookups
        logger.info("batch of %d records cut at timestamp %s (%d lookups, %.0f ms)", budget,
                    cut.timestamp, cut.lookups, (time.monotonic() - began) * 1000)
        return {k: cut.ends[k] - begins[k] for k in available}
