"""The Processor API's window store, against Kafka Streams' own window store tests
(``AbstractWindowBytesStoreTest``, ``InMemoryWindowStoreTest``: streams/src/test/java/org/apache/
kafka/streams/state/internals/), over the in-memory working copy of a task and over the RocksDB
one."""

from __future__ import annotations

from typing import Any

import pytest

from streamtable.state.stores import InMemoryKeyValueStore
from streamtable.state.timestamped import ValueAndTimestamp
from streamtable.state.window_store import WindowStore
from streamtable.state.windowed import MAX_TIME, Windowed

WINDOW_SIZE = 3
SEGMENT_INTERVAL = 60_000
RETENTION_PERIOD = 2 * SEGMENT_INTERVAL
START = SEGMENT_INTERVAL - 4  # Kafka's defaultStartTime


@pytest.fixture(params=["memory", "rocksdb"])
def make_store(request: Any, tmp_path: Any) -> Any:
    """``make_store(retention, size, retain_duplicates)``: a window store over a task's stores
    of the parametrized kind."""
    if request.param == "memory":
        def kv(name: str) -> Any:
            return InMemoryKeyValueStore(name, track_changes=True)
    else:
        pytest.importorskip("rocksdict")
        from streamtable.state.rocksdb import RocksDBTaskState

        state = RocksDBTaskState.open(str(tmp_path / "copy"))
        request.addfinalizer(state.close)
        kv = state.store
    counter = iter(range(1000))
    dropped: list[int] = []

    def make(retention: int = RETENTION_PERIOD, size: int = WINDOW_SIZE,
             retain_duplicates: bool = False, timestamped: bool = False) -> WindowStore:
        n = next(counter)
        return WindowStore(kv(f"w{n}"), kv("__meta__"), window_size=size, retention=retention,
                           retain_duplicates=retain_duplicates, timestamped=timestamped,
                           now=lambda: 1, on_expired=lambda: dropped.append(1))

    make.dropped = dropped  # type: ignore[attr-defined]
    return make


@pytest.fixture
def store(make_store: Any) -> WindowStore:
    return make_store()


def pair(key: Any, value: Any, start: int, size: int = WINDOW_SIZE) -> tuple[Windowed, Any]:
    return Windowed(key, start, min(start + size, MAX_TIME)), value


ZERO, ONE, TWO = pair(0, "zero", START), pair(1, "one", START + 1), pair(2, "two", START + 2)
THREE, FOUR, FIVE = (pair(3, "three", START + 2), pair(4, "four", START + 4),
                     pair(5, "five", START + 5))


def put_first_batch(store: WindowStore) -> None:
    store.put(0, "zero", START)
    store.put(1, "one", START + 1)
    store.put(2, "two", START + 2)
    store.put(3, "three", START + 2)
    store.put(4, "four", START + 4)
    store.put(5, "five", START + 5)


def put_second_batch(store: WindowStore) -> None:
    for i in range(1, 7):
        store.put(2, f"two+{i}", START + 2 + i)


def values(it: Any) -> set[Any]:
    return {v for _, v in it}


def test_range_and_single_point_fetch(store: WindowStore) -> None:
    put_first_batch(store)
    assert values(store.fetch(0, START - WINDOW_SIZE, START + WINDOW_SIZE)) == {"zero"}
    put_second_batch(store)
    for i in range(1, 7):
        assert store.fetch(2, START + 2 + i) == f"two+{i}"
    expected = {
        -2: set(), -1: {"two"}, 0: {"two", "two+1"}, 1: {"two", "two+1", "two+2"},
        2: {"two", "two+1", "two+2", "two+3"}, 3: {"two", "two+1", "two+2", "two+3", "two+4"},
        4: {"two", "two+1", "two+2", "two+3", "two+4", "two+5"},
        5: {"two", "two+1", "two+2", "two+3", "two+4", "two+5", "two+6"},
        6: {"two+1", "two+2", "two+3", "two+4", "two+5", "two+6"},
        7: {"two+2", "two+3", "two+4", "two+5", "two+6"}, 8: {"two+3", "two+4", "two+5", "two+6"},
        9: {"two+4", "two+5", "two+6"}, 10: {"two+5", "two+6"}, 11: {"two+6"}, 12: set(),
    }
    for offset, want in expected.items():
        t = START + offset
        assert values(store.fetch(2, t - WINDOW_SIZE, t + WINDOW_SIZE)) == want, offset


