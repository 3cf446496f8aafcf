"""State stores: the tables behind every stateful operator, and their read-only query views."""

from streamtable.state.base import KeyValueStore
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
