"""Task state on durable storage: versions, replays, attempts, snapshots, on a local directory
and on S3 (a real S3 protocol server: moto's)."""

from __future__ import annotations

import os
import pickle
import random
import shutil
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from streamtable.state import persistence as state_module
from streamtable.state.persistence import FileTaskStatePersistence, TaskStateStore, _chain
from streamtable.state.rocksdb import RocksDBTaskState
from streamtable.state.task_state import TaskState
from streamtable.storage import storage_at


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3_location(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    moto_server = pytest.importorskip("moto.server")
    import os

    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    os.environ["AWS_ACCESS_KEY_ID"] = "test"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "test"
    from pyarrow import fs

    s3 = fs.S3FileSystem(endpoint_override=f"127.0.0.1:{port}", scheme="http",
                         region="us-east-1", allow_bucket_creation=True)
    s3.create_dir("state")
    try:
        yield (f"s3://state/app?endpoint_override=127.0.0.1:{port}&scheme=http"
               "&region=us-east-1")
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(params=["local", "s3"])
def location(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "local":
        return str(tmp_path / "tasks")
    base = request.getfixturevalue("s3_location")
    head, _, query = base.partition("?")
    return f"{head}/{tmp_path.name}?{query}"


@pytest.fixture(params=["memory", "rocksdb"])
def make(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    """Persistence with working copies in the worker's memory or in RocksDB on local disk."""
    local = str(tmp_path / "local") if request.param == "rocksdb" else None

    def make(location: str) -> FileTaskStatePersistence:
        return FileTaskStatePersistence(location, local_dir=local)

    yield make
    _forget_working_copies()


def _forget_working_copies() -> None:
    """As if another Python worker ran the next batch (an in-memory copy is gone; a RocksDB
    copy stays on disk for whoever opens it next)."""
    for state in state_module._CACHE.values():
        state.close()
    state_module._CACHE.clear()


def _run_batch(p: FileTaskStatePersistence, batch: int, puts: dict[Any, Any],
               task: int = 0) -> dict[str, dict[Any, Any]]:
    s = p.checkout(0, task, batch - 1)
    for k, v in puts.items():
        if v is None:
            s.store("t").delete(k)
        else:
            s.store("t").put(k, v)
    s.stream_time = max(s.stream_time, batch)
    changes = p.commit(s, batch)
    p.checkin(s)
    return changes


def _contents(p: FileTaskStatePersistence, version: int, task: int = 0) -> dict[Any, Any]:
    s = p.checkout(0, task, version)
    out = dict(s.store("t").items())
    p.checkin(s)
    return out


def test_each_batch_starts_from_the_previous_one(location: str, make: Any) -> None:
    p = make(location)
    _run_batch(p, 0, {"a": (1, 0)})
    _run_batch(p, 1, {"b": (2, 1)})
    _run_batch(p, 2, {"a": None})
    assert _contents(p, 2) == {"b": (2, 1)}
    assert _contents(p, 1) == {"a": (1, 0), "b": (2, 1)}  # an older version, rebuilt
    _forget_working_copies()
    assert _contents(p, 2) == {"b": (2, 1)}  # another worker, from the files alone


def test_a_replay_replaces_its_batch_and_invalidates_copies_of_the_old_attempt(
        location: str, make: Any) -> None:
    p = make(location)
    _run_batch(p, 0, {"a": (1, 0)})
    _run_batch(p, 1, {"a": (5, 1)})  # attempt 1 of batch 1; this worker keeps its copy
    stale = p.checkout(0, 0, 1)
    # a retry elsewhere: another worker recomputes batch 1 from batch 0 with other input
    # (impossible in Spark, which replays the same input, but it makes the versions visible)
    saved = dict(state_module._CACHE)
    _forget_working_copies()
    _run_batch(p, 1, {"a": (7, 1)})
    state_module._CACHE.clear()
    state_module._CACHE.update(saved)
    p.checkin(stale)  # the first worker's copy of attempt 1 comes back
    assert _contents(p, 1) == {"a": (7, 1)}
    names = p.storage.list("0/0")
    assert len([n for n in names if n.startswith("000000000001-")]) == 1


def test_two_attempts_files_of_one_batch_load_one_of_them(location: str, make: Any) -> None:
    p = make(location)
    _run_batch(p, 0, {"a": (1, 0)})
    _run_batch(p, 1, {"b": (2, 1)})
    # a zombie attempt of batch 1 writes the same content under its own nonce afterwards
    (only,) = [n for n in p.storage.list("0/0") if n.startswith("000000000001-")]
    data = p.storage.read(f"0/0/{only}")
    p.storage.write("0/0/000000000001-ffffffffffffffff.delta", data)
    _forget_working_copies()
    assert _contents(p, 1) == {"a": (1, 0), "b": (2, 1)}
    _run_batch(p, 2, {"c": (3, 2)})
    assert _contents(p, 2) == {"a": (1, 0), "b": (2, 1), "c": (3, 2)}
    assert [f.batch for f in _chain(p.storage.list("0/0"))] == [0, 1, 2]


def test_later_batches_of_an_abandoned_run_do_not_count(location: str, make: Any) -> None:
    p = make(location)
    for b in range(4):
        _run_batch(p, b, {b: (b, b)})
    _forget_working_copies()
    _run_batch(p, 2, {"x": (9, 2)})  # batches 2.. are run again, differently
    _forget_working_copies()
    assert _contents(p, 3) == {0: (0, 0), 1: (1, 1), "x": (9, 2)}


def test_large_state_with_few_changes_is_not_rewritten_every_few_batches(tmp_path: Any,
                                                                       make: Any) -> None:
    p = make(str(tmp_path / "tasks"))
    _run_batch(p, 0, {i: (i, 0) for i in range(200_000)})  # a delta that is the whole state
    snaps = []
    for b in range(1, 120):
        _run_batch(p, b, {b: (-b, b)})
        snaps += [n for n in p.storage.list("0/0") if n.endswith(".snap")]
    # 200,000 entries against their first delta and 1,000 entries per small delta: no
    # snapshot for 120 batches
    assert not snaps
    _forget_working_copies()
    restored = _contents(p, 119)
    assert len(restored) == 200_000 and restored[5] == (-5, 5)


def test_small_state_is_compacted_and_old_files_are_deleted(location: str, make: Any) -> None:
    p = make(location)
    for b in range(60):
        _run_batch(p, b, {b % 7: (b, b)})
    names = p.storage.list("0/0")
    snaps = [n for n in names if n.endswith(".snap")]
    assert snaps, names
    assert len(names) <= 2 * (state_module.MIN_SNAPSHOT_ENTRIES // state_module.ENTRIES_PER_FILE)
    _forget_working_copies()
    assert _contents(p, 59) == {k: (b, b) for b in range(53, 60) for k in [b % 7]}


def test_random_histories_restore_the_same_state_from_copies_and_from_files(
        tmp_path: Any, make: Any) -> None:
    rng = random.Random(7)
    p = make(str(tmp_path / "tasks"))
    model: dict[Any, Any] = {}
    for b in range(150):
        puts = {}
        for _ in range(rng.randint(0, 300)):
            k = rng.randint(0, 2000)
            puts[k] = None if rng.random() < 0.2 else (rng.randint(0, 9), b)
        if rng.random() < 0.3:
            _forget_working_copies()
        changes = _run_batch(p, b, puts)
        for k, v in puts.items():
            if v is None:
                model.pop(k, None)
            else:
                model[k] = v
        assert set(changes.get("t", {})) <= set(puts)
    assert _contents(p, 149) == model
    _forget_working_copies()
    assert _contents(p, 149) == model


def test_storage_lists_only_whole_objects(location: str, make: Any) -> None:
    storage = storage_at(location)
    storage.write("d/x.delta", b"1")
    storage.write("d/x.delta", b"22")
    assert storage.list("d") == ["x.delta"] and storage.read("d/x.delta") == b"22"
    assert storage.exists("d/x.delta") and not storage.exists("d/y.delta")
    storage.delete("d/x.delta")
    storage.delete("d/x.delta")
    assert storage.list("d") == [] and storage.list("missing") == []
    storage.write("e/f/g.snap", b"3")
    storage.clear()
    assert storage.list("e/f") == []


def test_snapshot_rule_counts_files_and_entries() -> None:
    s = TaskState()
    for i in range(50_000):
        s.store("t").put(i, (i, 0))
    # three times the state (DELTAS_PER_STATE), each file counted as 1,000 entries
    s.batches_since_snapshot = 149
    assert not TaskStateStore.should_snapshot(s)
    s.batches_since_snapshot = 151
    assert TaskStateStore.should_snapshot(s)
    s.batches_since_snapshot = 100
    s.delta_entries_since_snapshot = 49_999
    assert not TaskStateStore.should_snapshot(s)
    s.delta_entries_since_snapshot = 50_001
    assert TaskStateStore.should_snapshot(s)


def test_a_restarted_worker_reuses_its_rocksdb_copy_without_reading_the_state_again(
        tmp_path: Any) -> None:
    local = str(tmp_path / "local")
    p = FileTaskStatePersistence(str(tmp_path / "tasks"), local_dir=local)
    _run_batch(p, 0, {i: (i, 0) for i in range(100_000)})
    for b in range(1, 6):
        _run_batch(p, b, {b: (-b, b)})
    _forget_working_copies()  # the worker process ends; its database stays on disk
    read: list[str] = []
    restarted = FileTaskStatePersistence(str(tmp_path / "tasks"), local_dir=local)
    original = restarted.storage.read

    def counting_read(name: str) -> bytes:
        read.append(name)
        return original(name)

    restarted.storage.read = counting_read  # type: ignore[method-assign]
    s = restarted.checkout(0, 0, 5)
    assert read == [] and s.store("t").get(3) == (-3, 3) and len(s.store("t")) == 100_000
    restarted.checkin(s)
    _run_batch(restarted, 6, {"new": (1, 6)})
    # another batch ran elsewhere in the meantime: only its delta is read to catch up
    _forget_working_copies()
    _run_batch(FileTaskStatePersistence(str(tmp_path / "tasks")), 7, {"x": (7, 7)})
    _forget_working_copies()
    read.clear()
    s = restarted.checkout(0, 0, 7)
    assert [n.rsplit("/", 1)[1].split("-")[0] for n in read] == ["000000000007"]
    assert s.store("t").get("x") == (7, 7) and s.store("t").get("new") == (1, 6)
    restarted.checkin(s)
    _forget_working_copies()


def test_the_next_batch_on_another_worker_opens_the_rocksdb_copy_the_last_commit_wrote(
        tmp_path: Any) -> None:
    local = str(tmp_path / "local")
    p = FileTaskStatePersistence(str(tmp_path / "tasks"), local_dir=local)
    _run_batch(p, 0, {i: (i, 0) for i in range(1_000)})
    _run_batch(p, 1, {1: (-1, 1)})
    # the worker that ran them keeps open what it kept; another worker runs the next batch
    held = dict(state_module._CACHE)
    state_module._CACHE.clear()
    read: list[str] = []
    original = p.storage.read

    def counting_read(name: str) -> bytes:
        read.append(name)
        return original(name)

    p.storage.read = counting_read  # type: ignore[method-assign]
    try:
        s = p.checkout(0, 0, 1)
        assert read == [] and s.store("t").get(1) == (-1, 1) and len(s.store("t")) == 1_000
        p.checkin(s)
    finally:
        for state in held.values():
            state.close()
        _forget_working_copies()


def test_windowed_keys_are_found_by_their_key_across_batches(location: str, make: Any) -> None:
    """Window and session aggregations look up the windows of a key (keys_with_first); a
    RocksDB working copy finds them among what earlier batches wrote and what this one did."""
    from streamtable import Windowed

    p = make(location)
    _run_batch(p, 0, {Windowed("a", 10, 20): (1, 10), Windowed("a", 9, 19): (2, 9),
                      Windowed("ab", 0, 10): (3, 0), ("a", 1): (4, 0)})
    _forget_working_copies()
    _run_batch(p, 1, {Windowed("a", 9, 19): None})  # an expired window, deleted
    s = p.checkout(0, 0, 1)
    store = s.store("t")
    assert store.keys_with_first("a") == [("a", 1), Windowed("a", 10, 20)]
    store.put(Windowed("a", 30, 40), (6, 30))
    assert store.keys_with_first("a") == [("a", 1), Windowed("a", 10, 20), Windowed("a", 30, 40)]
    assert store.get(Windowed("a", 10, 20)) == (1, 10)
    p.checkin(s)


def test_a_large_commit_reaches_rocksdb_in_parts_under_a_pending_version(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit's writes are not held in one write batch: each full one is written at once,
    with a version that matches no durable state until the commit names its own."""
    from streamtable.state import rocksdb

    monkeypatch.setattr(rocksdb, "WRITE_BATCH_BYTES", 4096)
    p = FileTaskStatePersistence(str(tmp_path / "tasks"), local_dir=str(tmp_path / "local"))
    s = p.checkout(0, 0, -1)
    for i in range(5_000):
        s.store("t").put(i, (i, 0))
    s.store("t").drain_changes()
    meta = pickle.loads(s.db.get(rocksdb._META))
    written = sum(1 for _ in s.store("t")._db_items())
    assert meta["version"] == -2 and 4_000 <= written < 5_000
    s.store("t").put(0, (-1, 0))  # what the commit drains next is still its own
    p.commit(s, 0)
    p.checkin(s)
    _forget_working_copies()
    contents = _contents(p, 0)
    assert len(contents) == 5_000 and contents[0] == (-1, 0) and contents[4_999] == (4_999, 0)


def test_a_worker_that_died_between_the_parts_of_a_commit_leaves_a_copy_that_is_rebuilt(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamtable.state import rocksdb

    monkeypatch.setattr(rocksdb, "WRITE_BATCH_BYTES", 4096)
    p = FileTaskStatePersistence(str(tmp_path / "tasks"), local_dir=str(tmp_path / "local"))
    _run_batch(p, 0, {i: (i, 0) for i in range(100)})
    _forget_working_copies()
    s = p.checkout(0, 0, 0)
    for i in range(5_000):
        s.store("t").put(i, (-i, 1))
    s.store("t").drain_changes()  # parts written, the commit never ends
    s.close()
    assert _contents(p, 0) == {i: (i, 0) for i in range(100)}


def test_a_rocksdb_copys_snapshot_is_written_as_rocksdb_keeps_it_and_read_by_any_copy(
        tmp_path: Any) -> None:
    """A snapshot of a RocksDB copy holds its entries encoded as RocksDB keeps them (no
    decoding on the way out); a worker with in-memory copies, and a RocksDB copy rebuilt from
    the files, read the same state from it."""
    pytest.importorskip("rocksdict")
    from streamtable.state.rocksdb import EncodedEntries

    location = str(tmp_path / "tasks")
    on_disk = FileTaskStatePersistence(location, local_dir=str(tmp_path / "local"))
    model: dict[Any, Any] = {}
    for b in range(40):
        puts = {("k", i % 97, b): (b, i) for i in range(600)}  # grows past the snapshot rule
        puts.update({i: None for i in range(b)})
        puts[b] = {"v": b}
        _run_batch(on_disk, b, puts)
        model.update(puts)
        model = {k: v for k, v in model.items() if v is not None}
    names = sorted(os.listdir(f"{location}/0/0"))
    snapshot = [n for n in names if n.endswith(".snap")][-1]
    header, chunks = TaskStateStore(storage_at(location), "0/0")._read(snapshot)
    kinds = {type(chunk) for _, chunk in chunks}
    assert kinds == {EncodedEntries}
    _forget_working_copies()
    assert _contents(FileTaskStatePersistence(location), 39) == model  # in memory
    _forget_working_copies()
    shutil.rmtree(tmp_path / "local")
    rebuilt = on_disk.checkout(0, 0, 39)  # a RocksDB copy rebuilt from the files
    assert dict(rebuilt.store("t").items()) == model and len(rebuilt.store("t")) == len(model)
    on_disk.checkin(rebuilt)
    _forget_working_copies()


def test_a_rocksdb_copys_delta_is_written_as_encoded_for_rocksdb_and_read_by_any_copy(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A RocksDB copy's delta holds its changes as they were encoded for RocksDB (encoded
    once), deletions and the expiry included, the expiry in the store's first chunk; a worker
    with in-memory copies and another RocksDB copy catching up from the deltas read the same
    state from them."""
    pytest.importorskip("rocksdict")
    from streamtable.state.rocksdb import EncodedEntries
    from streamtable.state.stores import EXPIRED_UP_TO

    monkeypatch.setattr(state_module, "CHUNK", 64)  # a delta of several chunks a store
    monkeypatch.setattr(state_module, "MIN_SNAPSHOT_ENTRIES", 10**9)  # deltas only
    location = str(tmp_path / "tasks")
    on_disk = FileTaskStatePersistence(location, local_dir=str(tmp_path / "local"))
    s = on_disk.checkout(0, 0, -1)
    for t in range(300):
        s.store("w").put(("k", t, 0), t)
    s.store("plain").put("gone", 1)
    s.stream_time = 0
    on_disk.commit(s, 0)
    on_disk.checkin(s)
    _forget_working_copies()
    s = on_disk.checkout(0, 0, 0)
    s.store("w").delete_with_second_up_to(99)  # 100 records, one change
    for t in range(300, 500):
        s.store("w").put(("k", t, 0), t)
    s.store("plain").delete("gone")
    s.store("plain").put("kept", {"v": 2})
    s.stream_time = 1
    changes = on_disk.commit(s, 1)
    on_disk.checkin(s)
    assert changes["w"][EXPIRED_UP_TO] == 99 and len(changes["w"]) == 201
    assert changes["plain"] == {"gone": None, "kept": {"v": 2}}
    delta = [n for n in os.listdir(f"{location}/0/0") if n.startswith("000000000001")]
    _, chunks = TaskStateStore(storage_at(location), "0/0")._read(delta[0])
    read = [(name, chunk) for name, chunk in chunks]
    assert {type(chunk) for _, chunk in read} == {EncodedEntries}
    window = [chunk for name, chunk in read if name == "w"]
    assert [c.expired_up_to for c in window] == [99, None, None, None]
    assert sum(len(c.pairs) for c in window) == 200
    model = {"kept": {"v": 2}}
    want = {("k", t, 0): t for t in range(100, 500)}
    _forget_working_copies()
    in_memory = FileTaskStatePersistence(location).checkout(0, 0, 1)
    assert dict(in_memory.store("w").items()) == want
    assert dict(in_memory.store("plain").items()) == model
    # a RocksDB copy of batch 0 in another slot, caught up from the delta
    held = on_disk.checkout(0, 0, 1)  # holds the latest slot
    files = TaskStateStore(storage_at(location), "0/0")
    behind = files.load(RocksDBTaskState.open(str(tmp_path / "behind")), 0)
    assert dict(behind.store("plain").items()) == {"gone": 1}
    caught_up = files.load(behind, 1)
    assert caught_up is behind  # caught up, not rebuilt
    for name, contents in (("w", want), ("plain", model)):
        store = caught_up.store(name)
        assert dict(store.items()) == contents and len(store) == len(contents)
    caught_up.close()
    held.close()


def test_a_copy_whose_drained_changes_were_staged_in_part_is_never_flushed(
        tmp_path: Any) -> None:
    """Until a store's drained parts were all staged the copy refuses to flush, for good if
    they never are: it must not be recorded as holding a version it holds only in part."""
    pytest.importorskip("rocksdict")
    copy = RocksDBTaskState.open(str(tmp_path / "copy"))
    for i in range(10):
        copy.store("t").put(i, i)
    changes, parts = copy.store("t").drain_encoded(4)
    assert len(changes) == 10
    next(parts)
    with pytest.raises(RuntimeError, match="not all staged"):
        copy.flush(0, "n")
    del parts
    with pytest.raises(RuntimeError, match="not all staged"):
        copy.flush(0, "n")
    copy.close()
