"""``keys_with_first``: the tuple and windowed keys of one first element, in key order, from a
store's index kept in step with every put, delete and restore; the in-memory store and the
RocksDB working copy answer the same."""

from __future__ import annotations

import random
from typing import Any

import pytest

from streamtable import Windowed
from streamtable.state.stores import InMemoryKeyValueStore, key_order

FIRSTS = ["a", "b", 1, 2.5, ("t", 1), b"x"]


def _random_key(rng: random.Random) -> Any:
    first = rng.choice(FIRSTS)
    kind = rng.random()
    if kind < 0.6:
        start = rng.randint(-3, 12)
        return Windowed(first, start, start + rng.choice([0, 5, 10]))
    if kind < 0.9:
        return (first, rng.choice(["x", "y", 3, 1.5, b"z", ("n", rng.randint(0, 2))]))
    return (first,)


def _expected(data: dict[Any, Any], first: Any) -> list[Any]:
    return sorted((k for k in data if k[0] == first), key=key_order)


def _rocksdb_store(tmp_path: Any) -> Any:
    pytest.importorskip("rocksdict")
    from streamtable.state.rocksdb import RocksDBTaskState

    return RocksDBTaskState.open(str(tmp_path / "copy")).store("s")


@pytest.mark.parametrize("seed", range(8))
def test_index_agrees_with_sorting_the_store_at_every_step(seed, tmp_path):
    rng = random.Random(seed)
    store = InMemoryKeyValueStore("s", track_changes=True)
    rocks = _rocksdb_store(tmp_path) if seed % 2 else None
    data: dict[Any, Any] = {}
    for step in range(400):
        key = _random_key(rng)
        if rng.random() < 0.35:
            assert store.delete(key) == data.pop(key, None)
            if rocks is not None:
                rocks.delete(key)
        else:
            store.put(key, (step, step))
            data[key] = (step, step)
            if rocks is not None:
                rocks.put(key, (step, step))
        if rng.random() < 0.03:  # the index is dropped and rebuilt after a restore
            changes = store.drain_changes()
            store.restore({k: v for k, v in changes.items() if v is not None})
            if rocks is not None:
                rocks.drain_changes()
                rocks._copy.flush()
        if rng.random() < 0.3:
            first = rng.choice(FIRSTS)
            assert store.keys_with_first(first) == _expected(data, first)
            if rocks is not None:
                assert rocks.keys_with_first(first) == _expected(data, first)
    for first in FIRSTS:
        assert store.keys_with_first(first) == _expected(data, first)
    assert dict(store.items()) == data


def test_lookups_return_copies_and_empty_lists():
    store = InMemoryKeyValueStore("s")
    assert store.keys_with_first("a") == []
    store.put(Windowed("a", 10, 20), (1, 10))
    store.put(Windowed("a", 0, 10), (1, 0))
    found = store.keys_with_first("a")
    assert found == [Windowed("a", 0, 10), Windowed("a", 10, 20)]
    found.clear()
    assert len(store.keys_with_first("a")) == 2
    store.delete(Windowed("a", 0, 10))
    store.delete(Windowed("a", 10, 20))
    assert store.keys_with_first("a") == [] and store._index == {}
