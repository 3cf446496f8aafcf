"""The record-at-a-time primitives every operator is built from.

A :class:`Processor` receives one :class:`Record` at a time and forwards records to its children.
Operators downstream of a KTable receive records whose value is a :class:`Change` (new, old).
A processor sees the task it runs in only through a narrow :class:`ProcessorContext` (Kafka
Streams' ``ProcessorContext``): its stores, stream time, the record being processed, the record
collector and its own wiring. The engine (``streamtable.engine``) implements the context; this
module does not import it, so the dependency runs one way: engine -> processors.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

from streamtable.records import Headers

if TYPE_CHECKING:
    from streamtable.processors.cache import ChangeForwarder
    from streamtable.serde import Serde

V = TypeVar("V")

# A processor's entry taking a record's parts: ``receive(key, value, timestamp, headers)``.
Receiver = Callable[[Any, Any, int, Headers], None]


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


class RecordMetadata(NamedTuple):
    """Where the record being processed was read: its topic, partition and offset."""

    topic: str
    partition: int
    offset: int


class PunctuationType(enum.Enum):
    """What drives a punctuation (Kafka Streams' ``PunctuationType``).

    ``STREAM_TIME``: the task's stream time, which only records advance: a punctuation fires
    once when stream time reaches its next time, and the next time moves to the first multiple
    of the interval after the current stream time (missed intervals are not caught up).
    ``WALL_CLOCK_TIME``: the system time (the test driver's mock clock; on Spark the time the
    micro-batch started, recorded with the batch), checked by the host once per commit.
    """

    STREAM_TIME = "stream_time"
    WALL_CLOCK_TIME = "wall_clock_time"


class Cancellable(Protocol):
    """What :meth:`ProcessorContext.schedule` returns: ``cancel()`` stops the punctuation."""

    def cancel(self) -> None: ...


Punctuator = Callable[[int], None]
"""Called with the current stream time or wall-clock time (ms) when a punctuation fires."""


@dataclass(frozen=True)
class NodeWiring:
    """What a source or sink node needs beyond its own arguments, resolved once per application
    from the topology and the configuration (default serdes, real topic names, ...).

    ``partition_like``: for a sink whose records must land in the partition Kafka's default
    partitioner picks for the key as ``partition_like = (topic, key serde)`` writes it (the
    subscriptions of a foreign-key join, which must meet the right table's rows).
    """

    topics: tuple[str, ...]
    key_serde: Serde
    value_serde: Serde
    carries_changes: bool = False
    check_partitioner: bool = False
    partition_like: tuple[str, Serde] | None = None


class ProcessorContext(Protocol):
    """What a processor may ask of the task it runs in (and nothing else).

    Example:
        >>> class CountDrops(Processor):
        ...     def process(self, record):
        ...         if record.value is None:
        ...             self.context.record_dropped(self.name, "null value")
        ...         else:
        ...             self.forward(record)
    """

    @property
    def application_id(self) -> str: ...

    @property
    def task_id(self) -> int:
        """The partition this task processes."""
        ...

    @property
    def stream_time(self) -> int:
        """The largest timestamp this task has seen (-1 before the first record)."""
        ...

    def advance_stream_time(self, timestamp: int) -> None:
        """Called by sources with each record's event time; stream time never goes back."""
        ...

    def record_metadata(self) -> RecordMetadata | None:
        """Topic, partition and offset of the input record being processed (None at a cache
        flush that no record caused)."""
        ...

    def get_state_store(self, name: str) -> Any: ...

    def change_forwarder(self, processor: Processor, store_name: str) -> ChangeForwarder:
        """The forwarder of ``store_name``'s changes, cached or not as the store says."""
        ...

    def caching_enabled(self, store_name: str) -> bool:
        """Whether ``store_name`` caches (forwards only the last change per key per commit)."""
        ...

    def register_flush(self, flush: Callable[[], bool]) -> None:
        """Have ``flush()`` called at every commit, with the caches, until none of them holds
        anything (it returns whether it forwarded anything)."""
        ...

    def wiring(self, node: str) -> NodeWiring:
        """The resolved wiring of a source or sink node."""
        ...

    def partitions_of(self, topic: str) -> int:
        """Partition count of a (real) topic as this run knows it."""
        ...

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
             headers: Headers, partition: int | None) -> None:
        """Hand a serialized record to the task's record collector."""
        ...

    def record_dropped(self, processor: str, reason: str) -> None:
        """Count and log a record dropped by Kafka Streams' rules (null keys, late records)."""
        ...

    def schedule(self, processor: Processor, interval_ms: int, punctuation_type: PunctuationType,
                 punctuator: Punctuator) -> Cancellable:
        """Call ``punctuator(time)`` every ``interval_ms`` of stream time or wall-clock time, on
        behalf of ``processor`` (whose name any error of the punctuator carries)."""
        ...

    def current_system_time_ms(self) -> int:
        """The task's wall-clock time: the host's clock, fixed for one commit interval."""
        ...

    def request_commit(self) -> None:
        """Ask the host to commit soon (every host commits at least once per batch/record)."""
        ...


class Processor:
    """Base class of every operator.

    ``init`` receives the :class:`ProcessorContext` of the task the processor runs in;
    ``process`` is called once per record; ``self.forward(record)`` hands a record to every
    child (or to one named child).

    Example:
        >>> class Double(Processor):
        ...     def process(self, record):
        ...         self.forward(record.with_value(record.value * 2))
    """

    name: str = ""
    # True for processors that call ``forward(record, child=name)``
    forwards_by_name = False
    context: ProcessorContext
    _children: list[Processor]
    _children_by_name: dict[str, Processor]

    def init(self, context: ProcessorContext) -> None:
        self.context = context

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

    def receiver(self) -> Receiver:
        """This processor as a function of a record's parts (key, value, timestamp, headers).

        Chains of stateless operators pass records along without building a :class:`Record`
        at every hop: an operator that can work on the parts overrides this and calls its
        child's receiver (see :meth:`child_receiver`). The default builds the Record and calls
        ``process``.
        """
        process = self.process

        def receive(key: Any, value: Any, timestamp: int, headers: Headers) -> None:
            process(Record(key, value, timestamp, headers))

        return receive

    def child_receiver(self) -> Receiver | None:
        """The receiver of this processor's only child, or None when it forwards otherwise
        (several children, by name, or an overridden ``forward``)."""
        if (len(self._children) != 1 or self.forwards_by_name
                or type(self).forward is not Processor.forward):
            return None
        return self._children[0].receiver()


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


