"""The versioned key-value store, against Kafka Streams' own tests of its versioned store
(``RocksDBVersionedStoreTest``: streams/src/test/java/org/apache/kafka/streams/state/
internals/), over the in-memory working copy of a task and over the RocksDB one; and its rows
through the task-state persistence (Kafka's restore tests: our changelog is the task's
deltas and snapshots)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from streamtable.state.persistence import FileTaskStatePersistence
from streamtable.state.stores import InMemoryKeyValueStore
from streamtable.state.versioned import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    VERSIONED_META_STORE,
    ReadOnlyVersionedKeyValueStore,
    StoreVersionRows,
    VersionedKeyValueStore,
    VersionedRecord,
)
from streamtable.state.windowed import Windowed

HISTORY_RETENTION = 300_000
GRACE_PERIOD = HISTORY_RETENTION  # history retention doubles as the grace period
SEGMENT_INTERVAL = HISTORY_RETENTION // 3
BASE = 10  # Kafka's BASE_TIMESTAMP
SI = SEGMENT_INTERVAL
LATEST = PUT_RETURN_CODE_VALID_TO_UNDEFINED


class Checked:
    """A versioned store with Kafka's test helpers: ``put`` checks the returned valid_to,
    ``at`` and ``latest`` check reads."""

    def __init__(self, store: VersionedKeyValueStore, dropped: list[int]) -> None:
        self.store = store
        self.dropped = dropped

    def put(self, key: str, value: Any, timestamp: int, expected_valid_to: int) -> None:
        assert self.store.put(key, value, timestamp) == expected_valid_to, (key, value, timestamp)

    def latest(self, key: str, value: Any = None, timestamp: int | None = None) -> None:
        got = self.store.get(key)
        if value is None:
            assert got is None
        else:
            assert got == VersionedRecord(value, timestamp, None)

    def at(self, key: str, as_of: int, value: Any = None, timestamp: int | None = None,
           valid_to: int | None = None) -> None:
        got = self.store.get(key, as_of)
        if value is None:
            assert got is None, (as_of, got)
        else:
            expected_to = None if valid_to == LATEST else valid_to
            assert got == VersionedRecord(value, timestamp, expected_to), as_of

    def versions(self, key: str, lo: int | None, hi: int | None,
                 expected: list[tuple[Any, int, int]]) -> None:
        got = self.store.versions(key, lo, hi)
        assert got == [VersionedRecord(v, t, None if to == LATEST else to)
                       for v, t, to in sorted(expected, key=lambda e: e[1])]


def _stores(kind: str, tmp_path: Any, request: Any) -> Any:
    if kind == "memory":
        return lambda name: InMemoryKeyValueStore(name, track_changes=True)
    pytest.importorskip("rocksdict")
    from streamtable.state.rocksdb import RocksDBTaskState

    state = RocksDBTaskState.open(str(tmp_path / "copy"))
    request.addfinalizer(state.close)
    return state.store


@pytest.fixture(params=["memory", "rocksdb"])
def make(request: Any, tmp_path: Any) -> Any:
    """``make(history_retention, segment_interval)``: a checked store over a task's stores of
    the parametrized kind."""
    kv = _stores(request.param, tmp_path, request)

    def build(retention: int = HISTORY_RETENTION, segment: int = SEGMENT_INTERVAL) -> Checked:
        dropped: list[int] = []
        store = VersionedKeyValueStore(kv("versioned"), kv(VERSIONED_META_STORE),
                                       history_retention=retention, segment_interval=segment,
                                       on_expired=lambda: dropped.append(1))
        return Checked(store, dropped)

    return build


@pytest.fixture
def s(make: Any) -> Checked:
    return make()


def test_put_latest(s):
    s.put("k", "v", BASE, LATEST)
    s.put("k", "v2", BASE + 1, LATEST)
    s.latest("k", "v2", BASE + 1)
    s.at("k", BASE, "v", BASE, BASE + 1)
    s.at("k", BASE + 1, "v2", BASE + 1, LATEST)
    s.at("k", BASE + 2, "v2", BASE + 1, LATEST)


def test_put_null_as_latest(s):
    s.put("k", None, BASE, LATEST)
    s.put("k", None, BASE + 1, LATEST)
    s.latest("k")
    for t in (BASE, BASE + 1, BASE + 2):
        s.at("k", t)


def test_put_older_with_non_null_latest(s):
    s.put("k", "v", BASE, LATEST)
    s.put("k", "v2", BASE - 2, BASE)
    s.put("k", "v1", BASE - 1, BASE)
    s.put("k", "v4", BASE - 4, BASE - 2)
    s.latest("k", "v", BASE)
    s.at("k", BASE, "v", BASE, LATEST)
    s.at("k", BASE - 1, "v1", BASE - 1, BASE)
    s.at("k", BASE - 2, "v2", BASE - 2, BASE - 1)
    s.at("k", BASE - 3, "v4", BASE - 4, BASE - 2)


def test_put_older_with_null_latest(s):
    s.put("k", None, BASE, LATEST)
    s.put("k", "v2", BASE - 2, BASE)
    s.put("k", "v1", BASE - 1, BASE)
    s.put("k", "v4", BASE - 4, BASE - 2)
    s.latest("k")
    s.at("k", BASE)
    s.at("k", BASE - 1, "v1", BASE - 1, BASE)
    s.at("k", BASE - 2, "v2", BASE - 2, BASE - 1)
    s.at("k", BASE - 3, "v4", BASE - 4, BASE - 2)


def test_put_older_null_with_non_null_latest(s):
    s.put("k", "v", BASE, LATEST)
    s.put("k", None, BASE - 2, BASE)
    s.put("k", None, BASE - 1, BASE)
    s.put("k", None, BASE - 4, BASE - 2)
    s.put("k", "v5", BASE - 5, BASE - 4)
    s.put("k", "v3", BASE - 3, BASE - 2)
    s.put("k", None, BASE - 6, BASE - 5)
    s.latest("k", "v", BASE)
    s.at("k", BASE, "v", BASE, LATEST)
    s.at("k", BASE - 1)
    s.at("k", BASE - 2)
    s.at("k", BASE - 3, "v3", BASE - 3, BASE - 2)
    s.at("k", BASE - 4)
    s.at("k", BASE - 5, "v5", BASE - 5, BASE - 4)
    s.at("k", BASE - 6)


def test_put_older_null_with_null_latest(s):
    s.put("k", None, BASE, LATEST)
    s.put("k", None, BASE - 2, BASE)
    s.put("k", None, BASE - 1, BASE)
    s.put("k", None, BASE - 4, BASE - 2)
    s.put("k", "v3", BASE - 3, BASE - 2)
    s.put("k", "v5", BASE - 5, BASE - 4)
    s.put("k", None, BASE - 6, BASE - 5)
    s.latest("k")
    for t in (BASE, BASE - 1, BASE - 2, BASE - 4, BASE - 6):
        s.at("k", t)
    s.at("k", BASE - 3, "v3", BASE - 3, BASE - 2)
    s.at("k", BASE - 5, "v5", BASE - 5, BASE - 4)


def test_put_repeat_timestamp_as_latest(s):
    s.put("k", "to_be_replaced", BASE, LATEST)
    s.put("k", "b", BASE, LATEST)
    s.latest("k", "b", BASE)
    s.at("k", BASE, "b", BASE, LATEST)
    s.at("k", BASE - 1)
    s.put("k", None, BASE, LATEST)
    s.latest("k")
    s.at("k", BASE)
    s.at("k", BASE - 1)
    s.put("k", None, BASE, LATEST)
    s.latest("k")
    s.put("k", "b", BASE, LATEST)
    s.latest("k", "b", BASE)
    s.at("k", BASE, "b", BASE, LATEST)
    s.at("k", BASE - 1)


def test_put_repeat_timestamps(s):
    s.put("k", "to_be_replaced", SI + 20, LATEST)
    s.put("k", None, SI - 10, SI + 20)
    s.put("k", "to_be_replaced", SI - 10, SI + 20)
    s.put("k", None, SI - 10, SI + 20)
    s.put("k", "to_be_replaced", SI - 1, SI + 20)
    s.put("k", "to_be_replaced", SI + 1, SI + 20)
    s.put("k", None, SI - 1, SI + 1)
    s.put("k", None, SI + 1, SI + 20)
    s.put("k", None, SI + 10, SI + 20)
    s.put("k", None, SI + 5, SI + 10)
    s.put("k", "vp5", SI + 5, SI + 10)
    s.put("k", "to_be_replaced", SI - 5, SI - 1)
    s.put("k", "vn5", SI - 5, SI - 1)
    s.put("k", None, SI + 20, LATEST)
    s.put("k", None, SI + 20, LATEST)
    s.put("k", "vn6", SI - 6, SI - 5)
    s.latest("k")
    for t in (SI + 30, SI + 15, SI + 2, SI, SI - 1, SI - 8):
        s.at("k", t)
    s.at("k", SI + 6, "vp5", SI + 5, SI + 10)
    s.at("k", SI - 5, "vn5", SI - 5, SI - 1)
    s.at("k", SI - 6, "vn6", SI - 6, SI - 5)


def test_put_into_multiple_segments(s):
    s.put("k", None, SI - 20, LATEST)
    s.put("k", "vn10", SI - 10, LATEST)
    s.put("k", None, SI - 1, LATEST)
    s.put("k", None, SI + 1, LATEST)
    s.put("k", "vp10", SI + 10, LATEST)
    s.put("k", None, SI + 20, LATEST)
    s.latest("k")
    for t in (SI + 30, SI + 5, SI + 2, SI, SI - 1, SI - 15):
        s.at("k", t)
    s.at("k", SI + 15, "vp10", SI + 10, SI + 20)
    s.at("k", SI - 5, "vn10", SI - 10, SI - 1)


def test_move_record_to_older_segment_during_put(s):
    s.put("k", "vp20", SI + 20, LATEST)
    s.put("k", "vp10", SI + 10, SI + 20)
    s.put("k", "vn10", SI - 10, SI + 10)
    s.put("k", "vn2", SI - 2, SI + 10)
    s.put("k", "vn1", SI - 1, SI + 10)
    s.put("k", "vp1", SI + 1, SI + 10)
    s.latest("k", "vp20", SI + 20)
    s.at("k", SI + 30, "vp20", SI + 20, LATEST)
    s.at("k", SI + 15, "vp10", SI + 10, SI + 20)
    s.at("k", SI + 5, "vp1", SI + 1, SI + 10)
    s.at("k", SI, "vn1", SI - 1, SI + 1)
    s.at("k", SI - 1, "vn1", SI - 1, SI + 1)
    s.at("k", SI - 2, "vn2", SI - 2, SI - 1)
    s.at("k", SI - 5, "vn10", SI - 10, SI - 2)


def test_move_record_to_older_segment_with_nulls_during_put(s):
    s.put("k", None, SI + 20, LATEST)
    s.put("k", None, SI - 1, SI + 20)
    s.put("k", None, SI + 1, SI + 20)
    s.put("k", None, SI - 10, SI - 1)
    s.put("k", None, SI + 10, SI + 20)
    s.put("k", "vp5", SI + 5, SI + 10)
    s.put("k", "vn5", SI - 5, SI - 1)
    s.put("k", "vn6", SI - 6, SI - 5)
    s.latest("k")
    for t in (SI + 30, SI + 15, SI + 2, SI, SI - 1, SI - 8):
        s.at("k", t)
    s.at("k", SI + 6, "vp5", SI + 5, SI + 10)
    s.at("k", SI - 5, "vn5", SI - 5, SI - 1)
    s.at("k", SI - 6, "vn6", SI - 6, SI - 5)


def test_fall_through_to_existing_older_segment_as_latest_during_put(s):
    s.put("k", None, SI - 5, LATEST)
    s.put("k", "vn6", SI - 6, SI - 5)
    s.put("k", "vp20", SI + 20, LATEST)
    s.put("k", None, SI + 10, SI + 20)
    s.put("k", None, SI - 1, SI + 10)
    s.put("k", "vn2", SI - 2, SI - 1)
    s.latest("k", "vp20", SI + 20)
    s.at("k", SI + 30, "vp20", SI + 20, LATEST)
    for t in (SI + 12, SI, SI - 1, SI - 5):
        s.at("k", t)
    s.at("k", SI - 2, "vn2", SI - 2, SI - 1)
    s.at("k", SI - 6, "vn6", SI - 6, SI - 5)


def test_put_non_latest_tombstone_into_new_segment_with_valid_to(s):
    s.put("k", "vp30", SI + 30, LATEST)
    s.put("k", None, SI - 10, SI + 30)
    s.put("k", "vn5", SI - 5, SI + 30)
    s.put("k", "vn1", SI - 1, SI + 30)
    s.put("k", None, SI - 2, SI - 1)
    s.latest("k", "vp30", SI + 30)
    s.at("k", SI + 10, "vn1", SI - 1, SI + 30)
    s.at("k", SI - 1, "vn1", SI - 1, SI + 30)
    s.at("k", SI - 2)
    s.at("k", SI - 5, "vn5", SI - 5, SI - 2)
    s.at("k", SI - 10)


def test_delete(s):
    s.put("k", "vp20", SI + 20, LATEST)
    s.put("k", "vp10", SI + 10, SI + 20)
    s.put("k", "vn10", SI - 10, SI + 10)
    s.put("k", "vn2", SI - 2, SI + 10)
    assert s.store.delete("k", SI - 5)[:2] == ("vn10", SI - 10)  # delete from history
    assert s.store.delete("k", SI + 10)[:2] == ("vp10", SI + 10)  # an existing timestamp
    assert s.store.delete("k", SI + 10) is None  # the same timestamp again
    assert s.store.delete("k", SI + 25)[:2] == ("vp20", SI + 20)  # the latest value


def test_not_put_expired(s):
    s.put("k", "v", HISTORY_RETENTION + 10, LATEST)
    # the grace period has not elapsed
    s.put("k1", "v1", HISTORY_RETENTION + 10 - GRACE_PERIOD, LATEST)
    s.latest("k1", "v1", HISTORY_RETENTION + 10 - GRACE_PERIOD)
    # it has: the put does not take place
    s.put("k2", "v2", HISTORY_RETENTION + 9 - GRACE_PERIOD, PUT_RETURN_CODE_NOT_PUT)
    s.latest("k2")
    assert len(s.dropped) == 1


def test_not_delete_expired(s):
    s.put("k1", "v1", 1, LATEST)
    s.put("k2", "v2", 1, LATEST)
    s.put("kother", "vother", HISTORY_RETENTION + 10, LATEST)
    deleted = s.store.delete("k1", HISTORY_RETENTION + 10 - GRACE_PERIOD)
    assert deleted is not None and deleted[:2] == ("v1", 1)
    s.latest("k1")
    # the grace period has elapsed: nothing is deleted and nothing returned
    assert s.store.delete("k2", HISTORY_RETENTION + 9 - GRACE_PERIOD) is None
    s.latest("k2", "v2", 1)
    assert len(s.dropped) == 1


def test_get_from_older_segments(s):
    s.put("ko", None, SI - 10, LATEST)
    s.put("ko", None, 2 * SI - 10, LATEST)
    s.put("ko", None, 3 * SI - 10, LATEST)
    s.at("k", SI - 20)
    s.put("k", "v", SI - 20, LATEST)
    s.put("k", None, SI - 10, LATEST)
    s.at("k", SI - 30)
    s.at("k", SI - 15, "v", SI - 20, SI - 10)
    s.at("k", SI - 5)
    s.put("k", "v2", 3 * SI - 20, LATEST)
    s.put("k", None, 3 * SI - 10, LATEST)
    s.at("k", SI - 30)
    s.at("k", SI - 15, "v", SI - 20, SI - 10)
    s.at("k", SI - 5)


def test_not_get_expired(s):
    s.put("k", "v_old", 0, LATEST)
    s.put("k", "v", SI - 10, LATEST)
    s.at("k", SI - 11, "v_old", 0, SI - 10)
    s.put("ko", "vo", HISTORY_RETENTION + SI - 11, LATEST)
    s.at("k", SI - 11, "v_old", 0, SI - 10)  # not yet expired
    s.put("ko", "vo2", HISTORY_RETENTION + SI - 10, LATEST)
    s.at("k", SI - 11)  # expired now


def test_get_expired_if_latest_value(s):
    s.put("k", "v", 1, LATEST)
    s.put("ko", "vo_old", 1, LATEST)
    s.put("ko", "vo_new", HISTORY_RETENTION + 12, LATEST)
    # an expired read of a key whose latest value satisfies it still answers
    s.at("k", 10, "v", 1, LATEST)
    # an expired read whose latest value does not satisfy it does not
    s.at("ko", 10)


def test_distinguish_empty_and_null(s):
    s.put("k", None, SI + 20, LATEST)
    s.put("k", None, SI - 10, SI + 20)
    s.put("k", None, SI - 1, SI + 20)
    s.put("k", None, SI + 1, SI + 20)
    s.put("k", None, SI + 10, SI + 20)
    s.put("k", "", SI + 5, SI + 10)
    s.put("k", "", SI - 5, SI - 1)
    s.put("k", "", SI - 6, SI - 5)
    s.latest("k")
    for t in (SI + 30, SI + 15, SI + 2, SI, SI - 1, SI - 8):
        s.at("k", t)
    s.at("k", SI + 6, "", SI + 5, SI + 10)
    s.at("k", SI - 5, "", SI - 5, SI - 1)
    s.at("k", SI - 6, "", SI - 6, SI - 5)


def test_get_record_versions_from_older_segments(s):
    s.put("ko", None, SI - 10, LATEST)
    s.put("ko", None, 2 * SI - 10, LATEST)
    s.put("ko", None, 3 * SI - 10, LATEST)
    s.versions("k", SI - 20, SI, [])
    s.put("k", "v1", SI - 30, LATEST)
    s.put("k", "v2", SI - 25, LATEST)
    s.put("k", None, SI - 20, LATEST)
    s.put("k", None, SI - 15, LATEST)
    s.put("k", "v3", SI - 10, LATEST)
    s.put("k", "v4", SI - 5, LATEST)
    all_four = [("v4", SI - 5, LATEST), ("v3", SI - 10, SI - 5), ("v2", SI - 25, SI - 20),
                ("v1", SI - 30, SI - 25)]
    s.versions("k", SI - 40, SI - 35, [])
    s.versions("k", SI - 30, SI - 5, all_four)
    s.versions("k", None, None, all_four)
    s.versions("k", SI - 4, SI, [("v4", SI - 5, LATEST)])
    s.versions("k", SI - 5, SI - 5, [("v4", SI - 5, LATEST)])
    s.versions("k", SI - 4, SI - 4, [("v4", SI - 5, LATEST)])
    s.versions("k", SI - 31, SI - 21, [("v2", SI - 25, SI - 20), ("v1", SI - 30, SI - 25)])
    s.versions("k", SI - 24, SI - 11, [("v2", SI - 25, SI - 20)])
    s.versions("k", SI - 11, SI - 4, [("v4", SI - 5, LATEST), ("v3", SI - 10, SI - 5)])
    s.versions("k", SI - 26, SI - 5, all_four)
    s.versions("k", SI - 15, SI - 10, [("v3", SI - 10, SI - 5)])
    s.versions("k", SI - 19, SI - 16, [])
    s.put("k", "v5", 3 * SI - 30, LATEST)
    s.put("k", None, 3 * SI - 20, LATEST)
    s.versions("k", SI - 40, SI - 35, [])
    s.versions("k", SI - 30, SI - 26, [("v1", SI - 30, SI - 25)])
    s.versions("k", SI - 19, SI - 16, [])


def test_get_record_versions_in_ascending_order_across_segments(s):
    s.put("k", "v1", SI - 10, LATEST)
    s.put("k", "v2", SI - 5, LATEST)
    s.put("k", "v3", 2 * SI - 10, LATEST)
    s.put("k", "v4", 2 * SI - 5, LATEST)
    s.versions("k", None, None, [("v1", SI - 10, SI - 5), ("v2", SI - 5, 2 * SI - 10),
                                 ("v3", 2 * SI - 10, 2 * SI - 5), ("v4", 2 * SI - 5, LATEST)])


def test_not_get_expired_record_versions(s):
    s.put("k", "v_old", 0, LATEST)
    s.put("k", "v", SI - 10, LATEST)
    s.versions("k", 0, SI - 11, [("v_old", 0, SI - 10)])
    s.put("ko", "vo", HISTORY_RETENTION + SI - 11, LATEST)
    s.versions("k", 0, SI - 11, [("v_old", 0, SI - 10)])
    s.put("ko", "vo2", HISTORY_RETENTION + SI - 10, LATEST)
    s.versions("k", 0, SI - 11, [])


def test_get_expired_if_latest_version_value(s):
    s.put("k", "v", 1, LATEST)
    s.put("ko", "vo_old", 1, LATEST)
    s.put("ko", "vo_new", HISTORY_RETENTION + 12, LATEST)
    s.versions("k", 0, 10, [("v", 1, LATEST)])
    s.versions("ko", 0, 10, [])


def test_allow_zero_history_retention(make):
    s = make(retention=0, segment=SEGMENT_INTERVAL)
    s.put("k", "v", BASE, LATEST)
    s.latest("k", "v", BASE)
    s.at("k", BASE, "v", BASE, LATEST)
    s.at("k", BASE + 1, "v", BASE, LATEST)  # a read in the "future" is allowed
    s.put("k", "updated", BASE, LATEST)
    s.latest("k", "updated", BASE)
    s.put("k", "v2", BASE + 2, LATEST)
    s.at("k", BASE + 2, "v2", BASE + 2, LATEST)
    s.at("k", BASE + 1)  # in the past: the history retention has expired
    s.store.delete("k", BASE + 3)
    s.latest("k")
    s.put("k2", "v", BASE + 2, PUT_RETURN_CODE_NOT_PUT)  # the grace period has expired
    s.latest("k2")
    assert len(s.dropped) == 1


def test_expired_versions_are_deleted_a_segment_at_a_time(s):
    """Versions leave the store once stream time has left their whole segment behind;
    until then no read sees them."""
    s.put("k", "v0", 0, LATEST)
    s.put("k", "v1", 10, LATEST)
    rows = s.store._store
    assert rows.get(Windowed("k", 0, 10)) is not None
    s.put("other", "x", HISTORY_RETENTION + 11, LATEST)  # [0, 10) is past the retention
    s.at("k", 5)
    assert rows.get(Windowed("k", 0, 10)) is not None  # its segment has not passed yet
    s.put("other", "x", HISTORY_RETENTION + SI, LATEST)  # the segment [0, SI) has
    assert rows.get(Windowed("k", 0, 10)) is None
    s.latest("k", "v1", 10)


def test_expiry_reads_only_the_keys_of_due_segments(make):
    """Expiring a segment reads the keys filed under it, not the whole store."""
    s = make()
    for i in range(50):
        s.put(f"k{i}", "a", 2 * SI + i, LATEST)
        s.put(f"k{i}", "b", 2 * SI + 100 + i, LATEST)  # versions valid to 2 SI + 100 + i
    s.put("old", "a", 0, LATEST)
    s.put("old", "b", 5, LATEST)  # one version valid to 5, in the first segment
    history = s.store._rows.history
    read: list[Any] = []

    def counting(key: Any, time_to: int) -> Any:
        read.append(key)
        return history(key, time_to)

    s.store._rows.history = counting  # type: ignore[method-assign]
    s.put("old", "c", HISTORY_RETENTION + SI, LATEST)
    assert read == ["old"]


@pytest.mark.parametrize("seed", range(10))
def test_random_puts_agree_with_a_list_of_versions(make, seed):
    """Random puts and deletes, in and out of order, against a plain model: a sorted list of
    (timestamp, value) per key, reads answered by Kafka Streams' rules."""
    rng = random.Random(seed)
    # few distinct timestamps: puts often meet a version at their own timestamp
    retention = rng.choice([0, 4, 12, 30])
    s = make(retention=retention, segment=rng.choice([3, 10, 30]))
    model: dict[str, dict[int, Any]] = {}
    observed = -1
    for _ in range(300):
        key = rng.choice("abc")
        t = max(0, observed - rng.randint(-2, retention + 2)) if observed >= 0 else 0
        value = None if rng.random() < 0.25 else rng.randint(0, 99)
        cutoff = observed - retention if observed >= 0 else -(2**63)
        if t < cutoff:
            assert s.store.put(key, value, t) == PUT_RETURN_CODE_NOT_PUT
            continue
        versions = model.setdefault(key, {})
        later = [v for v in versions if v > t]
        versions[t] = value
        expected = min(later) if later else LATEST
        got = s.store.put(key, value, t)
        if got != expected:
            pytest.fail(f"put {key}={value}@{t}: {got} != {expected} ({sorted(versions)})")
        observed = max(observed, t)
        cutoff = observed - retention
        for k, vs in model.items():
            times = sorted(vs)
            for as_of in range(max(0, cutoff - 3), observed + 3):
                before = [x for x in times if x <= as_of]
                latest_t = times[-1]
                if as_of < cutoff:
                    want = (VersionedRecord(vs[latest_t], latest_t) if latest_t <= as_of
                            and vs[latest_t] is not None else None)
                elif not before or vs[before[-1]] is None:
                    want = None
                else:
                    start = before[-1]
                    nxt = [x for x in times if x > start]
                    want = VersionedRecord(vs[start], start, nxt[0] if nxt else None)
                assert s.store.get(k, as_of) == want, (k, as_of, sorted(vs.items()))


