"""State stores: the tables behind every stateful operator, and their read-only query views."""

from streamtable.state.stores import (
    InMemoryKeyValueStore,
    KeyValueStore,
    ReadOnlyKeyValueStore,
    key_order,
)

__all__ = [
    "InMemoryKeyValueStore",
    "KeyValueStore",
    "ReadOnlyKeyValueStore",
    "key_order",
]