def test_get_all(store: WindowStore) -> None:
    put_first_batch(store)
    assert list(store.all()) == [ZERO, ONE, TWO, THREE, FOUR, FIVE]


def test_get_all_non_deleted_records(store: WindowStore) -> None:
    for i, name in enumerate(["zero", "one", "two", "three", "four"]):
        store.put(i, name, START + i)
    store.put(1, None, START + 1)
    store.put(3, None, START + 3)
    assert list(store.all()) == [ZERO, TWO, pair(4, "four", START + 4)]


def test_get_all_returns_timestamp_ordered_records(store: WindowStore) -> None:
    for i, name in [(4, "four"), (0, "zero"), (2, "two"), (3, "three"), (1, "one")]:
        store.put(i, name, START + i)
    assert list(store.all()) == [ZERO, ONE, TWO, pair(3, "three", START + 3), FOUR]


def test_backward_all(store: WindowStore) -> None:
    put_first_batch(store)
    assert list(store.backward_all()) == [FIVE, FOUR, THREE, TWO, ONE, ZERO]


def test_fetch_all_in_time_range(store: WindowStore) -> None:
    put_first_batch(store)
    assert list(store.fetch_all(START + 1, START + 4)) == [ONE, TWO, THREE, FOUR]
    assert list(store.fetch_all(START, START + 3)) == [ZERO, ONE, TWO, THREE]
    assert list(store.fetch_all(START + 1, START + 5)) == [ONE, TWO, THREE, FOUR, FIVE]
    assert list(store.backward_fetch_all(START + 1, START + 4)) == [FOUR, THREE, TWO, ONE]


def test_fetch_key_range(store: WindowStore) -> None:
    put_first_batch(store)
    lo, hi = START - WINDOW_SIZE, START + WINDOW_SIZE
    assert list(store.fetch(0, 1, lo, hi)) == [ZERO, ONE]
    assert list(store.fetch(1, 1, lo, hi)) == [ONE]
    assert list(store.fetch(1, 3, lo, hi)) == [ONE, TWO, THREE]
    assert list(store.fetch(0, 5, lo, hi)) == [ZERO, ONE, TWO, THREE]
    assert list(store.fetch(0, 5, lo, hi + 5)) == [ZERO, ONE, TWO, THREE, FOUR, FIVE]
    assert list(store.fetch(0, 5, START + 2, hi + 5)) == [TWO, THREE, FOUR, FIVE]
    assert list(store.fetch(4, 5, START + 2, START + WINDOW_SIZE)) == []
    assert list(store.fetch(0, 3, START + 3, START + WINDOW_SIZE + 5)) == []
    assert list(store.fetch(None, 2, lo, START + WINDOW_SIZE + 2)) == [ZERO, ONE, TWO]
    assert list(store.fetch(2, None, lo, START + WINDOW_SIZE + 5)) == [TWO, THREE, FOUR, FIVE]
    assert list(store.fetch(None, None, lo, hi + 5)) == [ZERO, ONE, TWO, THREE, FOUR, FIVE]
    assert list(store.backward_fetch(0, 5, lo, hi + 5)) == [FIVE, FOUR, THREE, TWO, ONE, ZERO]


def test_put_and_fetch_before(store: WindowStore) -> None:
    put_first_batch(store)
    for i, name in enumerate(["zero", "one", "two", "three", "four", "five"]):
        assert values(store.fetch(i, START + i - WINDOW_SIZE, START + i)) == (
            {name} if i != 3 else {"three"})
    put_second_batch(store)
    expected = {-1: set(), 0: set(), 1: set(), 2: {"two"}, 3: {"two", "two+1"},
                4: {"two", "two+1", "two+2"}, 5: {"two", "two+1", "two+2", "two+3"},
                6: {"two+1", "two+2", "two+3", "two+4"}, 7: {"two+2", "two+3", "two+4", "two+5"},
                8: {"two+3", "two+4", "two+5", "two+6"}, 9: {"two+4", "two+5", "two+6"},
                10: {"two+5", "two+6"}, 11: {"two+6"}, 12: set(), 13: set()}
    for offset, want in expected.items():
        t = START + offset
        assert values(store.fetch(2, t - WINDOW_SIZE, t)) == want, offset


