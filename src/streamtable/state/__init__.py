"""State stores: the tables behind every stateful operator, and their read-only query views."""

from streamtable.engine.ports import KeyValueStore
from streamtable.state.stores import (
    InMemoryKeyValueStore,
    InMemoryStoreBackend,
    ReadOnlyKeyValueStore,
    key_order,
)

__all__ = [
    "InMemoryKeyValueStore",
    "InMemoryStoreBackend",
    "KeyValueStore",
    "ReadOnlyKeyValueStore",
    "key_order",
]
