"""The record-at-a-time primitives every operator is built from.

A :class:`Processor` receives one :class:`Record` at a time and forwards records to its children.
Operators downstream of a KTable receive records whose value is a :class:`Change` (new, old).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from streamtable.processors.task import Task

V = TypeVar("V")

Headers = tuple[tuple[str, bytes | None], ...]


class Change(Generic[V]):
    """One update of a KTable row: the ``new`` value and the ``old`` one (``None`` = absent).

    >>> Change({1, 3}, {1})
    Change(new={1, 3}, old={1})
    """

    __slots__ = ("new", "old")

    def __init__(self, new: V | None, old: V | None) -> None:
        self.new = new
        self.old = old

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Change) and self.new == other.new and self.old == other.old

    def __repr__(self) -> str:
        return f"Change(new={self.new!r}, old={self.old!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Change, (self.new, self.old))


class Record:
    """A key, a value, an event-time timestamp in milliseconds, and headers.

    >>> Record("k", 1, 1000).with_value(2)
    Record(key='k', value=2, timestamp=1000)
    """

    __slots__ = ("key", "value", "timestamp", "headers")

    def __init__(self, key: Any, value: Any, timestamp: int, headers: Headers = ()) -> None:
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers

    def with_value(self, value: Any) -> Record:
        return Record(self.key, value, self.timestamp, self.headers)

    def with_key(self, key: Any) -> Record:
        return Record(key, self.value, self.timestamp, self.headers)

    def with_key_value(self, key: Any, value: Any) -> Record:
        return Record(key, value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp: int) -> Record:
        return Record(self.key, self.value, timestamp, self.headers)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Record)
            and self.key == other.key
            and self.value == other.value
            and self.timestamp == other.timestamp
            and self.headers == other.headers
        )

    def __repr__(self) -> str:
        return f"Record(key={self.key!r}, value={self.value!r}, timestamp={self.timestamp})"


class RawRecord:
    """A record as it sits in a topic: serialized key and value plus its position."""

    __slots__ = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers = (),
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers

    def __repr__(self) -> str:
        return (
            f"RawRecord(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
            f"timestamp={self.timestamp}, key={self.key!r}, value={self.value!r})"
        )


class Processor:
    """Base class of every operator.

    ``init`` receives the task the processor runs in; ``process`` is called once per record;
    ``self.forward(record)`` hands a record to every child (or to one named child).

    Example:
        >>> class Double(Processor):
        ...     def process(self, record):
        ...         self.forward(record.with_value(record.value * 2))
    """

    name: str = ""
    task: Task
    _children: list[Processor]
    _children_by_name: dict[str, Processor]

    def init(self, task: Task) -> None:
        self.task = task

    def process(self, record: Record) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def forward(self, record: Record, child: str | None = None) -> None:
        if child is not None:
            self._children_by_name[child].process(record)
            return
        for c in self._children:
            c.process(record)


def failing_processor(error: BaseException) -> str | None:
    """The innermost processor on the traceback of ``error``: the operator where it failed.

    Reading the traceback only when something failed keeps the record path free of
    bookkeeping.
    """
    name = None
    tb = error.__traceback__
    while tb is not None:
        obj = tb.tb_frame.f_locals.get("self")
        if isinstance(obj, Processor):
            name = obj.name
        tb = tb.tb_next
    return name


