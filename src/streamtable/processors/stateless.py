"""Stateless KStream operators: each a few lines over the Processor primitive.

Each is written once, as a function of a record's parts that hands its results to a downstream
receiver (:meth:`StatelessProcessor.make_receiver`). In a chain of them (``flat_map_values`` then
``group_by``'s key selection, say) each calls the next directly, with no :class:`Record` built
in between; the operator that ends a chain builds one for what follows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from streamtable.processors._operator import Operator
from streamtable.processors.api import Processor, Receiver, Record
from streamtable.records import Headers


class StatelessProcessor(Operator):
    """An operator written as ``make_receiver(down)``: its logic over a record's parts, handing
    each result to ``down(key, value, timestamp, headers)``.

    The receivers take the operator as a default argument named ``self``, so a failure in a user
    function still names the operator (see :func:`~streamtable.processors.api.failing_processor`).

    Example:
        >>> class Upper(StatelessProcessor):
        ...     def make_receiver(self, down):
        ...         def receive(key, value, timestamp, headers, self=self):
        ...             down(key, value.upper(), timestamp, headers)
        ...         return receive
    """

    def make_receiver(self, down: Receiver) -> Receiver:
        raise NotImplementedError

    def receiver(self) -> Receiver:
        return self.make_receiver(self.child_receiver() or self._forward_parts)

    def _forward_parts(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        self.forward(Record(key, value, timestamp, headers))

    def process(self, record: Record) -> None:
        receive = self.__dict__.get("_receive")
        if receive is None:  # built at the first record, once the children are connected
            receive = self._receive = self.receiver()
        receive(record.key, record.value, record.timestamp, record.headers)


class StreamFilter(StatelessProcessor):
    def __init__(self, predicate: Callable[[Any, Any], bool], negate: bool = False) -> None:
        self.predicate = predicate
        self.negate = negate

    def make_receiver(self, down: Receiver) -> Receiver:
        predicate, negate = self.predicate, self.negate

        def receive(key: Any, value: Any, timestamp: int, headers: Headers,
                    self: Processor = self) -> None:
            if bool(predicate(key, value)) != negate:
                down(key, value, timestamp, headers)

        return receive


class StreamMap(StatelessProcessor):
    """``mapper(key, value) -> (new_key, new_value)``."""

    def __init__(self, mapper: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        self.mapper = mapper

    def make_receiver(self, down: Receiver) -> Receiver:
        mapper = self.mapper

        def receive(key: Any, value: Any, timestamp: int, headers: Headers,
                    self: Processor = self) -> None:
            k, v = mapper(key, value)
            down(k, v, timestamp, headers)

        return receive


class StreamMapValues(StatelessProcessor):
    """``mapper(key, value) -> new_value`` (the DSL adapts one-argument mappers)."""

    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        self.mapper = mapper

    def make_receiver(self, down: Receiver) -> Receiver:
        mapper = self.mapper

        def receive(key: Any, value: Any, timestamp: int, headers: Headers,
                    self: Processor = self) -> None:
            down(key, mapper(key, value), timestamp, headers)

        return receive


class StreamSelectKey(StatelessProcessor):
    def __init__(self, selector: Callable[[Any, Any], Any]) -> None:
        self.selector = selector

    def make_receiver(self, down: Receiver) -> Receiver:
        selector = self.selector

        def receive(key: Any, value: Any, timestamp: int, headers: Headers,
                    self: Processor = self) -> None:
            down(selector(key, value), value, timestamp, headers)

        return receive


class StreamFlatMap(StatelessProcessor):
    """``mapper(key, value) -> iterable of (new_key, new_value)``."""

    def __init__(self, mapper: Callable[[Any, Any], Iterable[tuple[Any, Any]]]) -> None:
        self.mapper = mapper

    def make_receiver(self, down: Receiver) -> Receiver:
        mapper = self.mapper

        def receive(key: Any, value: Any, timestamp: int, headers: Headers,
                    self: Processor = self) -> None:
            for k, v in mapper(key, value):
                down(k, v, timestamp, headers)

        return receive


class StreamFlatMapValues(StatelessProcessor):
    def __init__(self, mapper: Callable[[Any, Any], Iterable[Any]]) -> None:
        self.mapper = mapper

    def make_receiver(self, down: Receiver) -> Receiver:
        mapper = self.mapper

        def receive(key: Any, value: Any, timestamp: int, headers: Headers,
                    self: Processor = self) -> None:
            for v in mapper(key, value):
                down(key, v, timestamp, headers)

        return receive


class StreamPeek(StatelessProcessor):
    """Calls ``action(key, value)`` and forwards the record unchanged (``foreach`` when last)."""

    def __init__(self, action: Callable[[Any, Any], Any]) -> None:
        self.action = action

    def make_receiver(self, down: Receiver) -> Receiver:
        action = self.action

        def receive(key: Any, value: Any, timestamp: int, headers: Headers,
                    self: Processor = self) -> None:
            action(key, value)
            down(key, value, timestamp, headers)

        return receive


class StreamBranch(Operator):
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


class PassThrough(StatelessProcessor):
    """Forwards every record (merge points, branch children, repartition filters)."""

    def make_receiver(self, down: Receiver) -> Receiver:
        return down


NULL_KEY_BEFORE_REPARTITION = "null key before repartition"


class DropNullKeys(StatelessProcessor):
    """Drops records whose key is None before a repartition, counting them (Kafka Streams does
    the same: an aggregation cannot place a record without a key)."""

    def make_receiver(self, down: Receiver) -> Receiver:
        def receive(key: Any, value: Any, timestamp: int, headers: Headers,
                    self: Processor = self) -> None:
            if key is None:
                self.context.record_dropped(self.name, NULL_KEY_BEFORE_REPARTITION)
                return
            down(key, value, timestamp, headers)

        return receive


class Discard(StatelessProcessor):
    """Drops every record: stands for the branches an upgrade's backfill leaves out (see
    ``runtime/spark/upgrade.py``), so that a parent forwarding to them by name still can."""

    def make_receiver(self, down: Receiver) -> Receiver:
        def receive(key: Any, value: Any, timestamp: int, headers: Headers) -> None:
            return None

        return receive
