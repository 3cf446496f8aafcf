"""What a store is, as the topology declares it: :class:`StoreSpec`."""

from __future__ import annotations

from dataclasses import dataclass

from streamtable.serde import Serde


@dataclass
class StoreSpec:
    """A state store: its name, whether it caches and logs, and whether users may query it.

    A window store a user declared (``Stores.window_store_builder``) has its window size,
    retention and duplicates policy; ``timestamped`` says whether a user's processor sees the
    store's values with their timestamps (every DSL store; ``Stores.timestamped_*``), and
    ``headers`` whether they carry the headers of the record that wrote them too (``None``:
    the DSL's stores, as ``dsl.store.format`` says; ``Stores.*_with_headers_*``: True). A
    ``versioned`` store (``Stores.persistent_versioned_key_value_store``) keeps every value of
    a key for ``retention_ms`` (its history retention), filed for expiry by segments of
    ``segment_interval_ms``.
    """

    name: str
    kind: str = "key-value"
    caching: bool | None = None  # None: follow cache.max.bytes.buffering
    logging: bool = True
    queryable: bool = False
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    timestamped: bool = True
    headers: bool | None = None
    window_size_ms: int | None = None
    retention_ms: int | None = None
    retain_duplicates: bool = False
    segment_interval_ms: int | None = None
    # a generated name's name before stable names (a counter), to read state written then
    legacy_name: str | None = None
    # what else decides the meaning of the store's entries (its windows), as text
    params: str | None = None

    def changelog_topic(self, application_id: str) -> str:
        return f"{application_id}-{self.name}-changelog"
