"""Aggregations: of streams (count, reduce, aggregate) and of grouped tables, which apply the
subtractor to the old value before the adder to the new one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtable.processors._operator import InternalProcessorContext, Operator
from streamtable.processors.api import Change, Receiver, Record
from streamtable.processors.stateless import NULL_KEY_BEFORE_REPARTITION
from streamtable.processors.table import StoringProcessor
from streamtable.records import Headers

NULL_IN_AGGREGATION = "null key or value in an aggregation"


class CountCombiner(Operator):
    """Before the repartition of a ``count``: the records of one key within one commit travel
    as one partial count (Spark's map-side combine). Records without a key are dropped and
    counted first, as before any repartition.

    With caching (the default) the count downstream forwards only the last change per key per
    commit: the sum of the partial counts, at the largest timestamp among them, from the value
    before the commit — exactly what it forwards when it counts the records one by one. Without
    caching every intermediate count is visible, so records pass one by one. Both sides decide
    from the store's caching, so they always agree (see :class:`StreamCount`).
    """

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name
        self._partial: dict[Any, list[Any]] = {}
        self.active = False

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        self.active = context.caching_enabled(self.store_name)
        if self.active:
            context.register_flush(self.flush)
        self.add = self._adder()

    def process(self, record: Record) -> None:
        self.add(record.key, record.value, record.timestamp, record.headers)

    def receiver(self) -> Receiver:
        return self.add  # the stateless operators before it call it with the parts

    def _adder(self) -> Receiver:
        partial, get, active = self._partial, self._partial.get, self.active

        def add(key: Any, value: Any, timestamp: int, headers: Headers,
                self: CountCombiner = self) -> None:
            if key is None:
                self.context.record_dropped(self.name, NULL_KEY_BEFORE_REPARTITION)
                return
            if not active:
                self.forward(Record(key, value, timestamp, headers))
                return
            if value is None:
                self.context.record_dropped(self.name, NULL_IN_AGGREGATION)
                return
            entry = get(key)
            if entry is None:
                partial[key] = [1, timestamp, headers]
            else:
                entry[0] += 1
                if timestamp >= entry[1]:  # the record the count would have seen last
                    entry[1] = timestamp
                    entry[2] = headers

        return add

    def flush(self) -> bool:
        """Forward the partial counts; True if there were any."""
        if not self._partial:
            return False
        held = list(self._partial.items())
        self._partial.clear()
        for key, (n, ts, headers) in held:
            self.forward(Record(key, n, ts, headers))
        return True


class StreamCount(StoringProcessor):
    """The number of records per key; with ``combined``, the records are partial counts from
    a :class:`CountCombiner` whenever the store caches."""

    def __init__(self, store_name: str, combined: bool = False) -> None:
        self.store_name = store_name
        self.combined = combined
        self.partial = False

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        assert self.store_name is not None
        self.partial = self.combined and context.caching_enabled(self.store_name)

    def process(self, record: Record) -> None:
        key = record.key
        if key is None or record.value is None:
            self.context.record_dropped(self.name, NULL_IN_AGGREGATION)
            return
        n = record.value if self.partial else 1
        stored = self.store.get(key)
        if stored is None:
            self.emit(key, n, None, record)
            return
        old = stored[0]
        self.emit(key, old + n, old, record.with_timestamp(max(record.timestamp, stored[1])))


class StreamAggregate(StoringProcessor):
    """``aggregator(key, value, aggregate) -> aggregate`` starting from ``initializer()``."""

    def __init__(
        self,
        store_name: str,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
    ) -> None:
        self.store_name = store_name
        self.initializer = initializer
        self.aggregator = aggregator

    def process(self, record: Record) -> None:
        key = record.key
        if key is None or record.value is None:
            self.context.record_dropped(self.name, NULL_IN_AGGREGATION)
            return
        stored = self.store.get(key)
        if stored is None:
            old, ts = None, record.timestamp
            agg = self.initializer()
        else:
            old, ts = stored[0], max(record.timestamp, stored[1])
            agg = old
        new = self.aggregator(key, record.value, agg)
        self.emit(key, new, old, record.with_timestamp(ts))


class StreamReduce(StoringProcessor):
    """``reducer(aggregate, value) -> aggregate``; the first value of a key is its aggregate."""

    def __init__(self, store_name: str, reducer: Callable[[Any, Any], Any]) -> None:
        self.store_name = store_name
        self.reducer = reducer

    def process(self, record: Record) -> None:
        key = record.key
        if key is None or record.value is None:
            self.context.record_dropped(self.name, "null key or value in a reduce")
            return
        stored = self.store.get(key)
        if stored is None:
            self.emit(key, record.value, None, record)
            return
        new = self.reducer(stored[0], record.value)
        self.emit(key, new, stored[0], record.with_timestamp(max(record.timestamp, stored[1])))


class TableAggregate(StoringProcessor):
    """Grouped-table aggregate: subtract the old value, then add the new one.

    ``adder(key, value, aggregate)`` and ``subtractor(key, value, aggregate)``; a result of
    ``None`` deletes the row, while a result equal to the initial value stays (a count of 0).
    """

    def __init__(
        self,
        store_name: str,
        initializer: Callable[[], Any],
        adder: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any],
    ) -> None:
        self.store_name = store_name
        self.initializer = initializer
        self.adder = adder
        self.subtractor = subtractor

    def subtract(self, key: Any, value: Any, agg: Any) -> Any:
        return self.subtractor(key, value, agg)

    def add(self, key: Any, value: Any, agg: Any) -> Any:
        return self.adder(key, value, self.initializer() if agg is None else agg)

    def process(self, record: Record) -> None:
        key = record.key
        change: Change[Any] = record.value
        stored = self.store.get(key)
        old = None if stored is None else stored[0]
        ts = record.timestamp if stored is None else max(record.timestamp, stored[1])
        agg = old
        if change.old is not None and old is not None:
            agg = self.subtract(key, change.old, old)
        if change.new is not None:
            agg = self.add(key, change.new, agg)
        if agg is None and old is None:
            return
        self.emit(key, agg, old, record.with_timestamp(ts))


class TableReduce(TableAggregate):
    """Grouped-table reduce: ``subtractor(aggregate, old)`` then ``adder(aggregate, new)``;
    the first value of a group is its aggregate, and a ``None`` result deletes the row (the
    share-holders service relies on it)."""

    def __init__(
        self,
        store_name: str,
        adder: Callable[[Any, Any], Any],
        subtractor: Callable[[Any, Any], Any],
    ) -> None:
        self.store_name = store_name
        self.reduce_adder = adder
        self.reduce_subtractor = subtractor

    def subtract(self, key: Any, value: Any, agg: Any) -> Any:
        return self.reduce_subtractor(agg, value)

    def add(self, key: Any, value: Any, agg: Any) -> Any:
        return value if agg is None else self.reduce_adder(agg, value)
