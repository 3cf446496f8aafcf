"""The order in which a task processes one batch of records: Kafka Streams' rules.

Kafka Streams' ``PartitionGroup`` keeps every input partition in offset order and always takes
the next record from the partition whose head has the smallest timestamp. A batch host (the
Spark runtime, the test driver in batch mode) receives a whole batch at once, including the
records earlier stages of the same batch wrote to repartition topics, so two more rules make it
see what a record-at-a-time run would:

- at equal timestamps, records of topics written by earlier stages come first (``topic_rank``):
  the test driver follows each record through the whole topology before the next one;
- before those, at equal timestamps, records of topics read as tables (``table_topics``): a
  stream record joins a table as it stands at the record's time, updates at that time
  included, as a join with a versioned table does (Kafka Streams leaves the order of equal
  timestamps open; a batch cut at a timestamp keeps this rule too, see
  :mod:`streamtable.kafka.batch_cut`);
- records of ``first_topics`` come before all others: the left values of a foreign-key join
  must be known before the answers about them, which a cache flush upstream can reorder.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain
from operator import attrgetter, itemgetter

from streamtable.records import RawRecord

_offset = attrgetter("offset")


def _timestamp(record: RawRecord) -> int:
    """A record's place in time: Kafka's ``-1`` for one without a timestamp (a source's
    timestamp extractor gives it its event time later)."""
    ts: int | None = record.timestamp  # None from a source that could not read one
    return -1 if ts is None else ts


class PartitionGroupOrdering:
    """Kafka Streams' record order over one batch (a
    :class:`~streamtable.engine.ports.RecordOrdering`).

    >>> r = lambda p, o, ts: RawRecord("in", p, o, ts, None, None)
    >>> batch = [r(0, 0, 5), r(0, 1, 1), r(1, 0, 3)]
    >>> [(x.partition, x.offset) for x in PartitionGroupOrdering().order(batch)]
    [(1, 0), (0, 0), (0, 1)]
    """

    def __init__(self, topic_rank: Mapping[str, int] | None = None,
                 first_topics: frozenset[str] = frozenset(),
                 table_topics: frozenset[str] = frozenset()) -> None:
        self.topic_rank = dict(topic_rank or {})
        self.first_topics = first_topics
        self.table_topics = table_topics

    def order(self, records: Sequence[RawRecord]) -> Iterable[RawRecord]:
        runs: dict[tuple[str, int], list[RawRecord]] = {}
        for r in records:
            run = runs.get((r.topic, r.partition))
            if run is None:
                run = runs[(r.topic, r.partition)] = []
            run.append(r)
        for run in runs.values():
            run.sort(key=_offset)  # stable, linear when already in offset order
        return self.merge(runs)

    def merge(self, runs: Mapping[tuple[str, int], Iterable[RawRecord]]) -> Iterable[RawRecord]:
        """The order over ``runs``, each the records of one (topic, partition) in offset order:
        lists, or iterators taken from only as the order reaches them (so a host can make the
        records of a large batch as they are processed).

        >>> r = lambda p, o, ts: RawRecord("in", p, o, ts, None, None)
        >>> runs = {("in", 0): iter([r(0, 0, 5), r(0, 1, 1)]), ("in", 1): iter([r(1, 0, 3)])}
        >>> [(x.partition, x.offset) for x in PartitionGroupOrdering().merge(runs)]
        [(1, 0), (0, 0), (0, 1)]
        >>> tied = {("bids", 0): [RawRecord("bids", 0, 0, 7, 1, "bid")],
        ...         ("items", 0): [RawRecord("items", 0, 0, 7, 1, "item")]}
        >>> [x.value for x in PartitionGroupOrdering(table_topics=frozenset({"items"}))
        ...  .merge(tied)]
        ['item', 'bid']
        """
        if not runs:
            return ()
        ordered = sorted(runs.items(), key=itemgetter(0))
        if len(ordered) == 1:
            return ordered[0][1]
        rank, tables = self.topic_rank, self.table_topics
        # stable: then by topic and partition
        ordered.sort(key=lambda run: (run[0][0] not in tables, rank.get(run[0][0], -1)))
        first = [run for (topic, _), run in ordered if topic in self.first_topics]
        rest = [run for (topic, _), run in ordered if topic not in self.first_topics]
        if first and rest:
            return chain(_merge(first), _merge(rest))
        return _merge([run for _, run in ordered])


def _merge(runs: list[Iterable[RawRecord]]) -> Iterator[RawRecord]:
    """Always the head with the smallest timestamp; ties go to the earlier run."""
    return heapq.merge(*runs, key=_timestamp)
