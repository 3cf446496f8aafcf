"""What a user's processor (the Processor API: ``KStream.process``) sees of its task.

A user's processor is a :class:`~streamtable.processors.api.Processor` like every operator; its
``init`` receives a :class:`ProcessorApiContext`, the
:class:`~streamtable.processors.api.ProcessorContext` (Kafka Streams' ``api.ProcessorContext``):
the task's context narrowed to this processor (its connected stores, forwarding to its children,
punctuations on its behalf). Stores appear as Kafka Streams' store interfaces over the task's
``(value, timestamp)`` stores: a :class:`KeyValueStoreView` (plain values) for a store built with
``Stores.key_value_store_builder``, a :class:`TimestampedKeyValueStoreView`
(:class:`~streamtable.state.timestamped.ValueAndTimestamp` values) for a timestamped one and for
every store the DSL made (a table's, an aggregation's), a
:class:`TimestampedKeyValueStoreWithHeadersView`
(:class:`~streamtable.state.timestamped.ValueTimestampHeaders` values) for a store that keeps
headers (``Stores.timestamped_key_value_store_with_headers_builder``, and the DSL's stores with
``dsl.store.format=headers``), a :class:`~streamtable.state.window_store.WindowStore` for a
window store, and a :class:`~streamtable.state.versioned.VersionedKeyValueStore` for a versioned
store (a user's, or a versioned table's).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from streamtable.durations import Duration, to_ms
from streamtable.errors import ProcessingError
from streamtable.processors._operator import InternalProcessorContext
from streamtable.processors.api import (
    Cancellable,
    Processor,
    PunctuationType,
    Punctuator,
    Record,
    RecordMetadata,
)
from streamtable.records import to_headers
from streamtable.state.stores import ReadOnlyKeyValueStore, sort_entries
from streamtable.state.timestamped import ValueAndTimestamp, ValueTimestampHeaders
from streamtable.state.window_store import WINDOW_META_STORE, WindowStore

if TYPE_CHECKING:
    from streamtable.state.spec import StoreSpec


class KeyValueStoreView(ReadOnlyKeyValueStore):
    """A task store as a user's processor reads and writes it (Kafka Streams'
    ``KeyValueStore``): ``get``, ``put`` (``None`` deletes), ``put_if_absent``, ``put_all``,
    ``delete``, ``all``, ``range``, ``prefix_scan``, ``approximate_num_entries``. Values are
    stored with the task's stream time as their timestamp.

    >>> from streamtable.state import InMemoryKeyValueStore
    >>> store = KeyValueStoreView(InMemoryKeyValueStore("last-seen"), lambda: 5)
    >>> store.put("mark", "Closed"); store.get("mark"), store.put_if_absent("mark", "Open")
    ('Closed', 'Closed')
    """

    def __init__(self, store: Any, now: Any) -> None:
        super().__init__(store)
        self._now = now

    def put(self, key: Any, value: Any) -> None:
        if key is None:
            raise ValueError(f"store {self.name!r}: a key must not be None")
        if value is None:
            self._store.delete(key)
        else:
            self._store.put(key, (value, self._now()))

    def put_if_absent(self, key: Any, value: Any) -> Any:
        """Put ``value`` unless ``key`` has one; return the value it had (None if absent)."""
        old = self.get(key)
        if old is None:
            self.put(key, value)
        return old

    def put_all(self, entries: Iterable[tuple[Any, Any]]) -> None:
        for k, v in entries:
            self.put(k, v)

    def delete(self, key: Any) -> Any:
        """Remove ``key``; return its old value."""
        return self._show(self._store.delete(key))


class TimestampedKeyValueStoreView(KeyValueStoreView):
    """A task store whose values carry their timestamps, as a user's processor reads and writes
    it (Kafka Streams' ``TimestampedKeyValueStore``): ``get`` gives a
    :class:`~streamtable.state.timestamped.ValueAndTimestamp` (or ``None``), ``put`` takes one
    (``None`` deletes), ``all``/``range``/``prefix_scan`` give ``(key, ValueAndTimestamp)``.

    >>> from streamtable.state import InMemoryKeyValueStore
    >>> store = TimestampedKeyValueStoreView(InMemoryKeyValueStore("prices"), lambda: 5)
    >>> store.put("AAPL", ValueAndTimestamp(190.5, 1_000)); store.get("AAPL")
    ValueAndTimestamp(value=190.5, timestamp=1000)
    """

    def _show(self, stored: Any) -> Any:
        # a DSL store with dsl.store.format=headers holds the headers third
        return None if stored is None else ValueAndTimestamp(stored[0], stored[1])

    def all(self) -> Iterator[tuple[Any, Any]]:
        show = self._show
        return ((k, show(v)) for k, v in sort_entries(list(self._store.items())))

    def put(self, key: Any, value: Any) -> None:
        if key is None:
            raise ValueError(f"store {self.name!r}: a key must not be None")
        if value is None:
            self._store.delete(key)
            return
        if not isinstance(value, tuple) or len(value) != 2:
            raise TypeError(f"timestamped store {self.name!r} takes ValueAndTimestamp values "
                            f"(ValueAndTimestamp(value, timestamp)), not {type(value).__name__}")
        if value[0] is None:
            self._store.delete(key)
        else:
            self._store.put(key, (value[0], value[1]))


class TimestampedKeyValueStoreWithHeadersView(TimestampedKeyValueStoreView):
    """A task store whose values carry their timestamps and the headers of the record that
    wrote them, as a user's processor reads and writes it (Kafka Streams'
    ``TimestampedKeyValueStoreWithHeaders``, KIP-1271): ``get`` gives a
    :class:`~streamtable.state.timestamped.ValueTimestampHeaders` (or ``None``; a value
    stored without headers reads with none), ``put`` takes one (a ``ValueAndTimestamp`` is
    stored with no headers; ``None`` deletes). A DSL store with ``dsl.store.format=headers``
    is read this way.

    >>> from streamtable.state import InMemoryKeyValueStore
    >>> store = TimestampedKeyValueStoreWithHeadersView(InMemoryKeyValueStore("last"), lambda: 5)
    >>> store.put("AAPL", ValueTimestampHeaders(190.5, 1_000, (("source", b"nasdaq"),)))
    >>> store.get("AAPL").headers
    (('source', b'nasdaq'),)
    """

    def _show(self, stored: Any) -> Any:
        return None if stored is None else ValueTimestampHeaders.of_stored(stored)

    def put(self, key: Any, value: Any) -> None:
        if key is None:
            raise ValueError(f"store {self.name!r}: a key must not be None")
        if value is None or (isinstance(value, tuple) and value and value[0] is None):
            self._store.delete(key)
            return
        if not isinstance(value, tuple) or len(value) not in (2, 3):
            raise TypeError(f"store {self.name!r} takes ValueTimestampHeaders values "
                            "(ValueTimestampHeaders(value, timestamp, headers)), not "
                            f"{type(value).__name__}")
        headers = to_headers(value[2]) if len(value) == 3 else ()
        self._store.put(key, (value[0], value[1], headers))


class ReadOnlyStoreView(KeyValueStoreView):
    """A global store as the processors of a task see it (Kafka Streams: only the global
    store's own processor writes it): reads only."""

    def put(self, key: Any, value: Any) -> None:
        raise ProcessingError(f"global store {self.name!r} is read-only here: only the "
                              "processor given to add_global_store writes it")

    def delete(self, key: Any) -> Any:
        self.put(key, None)


class TimestampedReadOnlyStoreView(TimestampedKeyValueStoreView):
    """:class:`ReadOnlyStoreView` with :class:`ValueAndTimestamp` values."""

    put = ReadOnlyStoreView.put  # type: ignore[assignment]
    delete = ReadOnlyStoreView.delete


class TimestampedWithHeadersReadOnlyStoreView(TimestampedKeyValueStoreWithHeadersView):
    """:class:`ReadOnlyStoreView` with :class:`ValueTimestampHeaders` values."""

    put = ReadOnlyStoreView.put  # type: ignore[assignment]
    delete = ReadOnlyStoreView.delete


def store_view(spec: StoreSpec, store: Any, meta: Any, now: Any,
               on_expired: Any = None, read_only: bool = False, headers: bool = False) -> Any:
    """The Processor API's view of a task store, as its spec says (see the module docstring).
    ``meta`` gives the task's store of window stores' stream times; ``read_only`` views (of
    global stores, from other tasks) refuse writes; ``headers``: the store keeps headers
    (``dsl.store.format=headers`` for a DSL store)."""
    if read_only:
        if headers:
            return TimestampedWithHeadersReadOnlyStoreView(store, now)
        return (TimestampedReadOnlyStoreView(store, now) if spec.timestamped
                else ReadOnlyStoreView(store, now))
    if spec.kind == "window" and spec.window_size_ms is not None:
        return WindowStore(store, meta(), window_size=spec.window_size_ms,
                           retention=spec.retention_ms or spec.window_size_ms,
                           retain_duplicates=spec.retain_duplicates,
                           timestamped=spec.timestamped, now=now, on_expired=on_expired)
    if headers:
        return TimestampedKeyValueStoreWithHeadersView(store, now)
    if spec.timestamped:
        return TimestampedKeyValueStoreView(store, now)
    return KeyValueStoreView(store, now)


class RecordFunction(Processor):
    """A processor made of one function of a record, for ``KStream.process(fn)`` and
    ``KStream.process_values(fn)``: ``fn(record)`` returns the record to forward (a new one
    made with ``with_value``, ``with_headers``...) or None to forward nothing. It is how a
    one-line use of a record's headers or timestamp is written without a class.

    >>> from streamtable import Record
    >>> tag = RecordFunction(lambda r: r.with_headers(r.headers + (("seen", b"1"),)))
    >>> tag.fn(Record("k", 1, 0)).headers
    (('seen', b'1'),)
    """

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def process(self, record: Record) -> None:
        out = self.fn(record)
        if out is None:
            return
        if not isinstance(out, Record):
            raise TypeError(f"the function of processor {self.name!r} returned a "
                            f"{type(out).__name__}: it returns a Record (record.with_value(...), "
                            "record.with_headers(...)) or None to forward nothing")
        self.context.forward(out)


_NOT_PROCESSING = object()


def fix_key(proc: Processor) -> None:
    """Make ``proc`` a fixed-key processor (``KStream.process_values``, Kafka Streams'
    ``FixedKeyProcessor``): while it processes a record, every record it forwards has that
    record's key, so the stream needs no repartition downstream. A record of another key
    stops the task with an error naming the processor."""
    process = proc.process
    proc._input_key = _NOT_PROCESSING  # type: ignore[attr-defined]

    def process_fixed(record: Record) -> None:
        proc._input_key = record.key  # type: ignore[attr-defined]
        try:
            process(record)
        finally:
            proc._input_key = _NOT_PROCESSING  # type: ignore[attr-defined]

    forward = proc.forward

    def forward_fixed(record: Record, child: str | None = None) -> None:
        check_fixed_key(proc, record)
        forward(record, child)

    proc.process = process_fixed  # type: ignore[method-assign]
    proc.forward = forward_fixed  # type: ignore[method-assign]


def check_fixed_key(proc: Processor, record: Record) -> None:
    """Raise if fixed-key processor ``proc`` forwards a record of another key than the one
    it is processing (see :func:`fix_key`)."""
    key = getattr(proc, "_input_key", _NOT_PROCESSING)
    if key is _NOT_PROCESSING or record.key is key:
        return
    if record.key != key:
        raise ProcessingError(
            f"processor {proc.name!r} of process_values forwarded a record with key "
            f"{record.key!r} while processing key {key!r}: process_values keeps each record's "
            "key (use process to change keys)", processor=proc.name)


class ProcessorApiContext:
    """The context of a user's processor (the
    :class:`~streamtable.processors.api.ProcessorContext` protocol, Kafka Streams'
    ``api.ProcessorContext``), over the task's internal context.

    Example:
        >>> from streamtable import Processor, PunctuationType, Record
        >>> class LastSeen(Processor):
        ...     def init(self, context):
        ...         self.context = context
        ...         self.store = context.get_state_store("last-seen")
        ...         context.schedule(60_000, PunctuationType.WALL_CLOCK_TIME, self.report)
        ...     def process(self, record):
        ...         self.store.put(record.key, record.timestamp)
        ...     def report(self, now):
        ...         for user, seen in self.store.all():
        ...             self.context.forward(Record(user, now - seen, now))
    """

    __slots__ = ("_task", "_node", "_connected", "_read_only", "_stores")

    def __init__(self, task: InternalProcessorContext, node: Processor,
                 stores: Mapping[str, StoreSpec], read_only: frozenset[str] = frozenset()
                 ) -> None:
        self._task = task
        self._node = node
        self._connected = stores
        self._read_only = read_only
        self._stores: dict[str, Any] = {}

    @property
    def application_id(self) -> str:
        return self._task.application_id

    @property
    def task_id(self) -> int:
        """The partition this task processes."""
        return self._task.task_id

    @property
    def processor_name(self) -> str:
        return self._node.name

    def forward(self, record: Record, child: str | None = None) -> None:
        """Hand ``record`` to every child of this processor, or to the one named ``child``."""
        if child is not None and child not in self._node._children_by_name:
            raise ProcessingError(
                f"{child!r} is not a child of processor {self._node.name!r}; children: "
                f"{sorted(self._node._children_by_name)}", processor=self._node.name)
        check_fixed_key(self._node, record)
        Processor.forward(self._node, record, child)

    def get_state_store(self, name: str) -> Any:
        """A store connected to this processor (``stream.process(..., "name")``): a
        :class:`KeyValueStoreView`, a :class:`TimestampedKeyValueStoreView`, a
        :class:`~streamtable.state.window_store.WindowStore` or a
        :class:`~streamtable.state.versioned.VersionedKeyValueStore`, as the store was
        built."""
        view = self._stores.get(name)
        if view is None:
            spec = self._connected.get(name)
            if spec is None:
                raise ProcessingError(
                    f"store {name!r} is not connected to processor {self._node.name!r} "
                    f"(connected: {list(self._connected)}); name it in "
                    "stream.process(supplier, store_name)", processor=self._node.name)
            task, node = self._task, self._node.name
            if spec.kind == "versioned":
                # one view per task: a DSL operator may write the same store
                view = self._stores[name] = task.versioned_store(name)
                return view
            view = self._stores[name] = store_view(
                spec, task.get_state_store(name),
                lambda: task.internal_store(WINDOW_META_STORE), lambda: task.stream_time,
                lambda: task.record_dropped(node, "expired window store record"),
                read_only=name in self._read_only, headers=task.store_headers(name))
        return view

    def schedule(self, interval_ms: Duration, punctuation_type: PunctuationType,
                 punctuator: Punctuator) -> Cancellable:
        """Call ``punctuator(time)`` every ``interval_ms`` (ms or a ``timedelta``) of stream
        time or wall-clock time (see :class:`~streamtable.processors.api.PunctuationType`);
        ``cancel()`` the result to stop. Schedule in ``init``: the schedule is task state and
        continues across restarts (and the Spark runtime's micro-batches)."""
        interval = to_ms(interval_ms, "interval_ms")
        return self._task.schedule(self._node, interval, punctuation_type, punctuator)

    def record_metadata(self) -> RecordMetadata | None:
        """Topic, partition and offset of the input record being processed (None in a
        punctuator)."""
        return self._task.record_metadata()

    def current_stream_time_ms(self) -> int:
        """The largest timestamp this task has seen (-1 before the first record)."""
        return self._task.stream_time

    def current_system_time_ms(self) -> int:
        """Wall-clock time as the host gives it (the test driver's mock clock; on Spark the
        micro-batch's recorded time)."""
        return self._task.current_system_time_ms()

    def commit(self) -> None:
        """Request a commit. Every host commits at least after each record (test driver) or
        micro-batch (Spark), so this changes nothing there."""
        self._task.request_commit()
