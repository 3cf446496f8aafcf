"""Stateless KStream operators: each a few lines over the Processor primitive."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from streamtable.processors.api import Processor, Record


class StreamFilter(Processor):
    def __init__(self, predicate: Callable[[Any, Any], bool], negate: bool = False) -> None:
        self.predicate = predicate
        self.negate = negate

    def process(self, record: Record) -> None:
        if bool(self.predicate(record.key, record.value)) != self.negate:
            self.forward(record)


class StreamMap(Processor):
    """``mapper(key, value) -> (new_key, new_value)``."""

    def __init__(self, mapper: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        k, v = self.mapper(record.key, record.value)
        self.forward(record.with_key_value(k, v))


class StreamMapValues(Processor):
    """``mapper(key, value) -> new_value`` (the DSL adapts one-argument mappers)."""

    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        self.forward(record.with_value(self.mapper(record.key, record.value)))


class StreamSelectKey(Processor):
    def __init__(self, selector: Callable[[Any, Any], Any]) -> None:
        self.selector = selector

    def process(self, record: Record) -> None:
        value = record.value
        self.forward(Record(self.selector(record.key, value), value, record.timestamp,
                            record.headers))


class StreamFlatMap(Processor):
    """``mapper(key, value) -> iterable of (new_key, new_value)``."""

    def __init__(self, mapper: Callable[[Any, Any], Iterable[tuple[Any, Any]]]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        for k, v in self.mapper(record.key, record.value):
            self.forward(record.with_key_value(k, v))


class StreamFlatMapValues(Processor):
    def __init__(self, mapper: Callable[[Any, Any], Iterable[Any]]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        key, ts, headers, forward = record.key, record.timestamp, record.headers, self.forward
        for v in self.mapper(key, record.value):
            forward(Record(key, v, ts, headers))


class StreamPeek(Processor):
    """Calls ``action(key, value)`` and forwards the record unchanged (``foreach`` when last)."""

    def __init__(self, action: Callable[[Any, Any], Any]) -> None:
        self.action = action

    def process(self, record: Record) -> None:
        self.action(record.key, record.value)
        self.forward(record)


class StreamBranch(Processor):
    """Forwards each record to the first branch whose predicate holds (or the default branch)."""

    forwards_by_name = True

    def __init__(
        self, predicates: list[tuple[Callable[[Any, Any], bool] | None, str]]
    ) -> None:
        self.predicates = predicates

    def process(self, record: Record) -> None:
        for predicate, child in self.predicates:
            if predicate is None or predicate(record.key, record.value):
                self.forward(record, child=child)
                return


class PassThrough(Processor):
    """Forwards every record (merge points, branch children, repartition filters)."""

    def process(self, record: Record) -> None:
        self.forward(record)


NULL_KEY_BEFORE_REPARTITION = "null key before repartition"


class DropNullKeys(Processor):
    """Drops records whose key is None before a repartition, counting them (Kafka Streams does
    the same: an aggregation cannot place a record without a key)."""

    def process(self, record: Record) -> None:
        if record.key is None:
            self.context.record_dropped(self.name, NULL_KEY_BEFORE_REPARTITION)
            return
        self.forward(record)
