"""Configuration objects of the DSL: how a store is materialized."""

from __future__ import annotations

from dataclasses import dataclass, replace

from streamtable.dsl.stores import (
    KeyValueStoreSupplier,
    VersionedKeyValueStoreSupplier,
    WindowStoreSupplier,
)
from streamtable.durations import Duration, to_ms
from streamtable.serde import Serde


@dataclass(frozen=True)
class Materialized:
    """Names a store (making it queryable) and sets its serdes, caching and logging.

    Wherever the DSL takes ``materialized=``, a plain store name works too. A store supplier
    chooses the store: ``Materialized.as_(Stores.persistent_versioned_key_value_store(name,
    history_retention))`` makes a versioned table (a table's source, ``to_table``,
    ``filter``, ``filter_not`` and ``map_values`` take one).

    >>> Materialized.as_("us-share-holders").with_caching_disabled().caching
    False
    """

    name: str | None = None
    key_serde: Serde | str | None = None
    value_serde: Serde | str | None = None
    caching: bool | None = None
    logging: bool = True
    retention: int | None = None
    supplier: KeyValueStoreSupplier | VersionedKeyValueStoreSupplier | None = None

    @classmethod
    def as_(cls, store: str | KeyValueStoreSupplier | VersionedKeyValueStoreSupplier
            ) -> Materialized:
        """A store named ``store`` (or made by a store supplier, under its name): queryable by
        that name (``driver.get_key_value_store``, ``app.store``, the HTTP API). ``as`` is a
        Python keyword, hence the underscore.

        >>> Materialized.as_("counts").name
        'counts'
        >>> from streamtable import Stores
        >>> Materialized.as_(Stores.persistent_versioned_key_value_store("rates", 60_000)).name
        'rates'
        """
        if isinstance(store, str):
            return cls(name=store)
        if isinstance(store, WindowStoreSupplier):
            raise TypeError(f"Materialized.as_ takes a store name or a key-value store supplier; "
                            f"{store.name!r} is a window store supplier")
        if not isinstance(store, (KeyValueStoreSupplier, VersionedKeyValueStoreSupplier)):
            raise TypeError(f"Materialized.as_ takes a store name or a store supplier "
                            f"(Stores....), not {type(store).__name__}")
        return cls(name=store.name, supplier=store)

    @property
    def versioned(self) -> bool:
        """Whether the store is a versioned one.

        >>> Materialized.as_("counts").versioned
        False
        """
        return isinstance(self.supplier, VersionedKeyValueStoreSupplier)

    def with_key_serde(self, serde: Serde | str) -> Materialized:
        """The serde of the store's keys (a :class:`~streamtable.serde.serdes.Serde` or its
        name), in its changelog and serving store.

        >>> Materialized.as_("counts").with_key_serde("string").key_serde
        'string'
        """
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde | str) -> Materialized:
        """The serde of the store's values.

        >>> Materialized.as_("counts").with_value_serde("long").value_serde
        'long'
        """
        return replace(self, value_serde=serde)

    def with_caching_disabled(self) -> Materialized:
        """Forward every update of the store (no record cache between commits).

        >>> Materialized.as_("counts").with_caching_disabled().caching
        False
        """
        return replace(self, caching=False)

    def with_caching_enabled(self) -> Materialized:
        """Forward the last update per key per commit (the record cache).

        >>> Materialized.as_("counts").with_caching_enabled().caching
        True
        """
        return replace(self, caching=True)

    def with_logging_disabled(self) -> Materialized:
        """No changelog for the store.

        >>> Materialized.as_("counts").with_logging_disabled().logging
        False
        """
        return replace(self, logging=False)

    def with_retention(self, retention_ms: Duration) -> Materialized:
        """How long a window or session store keeps a window (ms past its start; a session:
        past its end) before deleting it. Defaults to the window size (or inactivity gap) plus
        the grace period; sliding windows: twice the time difference plus the grace period.
        It may not be shorter than that.

        >>> from datetime import timedelta
        >>> Materialized.as_("counts").with_retention(timedelta(hours=1)).retention
        3600000
        """
        retention = to_ms(retention_ms, "retention_ms")
        if retention < 0:
            raise ValueError("retention must not be negative")
        return replace(self, retention=retention)


def as_materialized(spec: Materialized | str | None) -> Materialized | None:
    if spec is None or isinstance(spec, Materialized):
        return spec
    if isinstance(spec, str):
        return Materialized(name=spec)
    raise TypeError(f"materialized must be a store name or Materialized, got {type(spec).__name__}")
