"""State stores declared by users for their own processors (Kafka Streams' ``Stores``).

A store added with :meth:`StreamsBuilder.add_state_store` is a task store like the DSL's: one per
task, committed with the task (exactly once on Spark), restored with it. A processor reaches it
by name once connected: ``stream.process(MyProcessor, "store-name")``.

Key-value stores (``Stores.key_value_store_builder``) give a processor a
:class:`~streamtable.processors.user.KeyValueStoreView`; timestamped ones
(``Stores.timestamped_key_value_store_builder``) hold
:class:`~streamtable.state.timestamped.ValueAndTimestamp` values, and
``Stores.timestamped_key_value_store_with_headers_builder``
:class:`~streamtable.state.timestamped.ValueTimestampHeaders` values; window stores
(``Stores.window_store_builder``) give a :class:`~streamtable.state.window_store.WindowStore`;
versioned stores (``Stores.versioned_key_value_store_builder``) give a
:class:`~streamtable.state.versioned.VersionedKeyValueStore`. A versioned store supplier also
materializes a table: ``Materialized.as_(Stores.persistent_versioned_key_value_store(...))``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from streamtable.durations import to_ms
from streamtable.serde import Serde


@dataclass(frozen=True)
class KeyValueStoreSupplier:
    """Names a key-value store; made by :meth:`Stores.in_memory_key_value_store` or
    :meth:`Stores.persistent_key_value_store`."""

    name: str
    persistent: bool


@dataclass(frozen=True)
class WindowStoreSupplier:
    """Names a window store and its windows: their size, how long they are kept (the retention
    period, at least the window size) and whether a window keeps every value put into it
    (``retain_duplicates``). Made by :meth:`Stores.persistent_window_store` or
    :meth:`Stores.in_memory_window_store`."""

    name: str
    persistent: bool
    retention_ms: int
    window_size_ms: int
    retain_duplicates: bool = False


@dataclass(frozen=True)
class VersionedKeyValueStoreSupplier:
    """Names a versioned key-value store: how long it keeps the older values of a key (its
    history retention, which is also how late a put may come) and the segment interval its
    expired versions are dropped by. Made by :meth:`Stores.persistent_versioned_key_value_store`
    or :meth:`Stores.in_memory_versioned_key_value_store`."""

    name: str
    persistent: bool
    history_retention_ms: int
    segment_interval_ms: int


@dataclass(frozen=True)
class StoreBuilder:
    """A key-value store to add to a topology: its name, serdes, whether it has a changelog
    (shown by ``describe()``) and whether users may query it (``driver.get_key_value_store``
    always can; ``app.store(name)`` and the HTTP API need ``queryable``).

    ``kind`` is ``"key-value"``, ``"window"`` (then with the window store's size, retention
    and duplicates policy) or ``"versioned"`` (then with its history retention in
    ``retention_ms`` and its segment interval); ``timestamped`` stores hold values with their
    timestamps, and ``headers`` stores with the headers of the record that wrote them too.

    >>> StoreBuilder("last-state").with_queryable().queryable
    True
    """

    name: str
    key_serde: Serde | str | None = None
    value_serde: Serde | str | None = None
    logging: bool = True
    queryable: bool = False
    persistent: bool = False
    kind: str = "key-value"
    timestamped: bool = False
    headers: bool = False
    window_size_ms: int | None = None
    retention_ms: int | None = None
    retain_duplicates: bool = False
    segment_interval_ms: int | None = None

    def with_logging_disabled(self) -> StoreBuilder:
        """No changelog for the store.

        >>> StoreBuilder("s").with_logging_disabled().logging
        False
        """
        return replace(self, logging=False)

    def with_logging_enabled(self) -> StoreBuilder:
        """A changelog for the store (the default).

        >>> StoreBuilder("s").with_logging_disabled().with_logging_enabled().logging
        True
        """
        return replace(self, logging=True)

    def with_queryable(self, queryable: bool = True) -> StoreBuilder:
        """Serve the store to interactive queries (``app.store(name)``, the HTTP API)."""
        return replace(self, queryable=queryable)


class Stores:
    """Factories of user stores, in Kafka Streams' shape.

    >>> builder = Stores.key_value_store_builder(
    ...     Stores.persistent_key_value_store("last-state"), "string", "string")
    >>> builder.name, builder.persistent
    ('last-state', True)

    In-memory and persistent stores behave the same: where a task's working copy lives
    follows ``default.dsl.store`` (dicts or RocksDB), and both are durable task state.
    """

    @staticmethod
    def in_memory_key_value_store(name: str) -> KeyValueStoreSupplier:
        """A key-value store named ``name``, kept in memory.

        >>> Stores.in_memory_key_value_store("seen").persistent
        False
        """
        return KeyValueStoreSupplier(name, persistent=False)

    @staticmethod
    def persistent_key_value_store(name: str) -> KeyValueStoreSupplier:
        """A key-value store named ``name``, persistent (see the class's note).

        >>> Stores.persistent_key_value_store("seen").name
        'seen'
        """
        return KeyValueStoreSupplier(name, persistent=True)

    @staticmethod
    def persistent_timestamped_key_value_store(name: str) -> KeyValueStoreSupplier:
        """The same as :meth:`persistent_key_value_store`: whether values carry timestamps
        is the builder's choice (:meth:`timestamped_key_value_store_builder`)."""
        return KeyValueStoreSupplier(name, persistent=True)

    @staticmethod
    def key_value_store_builder(supplier: KeyValueStoreSupplier,
                                key_serde: Serde | str | None = None,
                                value_serde: Serde | str | None = None) -> StoreBuilder:
        """A key-value store: a processor gets, puts and iterates plain values."""
        return StoreBuilder(supplier.name, key_serde, value_serde,
                            persistent=supplier.persistent)

    @staticmethod
    def timestamped_key_value_store_builder(supplier: KeyValueStoreSupplier,
                                            key_serde: Serde | str | None = None,
                                            value_serde: Serde | str | None = None
                                            ) -> StoreBuilder:
        """A key-value store whose values carry timestamps (Kafka Streams'
        ``TimestampedKeyValueStore``): a processor puts and gets
        :class:`~streamtable.state.timestamped.ValueAndTimestamp` values.

        >>> from streamtable import ValueAndTimestamp
        >>> b = Stores.timestamped_key_value_store_builder(
        ...     Stores.persistent_timestamped_key_value_store("last-price"))
        >>> b.timestamped
        True
        """
        return StoreBuilder(supplier.name, key_serde, value_serde,
                            persistent=supplier.persistent, timestamped=True)

    @staticmethod
    def persistent_timestamped_key_value_store_with_headers(name: str) -> KeyValueStoreSupplier:
        """The same as :meth:`persistent_key_value_store` (KIP-1271's name): whether values
        carry timestamps and headers is the builder's choice
        (:meth:`timestamped_key_value_store_with_headers_builder`)."""
        return KeyValueStoreSupplier(name, persistent=True)

    @staticmethod
    def timestamped_key_value_store_with_headers_builder(
            supplier: KeyValueStoreSupplier, key_serde: Serde | str | None = None,
            value_serde: Serde | str | None = None) -> StoreBuilder:
        """A key-value store whose values carry their timestamps and the headers of the record
        that wrote them (Kafka Streams' ``TimestampedKeyValueStoreWithHeaders``, KIP-1271): a
        processor puts and gets
        :class:`~streamtable.state.timestamped.ValueTimestampHeaders` values.

        >>> b = Stores.timestamped_key_value_store_with_headers_builder(
        ...     Stores.persistent_timestamped_key_value_store_with_headers("last-event"))
        >>> b.timestamped, b.headers
        (True, True)
        """
        return StoreBuilder(supplier.name, key_serde, value_serde,
                            persistent=supplier.persistent, timestamped=True, headers=True)

    @staticmethod
    def persistent_window_store(name: str, retention: int | timedelta,
                                window_size: int | timedelta,
                                retain_duplicates: bool = False) -> WindowStoreSupplier:
        """A window store of windows ``window_size`` long (ms or ``timedelta``), each kept
        until the store's stream time (its largest window start) is ``retention`` past it.

        >>> s = Stores.persistent_window_store("clicks", timedelta(hours=1),
        ...                                    timedelta(minutes=5))
        >>> s.retention_ms, s.window_size_ms
        (3600000, 300000)
        """
        return Stores._window_store(name, True, retention, window_size, retain_duplicates)

    @staticmethod
    def persistent_timestamped_window_store(name: str, retention: int | timedelta,
                                            window_size: int | timedelta,
                                            retain_duplicates: bool = False
                                            ) -> WindowStoreSupplier:
        """The same as :meth:`persistent_window_store` (timestamps are the builder's
        choice: :meth:`timestamped_window_store_builder`)."""
        return Stores._window_store(name, True, retention, window_size, retain_duplicates)

    @staticmethod
    def in_memory_window_store(name: str, retention: int | timedelta,
                               window_size: int | timedelta,
                               retain_duplicates: bool = False) -> WindowStoreSupplier:
        """Like :meth:`persistent_window_store` (see the class docstring: both are durable
        task state)."""
        return Stores._window_store(name, False, retention, window_size, retain_duplicates)

    @staticmethod
    def _window_store(name: str, persistent: bool, retention: int | timedelta,
                      window_size: int | timedelta,
                      retain_duplicates: bool) -> WindowStoreSupplier:
        retention_ms = to_ms(retention, "retention")
        size_ms = to_ms(window_size, "window_size")
        if size_ms <= 0:
            raise ValueError(f"window store {name!r}: window_size must be positive, "
                             f"not {size_ms} ms")
        if retention_ms < size_ms:
            raise ValueError(
                f"window store {name!r}: the retention period ({retention_ms} ms) must be at "
                f"least the window size ({size_ms} ms)")
        return WindowStoreSupplier(name, persistent, retention_ms, size_ms, retain_duplicates)

    @staticmethod
    def window_store_builder(supplier: WindowStoreSupplier,
                             key_serde: Serde | str | None = None,
                             value_serde: Serde | str | None = None) -> StoreBuilder:
        """A window store (Kafka Streams' ``WindowStore``): a processor puts
        ``(key, value, window_start)`` and fetches windows by key and time range (see
        :class:`~streamtable.state.window_store.WindowStore`).

        >>> from streamtable import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> _ = b.add_state_store(Stores.window_store_builder(
        ...     Stores.persistent_window_store("clicks", 3_600_000, 300_000), "string", "long"))
        """
        return StoreBuilder(supplier.name, key_serde, value_serde,
                            persistent=supplier.persistent, kind="window",
                            window_size_ms=supplier.window_size_ms,
                            retention_ms=supplier.retention_ms,
                            retain_duplicates=supplier.retain_duplicates)

    @staticmethod
    def timestamped_window_store_builder(supplier: WindowStoreSupplier,
                                         key_serde: Serde | str | None = None,
                                         value_serde: Serde | str | None = None
                                         ) -> StoreBuilder:
        """A window store whose values carry timestamps (Kafka Streams'
        ``TimestampedWindowStore``): values are
        :class:`~streamtable.state.timestamped.ValueAndTimestamp`."""
        return replace(Stores.window_store_builder(supplier, key_serde, value_serde),
                       timestamped=True)

    @staticmethod
    def persistent_versioned_key_value_store(name: str, history_retention: int | timedelta,
                                             segment_interval: int | timedelta | None = None
                                             ) -> VersionedKeyValueStoreSupplier:
        """A versioned key-value store (Kafka Streams' ``persistentVersionedKeyValueStore``):
        every value of a key with its validity interval, for ``history_retention`` (ms or
        ``timedelta``) of the store's stream time, read as of any time within it. The history
        retention is also the store's grace period: a put older than the store's stream time
        minus it is refused. ``segment_interval`` (default: Kafka's, from the retention) is
        how much stream time passes between two deletions of expired versions.

        Use it to materialize a table (``Materialized.as_(...)``: a versioned table, see the
        joins guide) or, with :meth:`versioned_key_value_store_builder`, in a processor.

        >>> s = Stores.persistent_versioned_key_value_store("rates", timedelta(minutes=10))
        >>> s.history_retention_ms, s.segment_interval_ms
        (600000, 60000)
        """
        return Stores._versioned(name, True, history_retention, segment_interval)

    @staticmethod
    def in_memory_versioned_key_value_store(name: str, history_retention: int | timedelta,
                                            segment_interval: int | timedelta | None = None
                                            ) -> VersionedKeyValueStoreSupplier:
        """Like :meth:`persistent_versioned_key_value_store` (see the class docstring: both
        are durable task state)."""
        return Stores._versioned(name, False, history_retention, segment_interval)

    @staticmethod
    def _versioned(name: str, persistent: bool, history_retention: int | timedelta,
                   segment_interval: int | timedelta | None) -> VersionedKeyValueStoreSupplier:
        from streamtable.state.versioned import default_segment_interval

        retention_ms = to_ms(history_retention, "history_retention")
        if retention_ms < 0:
            raise ValueError(f"versioned store {name!r}: history_retention must not be "
                             f"negative, not {retention_ms} ms")
        segment_ms = (default_segment_interval(retention_ms) if segment_interval is None
                      else to_ms(segment_interval, "segment_interval"))
        if segment_ms <= 0:
            raise ValueError(f"versioned store {name!r}: segment_interval must be positive, "
                             f"not {segment_ms} ms")
        return VersionedKeyValueStoreSupplier(name, persistent, retention_ms, segment_ms)

    @staticmethod
    def versioned_key_value_store_builder(supplier: VersionedKeyValueStoreSupplier,
                                          key_serde: Serde | str | None = None,
                                          value_serde: Serde | str | None = None
                                          ) -> StoreBuilder:
        """A versioned store for processors (Kafka Streams' ``versionedKeyValueStoreBuilder``):
        a processor puts ``(key, value, timestamp)`` and reads ``get(key)`` or
        ``get(key, as_of)`` (see :class:`~streamtable.state.versioned.VersionedKeyValueStore`).

        >>> from streamtable import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> _ = b.add_state_store(Stores.versioned_key_value_store_builder(
        ...     Stores.persistent_versioned_key_value_store("prices", 3_600_000)))
        """
        return StoreBuilder(supplier.name, key_serde, value_serde,
                            persistent=supplier.persistent, kind="versioned",
                            retention_ms=supplier.history_retention_ms,
                            segment_interval_ms=supplier.segment_interval_ms)
