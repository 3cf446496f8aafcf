"""The record-at-a-time primitives every operator is built from.

A :class:`Processor` receives one :class:`Record` at a time and forwards records to its children.
Operators downstream of a KTable receive records whose value is a :class:`Change` (new, old).
A user's processor sees the task it runs in only through a narrow :class:`ProcessorContext`
(Kafka Streams' ``api.ProcessorContext``): its connected stores, forwarding, punctuations, the
record being processed. The built-in operators get the engine's hooks besides (record caches,
the record collector, their wiring: ``processors/_operator.py``). The engine implements both;
this module does not import it, so the dependency runs one way: engine -> processors.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

from streamtable.durations import Duration
from streamtable.records import Headers, HeadersLike, to_headers

if TYPE_CHECKING:
    from streamtable.serde import Serde

V = TypeVar("V")

# A processor's entry taking a record's parts: ``receive(key, value, timestamp, headers)``.
Receiver = Callable[[Any, Any, int, Headers], None]


class Change(Generic[V]):
    """One update of a KTable row: the ``new`` value and the ``old`` one (``None`` = absent).

    ``is_latest`` is False for an out-of-order update of a versioned table (KIP-914): one
    older than the key's latest version, kept in the table's history. It is forwarded (a
    ``to_stream`` shows it), but aggregations and table-table joins skip it.

    >>> Change({1, 3}, {1})
    Change(new={1, 3}, old={1})
    >>> Change("late", "now", is_latest=False)
    Change(new='late', old='now', is_latest=False)
    """

    __slots__ = ("new", "old", "is_latest")

    def __init__(self, new: V | None, old: V | None, is_latest: bool = True) -> None:
        self.new = new
        self.old = old
        self.is_latest = is_latest

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Change) and self.new == other.new and self.old == other.old
                and self.is_latest == other.is_latest)

    def __repr__(self) -> str:
        latest = "" if self.is_latest else ", is_latest=False"
        return f"Change(new={self.new!r}, old={self.old!r}{latest})"

    def __reduce__(self) -> tuple[Any, ...]:
        if self.is_latest:
            return (Change, (self.new, self.old))
        return (Change, (self.new, self.old, False))


class Record:
    """A key, a value, an event-time timestamp in milliseconds, and headers (Kafka Streams'
    ``api.Record``).

    ``headers`` are the record's Kafka headers as a tuple of ``(name, value)`` pairs (values
    are bytes or None), in order; they travel with the record through every operator and are
    written with it to output topics. A record is immutable: ``with_value``,
    ``with_headers``... return a new one.

    >>> Record("k", 1, 1000).with_value(2)
    Record(key='k', value=2, timestamp=1000)
    >>> r = Record("k", 1, 1000, (("trace-id", b"abc"),))
    >>> r.last_header("trace-id"), r.with_headers({"tenant": "t1"}).headers
    (b'abc', (('tenant', b't1'),))
    """

    __slots__ = ("key", "value", "timestamp", "headers")

    def __init__(self, key: Any, value: Any, timestamp: int, headers: Headers = ()) -> None:
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers

    def with_value(self, value: Any) -> Record:
        """This record with another value (see the class's example)."""
        return Record(self.key, value, self.timestamp, self.headers)

    def with_key(self, key: Any) -> Record:
        """This record with another key.

        >>> Record("k", 1, 1000).with_key("j")
        Record(key='j', value=1, timestamp=1000)
        """
        return Record(key, self.value, self.timestamp, self.headers)

    def with_key_value(self, key: Any, value: Any) -> Record:
        """This record with another key and value.

        >>> Record("k", 1, 1000).with_key_value("j", 2)
        Record(key='j', value=2, timestamp=1000)
        """
        return Record(key, value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp: int) -> Record:
        """This record with another timestamp (ms).

        >>> Record("k", 1, 1000).with_timestamp(0).timestamp
        0
        """
        return Record(self.key, self.value, timestamp, self.headers)

    def with_headers(self, headers: HeadersLike) -> Record:
        """This record with other headers (Kafka Streams' ``withHeaders``): ``(name, value)``
        pairs or a mapping, values as bytes, text (written as UTF-8) or None. To add one,
        keep the others: ``record.with_headers(record.headers + (("name", b"v"),))``.

        >>> Record("k", 1, 1000).with_headers([("source", "web")]).headers
        (('source', b'web'),)
        """
        return Record(self.key, self.value, self.timestamp, to_headers(headers))

    def last_header(self, name: str) -> bytes | None:
        """The value of the last header named ``name`` (Kafka's ``Headers.lastHeader``), or
        None when the record has none of that name.

        >>> Record("k", 1, 0, (("v", b"1"), ("v", b"2"))).last_header("v")
        b'2'
        """
        for key, value in reversed(self.headers):
            if key == name:
                return value
        return None

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Record)
            and self.key == other.key
            and self.value == other.value
            and self.timestamp == other.timestamp
            and self.headers == other.headers
        )

    def __repr__(self) -> str:
        headers = f", headers={self.headers!r}" if self.headers else ""
        return (f"Record(key={self.key!r}, value={self.value!r}, "
                f"timestamp={self.timestamp}{headers})")


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

    >>> PunctuationType.STREAM_TIME.value
    'stream_time'
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
    """What a user's processor (the Processor API) may ask of the task it runs in: Kafka
    Streams' ``api.ProcessorContext``, narrowed to the processor (its connected stores,
    forwarding to its children, punctuations on its behalf).

    Example:
        >>> class CountDrops(Processor):
        ...     def init(self, context: ProcessorContext) -> None:
        ...         self.context = context
        ...         self.seen = context.get_state_store("seen")
        ...     def process(self, record):
        ...         if self.seen.put_if_absent(record.key, record.timestamp) is None:
        ...             self.context.forward(record)
    """

    @property
    def application_id(self) -> str:
        """The application's ``application.id``."""
        ...

    @property
    def task_id(self) -> int:
        """The partition this task processes."""
        ...

    @property
    def processor_name(self) -> str:
        """The name of the processor's node in the topology."""
        ...

    def forward(self, record: Record, child: str | None = None) -> None:
        """Hand ``record`` to every child of this processor, or to the one named ``child``."""
        ...

    def get_state_store(self, name: str) -> Any:
        """A store connected to this processor, or any global store (read only): a key-value
        store, a timestamped one (values ``ValueAndTimestamp``: a DSL store's) or a window
        store, as the store was built (see ``processors/user.py``)."""
        ...

    def schedule(self, interval_ms: Duration, punctuation_type: PunctuationType,
                 punctuator: Punctuator) -> Cancellable:
        """Call ``punctuator(time)`` every ``interval_ms`` (ms or a ``timedelta``) of stream
        time or wall-clock time; ``cancel()`` the result to stop."""
        ...

    def record_metadata(self) -> RecordMetadata | None:
        """Topic, partition and offset of the input record being processed (None in a
        punctuator)."""
        ...

    def current_stream_time_ms(self) -> int:
        """The largest timestamp this task has seen (-1 before the first record)."""
        ...

    def current_system_time_ms(self) -> int:
        """Wall-clock time as the host gives it."""
        ...

    def commit(self) -> None:
        """Request a commit."""
        ...


C = TypeVar("C")  # the context a processor's init receives


class Processor(Generic[C]):
    """Base class of every operator.

    ``init`` receives the :class:`ProcessorContext` of the task the processor runs in (the
    built-in operators: the task's internal context, see ``processors/_operator.py``);
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
    context: C
    _children: list[Processor]
    _children_by_name: dict[str, Processor]

    def init(self, context: C) -> None:
        """Called once before the first record with the task's context; the default keeps it
        as ``self.context``. Get stores and schedule punctuations here (see
        :class:`ProcessorContext`)."""
        self.context = context

    def process(self, record: Record) -> None:
        """Called once per record: what a processor implements (see the class's example)."""
        raise NotImplementedError

    def close(self) -> None:
        """Called when the task closes (release what ``init`` acquired)."""
        pass

    def forward(self, record: Record, child: str | None = None) -> None:
        """Hand ``record`` to every child of this processor, or to the one named ``child``
        (see the class's example)."""
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


