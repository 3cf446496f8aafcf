"""The RocksDB working copy's range reads (a join window store's fetch and expiry without an
index in memory): over random puts, deletes and flushes, with the batch's writes still in the
overlay or already in RocksDB, and a key's entries read from RocksDB kept or not, they answer
what filtering all of the store's keys answers. A copy written with another key layout is
rebuilt, not misread."""

from __future__ import annotations

import pickle
import random
from typing import Any

import pytest

from streamtable import Windowed

pytest.importorskip("rocksdict")

from streamtable.state import rocksdb  # noqa: E402
from streamtable.state.rocksdb import RocksDBTaskState  # noqa: E402
from streamtable.state.stores import EXPIRED_UP_TO, InMemoryKeyValueStore  # noqa: E402

FIRSTS = ["a", "b", 1, ("t", 1)]
EDGES = [-(2**63), 2**63 - 1]


def _random_key(rng: random.Random) -> Any:
    first = rng.choice(FIRSTS)
    kind = rng.random()
    if kind < 0.7:  # a join window store's (key, timestamp, seq): small times hit the bounds
        return (first, rng.choice([*range(-2, 12), *EDGES]), rng.randint(0, 2))
    if kind < 0.8:
        return (first, rng.randint(0, 11))
    if kind < 0.9:  # not all ints after the first: never in a range
        return (first, rng.choice(["x", 2.5, 2**64]), 0)
    return rng.choice([Windowed(first, 3, 5), (first,), "plain"])


def _ints_after_first(key: Any) -> bool:
    return type(key) is tuple and all(type(i) is int and -(2**63) <= i < 2**63
                                      for i in key[1:])


@pytest.mark.parametrize("kept", ["default", "few", "none"])
@pytest.mark.parametrize("seed", range(6))
def test_range_reads_agree_with_filtering_the_whole_store(seed, kept, tmp_path, monkeypatch):
    # a first element's entries read whole and kept until the next flush: by default, when
    # few are kept (some firsts have more, and the kept ones are dropped often), or never
    limits = {"default": None, "few": (3, 10), "none": (0, 0)}[kept]
    if limits is not None:
        monkeypatch.setattr(rocksdb.RocksDBKeyValueStore, "RANGE_CACHE_KEYS", limits[0])
        monkeypatch.setattr(rocksdb.RocksDBKeyValueStore, "RANGE_CACHE_ENTRIES", limits[1])
    rng = random.Random(seed)
    copy = RocksDBTaskState.open(str(tmp_path / "copy"))
    store = copy.store("s")
    data: dict[Any, Any] = {}
    # what the drained changes rebuild: the durable state's replicas, in memory and in RocksDB
    replica = RocksDBTaskState.open(str(tmp_path / "replica"))
    in_memory = InMemoryKeyValueStore("s")

    def drain() -> None:
        changes = store.drain_changes()
        replica.store("s").restore(changes)
        in_memory.restore(changes)
    for step in range(600):
        key = _random_key(rng)
        if rng.random() < 0.3:
            store.delete(key)
            data.pop(key, None)
        elif key not in data and rng.random() < 0.5:  # a key the caller knows is new
            store.insert(key, (step, step))
            data[key] = (step, step)
        else:
            store.put(key, (step, step))
            data[key] = (step, step)
        if rng.random() < 0.05:  # the overlay reaches RocksDB
            drain()
            copy.flush()
        if rng.random() < 0.2:
            first = rng.choice(FIRSTS)
            a, b = sorted(rng.choice([*range(-3, 13), *EDGES]) for _ in range(2))
            low = (a,) if rng.random() < 0.5 else (a, rng.randint(0, 2))
            high = (b, rng.randint(0, 2)) if rng.random() < 0.5 else (b, 2**63 - 1)
            expected = sorted(((k, v) for k, v in data.items()
                               if _ints_after_first(k) and k[0] == first
                               and low <= k[1:] <= high), key=lambda kv: kv[0][1:])
            assert store.range_with_first(first, low, high) == expected
        if rng.random() < 0.05:
            up_to = rng.choice([*range(-3, 13), *EDGES])
            doomed = {k for k in data if _ints_after_first(k) and len(k) > 1 and k[1] <= up_to}
            assert store.delete_with_second_up_to(up_to) == len(doomed)
            for k in doomed:
                del data[k]
                assert store.get(k) is None
            assert len(store) == len(data)
    assert len(store) == len(data)
    # the deletions are changes: RocksDB holds what the model holds, and so does what the
    # changes rebuild (an expiry is one change, EXPIRED_UP_TO, not a deletion per key)
    drain()
    copy.flush()
    assert dict(store.items()) == data and len(store) == len(data)
    assert dict(replica.store("s").items()) == data and len(replica.store("s")) == len(data)
    assert dict(in_memory.items()) == data
    copy.close()
    replica.close()


