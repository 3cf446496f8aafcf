"""What a store is, as the topology declares it: :class:`StoreSpec`."""

from __future__ import annotations

from dataclasses import dataclass

from streamtable.serde import Serde


@dataclass
class StoreSpec:
    """A state store: its name, whether it caches and logs, and whether users may query it."""

    name: str
    kind: str = "key-value"
    caching: bool | None = None  # None: follow cache.max.bytes.buffering
    logging: bool = True
    queryable: bool = False
    key_serde: Serde | None = None
    value_serde: Serde | None = None

    def changelog_topic(self, application_id: str) -> str:
        return f"{application_id}-{self.name}-changelog"
