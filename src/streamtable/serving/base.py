"""The protocols of serving: the queryable stores as users read them, and the serving store a
runtime keeps up to date once per batch id. A serving store is one new file implementing
:class:`ServingStore` (SQLite: ``serving/sqlite.py``; PostgreSQL: ``serving/postgres.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol


class QueryableStore(Protocol):
    """The read-only view of a queryable store, as Kafka Streams' ``ReadOnlyKeyValueStore``."""

    name: str

    def get(self, key: Any) -> Any: ...

    def get_with_timestamp(self, key: Any) -> tuple[Any, int] | None: ...

    def all(self) -> Iterator[tuple[Any, Any]]: ...

    def range(self, from_key: Any = None, to_key: Any = None) -> Iterator[tuple[Any, Any]]: ...

    def prefix_scan(self, prefix: str | bytes) -> Iterator[tuple[Any, Any]]: ...

    def keys_of_task(self, task: int) -> list[Any]: ...

    def approximate_num_entries(self) -> int: ...

    def to_dict(self) -> dict[Any, Any]: ...

    def __len__(self) -> int: ...


StoreChange = tuple[str, bytes, "bytes | None", int]
"""``(store, encoded key, encoded (value, timestamp) or None for a deletion, task)``."""


class ServingStore(Protocol):
    """All queryable stores of one application, updated once per batch id."""

    def apply(self, batch_id: int, changes: Iterable[StoreChange]) -> bool:
        """Apply a batch's changes unless a batch id ≥ ``batch_id`` was applied before
        (then return False and change nothing)."""
        ...

    def last_batch(self) -> int: ...

    def view(self, store: str, kind: str = "key-value") -> QueryableStore:
        """The query view of ``store``: a ``window`` or ``session`` store answers Kafka
        Streams' window or session queries too."""
        ...

    def stores(self) -> list[str]: ...

    def replace_stores(self, stores: Iterable[str], changes: Iterable[StoreChange]) -> None:
        """Empty ``stores`` and put ``changes`` in (an upgrade's new and dropped stores),
        keeping the batch id applied."""
        ...

    def reset(self) -> None: ...