def test_put_same_key_timestamp_with_duplicates(make_store: Any) -> None:
    store = make_store(retain_duplicates=True)
    store.put(0, "zero", START)
    assert values(store.fetch(0, START - WINDOW_SIZE, START + WINDOW_SIZE)) == {"zero"}
    store.put(0, "zero", START)
    store.put(0, "zero+", START)
    store.put(0, "zero++", START)
    for offset in range(4):
        t = START + offset
        got = [v for _, v in store.fetch(0, t - WINDOW_SIZE, t + WINDOW_SIZE)]
        assert got == ["zero", "zero", "zero+", "zero++"]
    assert list(store.fetch(0, START + 4 - WINDOW_SIZE, START + 4 + WINDOW_SIZE)) == []


def test_fetch_and_iterate_over_exact_keys(make_store: Any) -> None:
    size = retention = 0x7A00000000000000
    store = make_store(retention, size)
    store.put("a", "0001", 0)
    store.put("aa", "0002", 0)
    store.put("a", "0003", 1)
    store.put("aa", "0004", 1)
    store.put("a", "0005", 0x7A00000000000000 - 1)
    assert values(store.fetch("a", 0, MAX_TIME)) == {"0001", "0003", "0005"}
    assert set(store.fetch("a", "a", 0, MAX_TIME)) == {
        pair("a", "0001", 0, size), pair("a", "0003", 1, size),
        pair("a", "0005", 0x7A00000000000000 - 1, size)}
    assert set(store.fetch("aa", "aa", 0, MAX_TIME)) == {
        pair("aa", "0002", 0, size), pair("aa", "0004", 1, size)}


def test_fetch_and_iterate_over_exact_binary_keys(make_store: Any) -> None:
    store = make_store(retain_duplicates=True)
    k1, k2, k3 = b"\x00", b"\x00\x00", b"\x00\x00\x00"
    for key, value, t in [(k1, "1", 0), (k2, "2", 0), (k3, "3", 0), (k1, "4", 1), (k2, "5", 1),
                          (k3, "6", 59999), (k1, "7", 59999), (k2, "8", 59999),
                          (k3, "9", 59999)]:
        store.put(key, value, t)
    assert values(store.fetch(k1, 0, MAX_TIME)) == {"1", "4", "7"}
    assert values(store.fetch(k2, 0, MAX_TIME)) == {"2", "5", "8"}
    assert values(store.fetch(k3, 0, MAX_TIME)) == {"3", "6", "9"}


def test_delete_and_update(store: WindowStore) -> None:
    store.put(1, "one", 0)
    store.put(1, "one v2", 0)
    assert list(store.fetch(1, 0, 0)) == [(0, "one v2")]
    store.put(1, None, 0)
    assert list(store.fetch(1, 0, 0)) == []


def test_null_on_window_not_found_and_null_keys_refused(store: WindowStore) -> None:
    assert store.fetch(1, 0) is None
    with pytest.raises(ValueError, match="key must not be None"):
        store.put(None, "anyValue", 0)
    with pytest.raises(ValueError, match="fetch needs a key"):
        store.fetch(None, 1, 2)


def test_same_results_for_single_key_fetch_and_equal_key_range_fetch(store: WindowStore) -> None:
    store.put(1, "one", 0)
    store.put(2, "two", 1)
    store.put(2, "two", 2)
    store.put(3, "three", 3)
    assert [v for _, v in store.fetch(2, 0, 5)] == [v for _, v in store.fetch(2, 2, 0, 5)]
    assert len(list(store.fetch(2, 0, 5))) == 2


def test_no_error_with_key_from_greater_than_key_to(store: WindowStore) -> None:
    store.put(0, "zero", 5)
    assert list(store.fetch(1, -1, 0, 10)) == []


def test_expired_record_is_dropped_and_counted(make_store: Any) -> None:
    store = make_store()
    store.put(1, "initial record", 2 * RETENTION_PERIOD)
    store.put(1, "late record", 0)
    store.put(1, "another on-time record", RETENTION_PERIOD + 1)
    assert make_store.dropped == [1]
    assert values(store.fetch(1, 0, MAX_TIME)) == {"initial record", "another on-time record"}


def test_fetch_of_an_expired_range_returns_nothing(store: WindowStore) -> None:
    store.put(1, "one", 0)
    store.put(1, "two", 4 * RETENTION_PERIOD)
    assert list(store.fetch(1, 0, 10)) == []
    assert store.fetch(1, 0) is None


