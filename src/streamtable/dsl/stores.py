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
(``Stores.window_store_builder``) give a :class:`~streamtable.state.window_store.WindowStore`.
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
class StoreBuilder:
    """A key-value store to add to a topology: its name, serdes, whether it has a changelog
    (shown by ``describe()``) and whether users may query it (``driver.get_key_value_store``
    always can; ``app.store(name)`` and the HTTP API need ``queryable``).

    ``kind`` is ``"key-value"`` or ``"window"`` (then with the window store's size, retention
    and duplicates policy); ``timestamped`` stores hold values with their timestamps, and
    ``headers`` stores with the headers of the record that wrote them too.

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