@pytest.mark.parametrize("local", [False, True])
def test_rows_survive_commit_and_restore(tmp_path, local):
    """Kafka restores a versioned store from its changelog; ours is the task's deltas and
    snapshots: a fresh worker's copy (in memory, or RocksDB) answers what the first did."""
    persistence = FileTaskStatePersistence(str(tmp_path / "tasks"),
                                           str(tmp_path / "local") if local else None)

    def store_of(state: Any) -> VersionedKeyValueStore:
        return VersionedKeyValueStore(state.store("v"), state.store(VERSIONED_META_STORE),
                                      history_retention=HISTORY_RETENTION,
                                      segment_interval=SEGMENT_INTERVAL)

    puts = [("k", "vp20", SI + 20), ("k", "vp10", SI + 10), ("k", "vn10", SI - 10),
            ("k", "vn2", SI - 2), ("k", None, SI - 1), ("k", "vp1", SI + 1)]
    for batch, (key, value, t) in enumerate(puts):
        state = persistence.checkout(0, 0, batch - 1)
        store_of(state).put(key, value, t)
        persistence.commit(state, batch)
        persistence.checkin(state)
    fresh = FileTaskStatePersistence(str(tmp_path / "tasks"),
                                     str(tmp_path / "local2") if local else None)
    from streamtable.state import persistence as module

    module._CACHE.clear()
    state = fresh.checkout(0, 0, len(puts) - 1)
    restored = store_of(state)
    assert restored.get("k") == VersionedRecord("vp20", SI + 20)
    assert restored.get("k", SI + 15) == VersionedRecord("vp10", SI + 10, SI + 20)
    assert restored.get("k", SI + 5) == VersionedRecord("vp1", SI + 1, SI + 10)
    assert restored.get("k", SI) is None
    assert restored.get("k", SI - 2) == VersionedRecord("vn2", SI - 2, SI - 1)
    assert restored.get("k", SI - 5) == VersionedRecord("vn10", SI - 10, SI - 2)
    assert restored.observed_stream_time == SI + 20
    view = ReadOnlyVersionedKeyValueStore(StoreVersionRows(state.store("v")), "v")
    assert view.to_dict() == {"k": "vp20"}
    state.close()
