"""State stores declared by users for their own processors (Kafka Streams' ``Stores``).

A store added with :meth:`StreamsBuilder.add_state_store` is a task store like the DSL's: one per
task, committed with the task (exactly once on Spark), restored with it. A processor reaches it
by name once connected: ``stream.process(MyProcessor, "store-name")``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from streamtable.serde import Serde


@dataclass(frozen=True)
class KeyValueStoreSupplier:
    """Names a key-value store; made by :meth:`Stores.in_memory_key_value_store` or
    :meth:`Stores.persistent_key_value_store`."""

    name: str
    persistent: bool


@dataclass(frozen=True)
class StoreBuilder:
    """A key-value store to add to a topology: its name, serdes, whether it has a changelog
    (shown by ``describe()``) and whether users may query it (``driver.get_key_value_store``
    always can; ``app.store(name)`` and the HTTP API need ``queryable``).

    >>> StoreBuilder("last-state").with_queryable()
    StoreBuilder(name='last-state', key_serde=None, value_serde=None, logging=True, \
queryable=True, persistent=False)
    """

    name: str
    key_serde: Serde | str | None = None
    value_serde: Serde | str | None = None
    logging: bool = True
    queryable: bool = False
    persistent: bool = False

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
    def key_value_store_builder(supplier: KeyValueStoreSupplier,
                                key_serde: Serde | str | None = None,
                                value_serde: Serde | str | None = None) -> StoreBuilder:
        """A key-value store: a processor gets, puts and iterates plain values."""
        return StoreBuilder(supplier.name, key_serde, value_serde,
                            persistent=supplier.persistent)