def test_an_expiry_is_one_change_that_a_restore_applies(tmp_path):
    copy = RocksDBTaskState.open(str(tmp_path / "copy"))
    store = copy.store("s")
    for t in range(10):
        store.put(("a", t, 0), ("old", t))
    store.put(("a", 2, "x"), ("not ints", 2))
    store.put("plain", ("plain", 0))
    store.drain_changes()
    copy.flush()
    store.put(("b", 3, 0), ("new, then expired", 3))
    store.put(("b", 8, 0), ("new", 8))
    assert store.delete_with_second_up_to(4) == 6
    changes = store.drain_changes()
    assert changes == {("b", 8, 0): ("new", 8), EXPIRED_UP_TO: 4}
    # the delta file's round trip keeps the marker
    assert pickle.loads(pickle.dumps(changes))[EXPIRED_UP_TO] == 4
    copy.flush()
    kept = {("a", t, 0): ("old", t) for t in range(5, 10)}
    kept.update({("a", 2, "x"): ("not ints", 2), "plain": ("plain", 0),
                 ("b", 8, 0): ("new", 8)})
    assert dict(store.items()) == kept and len(store) == len(kept)
    copy.close()


def test_no_store_of_a_copy_holds_its_metadata_row(tmp_path):
    copy = RocksDBTaskState.open(str(tmp_path / "copy"))
    for n in range(120):  # the 109th store's prefix would be b"\x00m", where b"\x00meta" lies
        copy.store(f"s{n}").put("k", n)
        copy.store(f"s{n}").drain_changes()
    copy.version, copy.nonce = 1, "n"
    copy.committed()
    for n in range(120):
        assert list(copy.store(f"s{n}").items()) == [("k", n)]
        assert [len(c) for c in copy.store(f"s{n}").encoded_chunks(10)] == [1]
    copy.close()


def test_a_copy_of_another_key_layout_is_rebuilt(tmp_path):
    path = str(tmp_path / "copy")
    copy = RocksDBTaskState.open(path)
    copy.store("s").put(("a", 5, 0), ("v", 5))
    copy.store("s").drain_changes()
    copy.version, copy.nonce = 3, "n"
    copy.committed()
    copy.close()
    reopened = RocksDBTaskState.open(path)
    assert (reopened.version, reopened.store("s").get(("a", 5, 0))) == (3, ("v", 5))
    # as the versions before the layout of ints after the first element wrote it
    meta = pickle.loads(reopened.db.get(rocksdb._META))
    del meta["key_format"]
    reopened.db.put(rocksdb._META, pickle.dumps(meta))
    reopened.close()
    rebuilt = RocksDBTaskState.open(path)
    assert rebuilt.version == -2 and len(rebuilt.store("s")) == 0
    assert rebuilt.store("s").get(("a", 5, 0)) is None
    rebuilt.close()


def test_a_copy_written_with_levels_and_compression_opens_and_compacts(tmp_path, monkeypatch):
    """Copies of the versions before universal compaction and uncompressed blocks (levels,
    Snappy) open as they are, keep their entries and compact under the options of now."""
    import rocksdict

    made = rocksdb._options

    def before() -> Any:
        options = made()
        options.set_compression_type(rocksdict.DBCompressionType.snappy())
        options.set_compaction_style(rocksdict.DBCompactionStyle.level())
        return options

    path = str(tmp_path / "copy")
    monkeypatch.setattr(rocksdb, "_options", before)
    copy = RocksDBTaskState.open(path)
    entries = {("k", t, 0): ("v" * 50, t) for t in range(20_000)}
    copy.store("s").restore(entries, fresh=True)
    copy.db.compact_range(None, None)  # files below level 0
    copy.version, copy.nonce = 1, "n"
    copy.committed()
    copy.close()
    monkeypatch.setattr(rocksdb, "_options", made)
    reopened = RocksDBTaskState.open(path)
    assert reopened.version == 1 and dict(reopened.store("s").items()) == entries
    reopened.store("s").put(("k", -1, 0), ("new", -1))
    reopened.store("s").drain_changes()
    reopened.flush(1, "n")
    reopened.db.compact_range(None, None)
    assert reopened.store("s").get(("k", -1, 0)) == ("new", -1)
    assert len(reopened.store("s")) == len(entries) + 1
    reopened.close()


def test_the_inline_layout_of_a_join_key_is_the_general_one() -> None:
    """A ``(key, timestamp, seq)`` key of 64-bit ints is laid out inline (the join's hot path);
    it must be byte for byte what the general layout gives, and anything else must not take it."""
    rng = random.Random(3)
    edges = [-2**63, -1, 0, 1, 2**63 - 1]
    firsts: list[Any] = ["a", 7, ("t", 1), None, b"x", 2.5]
    for _ in range(2_000):
        t = rng.choice(edges + [rng.randint(-2**63, 2**63 - 1)])
        seq = rng.choice(edges + [rng.randint(0, 2**40)])
        key = (rng.choice(firsts), t, seq)
        general = rocksdb._first_prefix(key[0]) + rocksdb._encode_rest(key[1:])
        assert rocksdb._encode_key(key) == general
        assert rocksdb._decode_key(general) == key
    for odd in [("a", 2**63, 0), ("a", True, 0), ("a", 1, 2.0), ("a", 1, -2**63 - 1)]:
        encoded = rocksdb._encode_key(odd)
        assert encoded == rocksdb._first_prefix("a") + pickle.dumps(odd[1:], 5)
        assert rocksdb._decode_key(encoded) == odd