def test_iterator_is_a_snapshot_of_the_store(store: WindowStore) -> None:
    """Kafka's shouldNotThrowConcurrentModificationException: puts after an iterator was made
    do not break it (ours is a snapshot)."""
    store.put(1, "one", 0)
    store.put(1, "two", WINDOW_SIZE * 10)
    it = store.all()
    store.put(1, "three", WINDOW_SIZE * 20)
    assert next(it) == pair(1, "one", 0)
    assert list(store.all()) == [pair(1, "one", 0), pair(1, "two", WINDOW_SIZE * 10),
                                 pair(1, "three", WINDOW_SIZE * 20)]


def test_fetch_duplicates(make_store: Any) -> None:
    store = make_store(retain_duplicates=True)
    t = 0
    for name in ("one", "two", "three"):
        store.put(1, name, t)
        store.put(1, f"{name}-2", t)
        t += WINDOW_SIZE * 10
    assert list(store.fetch(1, 0, WINDOW_SIZE * 10)) == [
        (0, "one"), (0, "one-2"), (WINDOW_SIZE * 10, "two"), (WINDOW_SIZE * 10, "two-2")]


# -- InMemoryWindowStoreTest -------------------------------------------------------------------

def test_expiration_follows_the_observed_stream_time(make_store: Any) -> None:
    """Kafka's InMemoryWindowStoreTest.testExpiration (retention 120 000, window 3)."""
    store = make_store()
    t = 0
    store.put(1, "one", t)
    t += RETENTION_PERIOD // 4
    store.put(1, "two", t)
    t += RETENTION_PERIOD // 4
    store.put(1, "three", t)
    t += RETENTION_PERIOD // 4
    store.put(1, "four", t)
    # all records are still within the retention period
    assert [v for _, v in store.all()] == ["one", "two", "three", "four"]
    t += RETENTION_PERIOD // 4
    store.put(1, "five", t)
    # "one" expired: its start is retention before the observed stream time
    assert [v for _, v in store.all()] == ["two", "three", "four", "five"]
    t += RETENTION_PERIOD // 4
    store.put(1, "six", t)
    assert [v for _, v in store.all()] == ["three", "four", "five", "six"]


def test_expired_windows_leave_the_store_a_segment_at_a_time(make_store: Any) -> None:
    store = make_store()
    store.put(1, "one", 0)
    store.put(1, "two", RETENTION_PERIOD)  # "one" expired, its segment not yet dropped
    assert store.approximate_num_entries() == 2
    store.put(1, "three", RETENTION_PERIOD + SEGMENT_INTERVAL)
    assert store.approximate_num_entries() == 2
    assert [v for _, v in store.all()] == ["two", "three"]


def test_observed_stream_time_survives_a_new_view_of_the_same_stores() -> None:
    """The stream time is task state: a view built on the same stores (the task of the next
    micro-batch, a restarted one) drops what the first would have dropped."""
    data, meta = InMemoryKeyValueStore("w"), InMemoryKeyValueStore("meta")

    def view() -> WindowStore:
        return WindowStore(data, meta, window_size=10, retention=100)

    view().put("k", "late-to-be", 1_000)
    assert view().observed_stream_time == 1_000
    view().put("k", "expired", 900)
    assert view().fetch("k", 900) is None
    assert list(view().all()) == [(Windowed("k", 1_000, 1_010), "late-to-be")]


def test_timestamped_window_store_gives_value_and_timestamp(make_store: Any) -> None:
    store = make_store(timestamped=True)
    store.put("k", ValueAndTimestamp("v", 42), 10)
    assert store.fetch("k", 10) == ValueAndTimestamp("v", 42)
    assert list(store.fetch("k", 0, 20)) == [(10, ValueAndTimestamp("v", 42))]
    with pytest.raises(TypeError, match="ValueAndTimestamp"):
        store.put("k", "plain", 10)


def test_retention_must_cover_the_window(make_store: Any) -> None:
    with pytest.raises(ValueError, match="at least the window size"):
        make_store(retention=5, size=10)


def test_two_views_of_one_store_share_its_stream_time() -> None:
    """Two processors of a task connected to one window store: what one puts moves the time
    the other drops and fetches by."""
    data, meta = InMemoryKeyValueStore("w"), InMemoryKeyValueStore("meta")
    first = WindowStore(data, meta, window_size=10, retention=100)
    second = WindowStore(data, meta, window_size=10, retention=100)
    second.put("k", "old", 0)
    first.put("k", "new", 500)
    assert second.fetch("k", 0) is None
    second.put("k", "expired", 300)
    assert [v for _, v in second.all()] == ["new"]
