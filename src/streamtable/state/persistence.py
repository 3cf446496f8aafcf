"""Exactly-once task state for the Spark runtime (a
:class:`~streamtable.state.base.TaskStatePersistence`), on any
:class:`~streamtable.storage.base.DurableStorage`: a local directory on one machine, a shared
mount or an object store (``s3://``, ``gs://``, ``hdfs://``) on a cluster.

Each task (sub-topology, partition) keeps its stores as a chain of objects under
``<subtopology>/<task>/``: ``<batch>-<nonce>.delta`` holds the keys a batch changed, and now and
then a ``<batch>-<nonce>.snap`` holds the whole state; files older than the previous snapshot
are deleted. A snapshot is written when the deltas since the last one outweigh the state
``DELTAS_PER_STATE`` times (counting each delta file as a fixed number of entries), so its cost
is spread over the changes that made it due, and a large state with few changes is not
rewritten every few batches. A state that churns (a join's windows: each record put, then
deleted) is rewritten once per three states' worth of changes; a rebuild reads at most the
state and three times its size in deltas.

Processing batch ``b`` always starts from the state after batch ``b - 1``: Spark replays an
unfinished batch with the same input after a crash, so the replay recomputes and replaces
``b``'s file, and nothing is applied twice. The nonce in the name tells attempts apart: a Python
worker keeps a working copy of the tasks it ran, tagged with the batch and nonce of the last
file it reflects; another worker may have run the task since, so the copy is brought up to date
from the newer deltas, and if it is ahead of the wanted version or its last file was replaced by
another attempt, it is rebuilt from the latest snapshot. Two attempts of one batch (a zombie task
and its retry) write the same content, so when both files exist either is right; loading picks
one deterministically.
"""

from __future__ import annotations

import io
import itertools
import logging
import pickle
import secrets
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from streamtable.state.task_state import TaskState
from streamtable.storage import storage_at
from streamtable.storage.base import DurableStorage

log = logging.getLogger(__name__)

# a delta file costs as much to list and read as this many entries of a snapshot
ENTRIES_PER_FILE = 1000
# a snapshot is due when the deltas outweigh the state this many times: at once (the rule
# before), reading the state for snapshots was 19% of Nexmark q4's workers' time at 10,000,000
# events, and three times took a tenth off its CPU time; more, and a rebuild reads more deltas
DELTAS_PER_STATE = 3
MIN_SNAPSHOT_ENTRIES = 10_000
CHUNK = 50_000  # entries per pickled chunk of a file


def _chunks(entries: Iterable[tuple[Any, Any]]) -> Iterator[dict[Any, Any]]:
    it = iter(entries.items() if isinstance(entries, dict) else entries)
    while chunk := dict(itertools.islice(it, CHUNK)):
        yield chunk


def _drain(store: Any) -> tuple[dict[Any, Any], Iterable[Any]]:
    """A store's changes since the last commit, and their chunks for a delta: as the store
    encodes them for itself where it does (RocksDB: staged as they are iterated, see
    :meth:`~streamtable.state.rocksdb.RocksDBKeyValueStore.drain_encoded`), else as dicts."""
    encoded = getattr(store, "drain_encoded", None)
    if encoded is not None:
        return encoded(CHUNK)  # type: ignore[no-any-return]
    changes = store.drain_changes()
    return changes, _chunks(changes)


def _whole(store: Any) -> Iterator[Any]:
    """A store's entries for a snapshot, in chunks: as the store keeps them where it can give
    them so (RocksDB: :class:`~streamtable.state.rocksdb.EncodedEntries`), else as dicts."""
    encoded = getattr(store, "encoded_chunks", None)
    return encoded(CHUNK) if encoded is not None else _chunks(store.items())


class _File:
    """One state file: ``<batch>-<nonce>.<kind>``."""

    __slots__ = ("name", "batch", "nonce", "snapshot")

    def __init__(self, name: str) -> None:
        stem, _, kind = name.rpartition(".")
        batch, _, nonce = stem.partition("-")
        self.name = name
        self.batch = int(batch)
        self.nonce = nonce
        self.snapshot = kind == "snap"


def _chain(names: list[str]) -> list[_File]:
    """One file per batch, in batch order: of several attempts' files, the snapshot, else the
    greatest name."""
    best: dict[int, _File] = {}
    for name in names:
        if not name.endswith((".delta", ".snap")):
            continue
        f = _File(name)
        old = best.get(f.batch)
        if old is None or (f.snapshot, f.name) > (old.snapshot, old.name):
            best[f.batch] = f
    return [best[b] for b in sorted(best)]


class TaskStateStore:
    """Durable, versioned state of one task under ``directory`` of ``storage``."""

    def __init__(self, storage: DurableStorage, directory: str) -> None:
        self.storage = storage
        self.directory = directory

    def _names(self) -> list[str]:
        return self.storage.list(self.directory)

    def _read(self, name: str) -> tuple[dict[str, Any], Iterator[tuple[str, Any]]]:
        """The file's header and its (store, entries) chunks: dicts, or a RocksDB copy's
        snapshot's :class:`~streamtable.state.rocksdb.EncodedEntries`."""
        stream = io.BytesIO(self.storage.read(f"{self.directory}/{name}"))
        header = pickle.load(stream)

        def chunks() -> Iterator[tuple[str, Any]]:
            while (chunk := pickle.load(stream)) is not None:
                yield chunk

        return header, chunks()

    def _write(self, name: str, header: dict[str, Any],
               stores: Iterable[tuple[str, Iterable[Any]]]) -> None:
        """Header, then each store's entries in chunks of ``CHUNK`` (a snapshot of a large
        state is never one object in memory), then an end mark."""

        def parts() -> Iterator[bytes]:
            yield pickle.dumps(header, protocol=pickle.HIGHEST_PROTOCOL)
            for store_name, chunks in stores:
                for chunk in chunks:
                    yield pickle.dumps((store_name, chunk), protocol=pickle.HIGHEST_PROTOCOL)
            yield pickle.dumps(None)

        self.storage.write(f"{self.directory}/{name}", parts())

    def _remove(self, name: str) -> None:
        self.storage.delete(f"{self.directory}/{name}")

    # -- loading ---------------------------------------------------------------------------
    def load(self, cached: TaskState | None, version: int) -> TaskState:
        """The state after batch ``version``, reusing ``cached`` when it is a valid prefix."""
        names = self._names()
        files = [f for f in _chain(names) if f.batch <= version]
        newer = [] if cached is None else [f for f in files if f.batch > cached.version]
        if (cached is not None and cached.version <= version and self._valid(cached, files)
                and not any(f.snapshot for f in newer)):
            for f in newer:
                self._apply(cached, f)
            cached.version = version
            if newer:  # a copy that reflects no newer file is still valid as it was recorded
                cached.committed()
            cached.listing = names
            return cached
        state = self._rebuild(files, version, cached)
        state.committed()
        state.listing = names
        return state

    @staticmethod
    def _valid(cached: TaskState, files: list[_File]) -> bool:
        upto = [f for f in files if f.batch <= cached.version]
        if not upto:
            return cached.nonce == ""
        return upto[-1].nonce == cached.nonce

    def _rebuild(self, files: list[_File], version: int,
                 cached: TaskState | None) -> TaskState:
        state = TaskState() if cached is None else cached.cleared()
        start = 0
        for i in range(len(files) - 1, -1, -1):
            if files[i].snapshot:
                start = i
                break
        for f in files[start:]:
            self._apply(state, f)
        state.version = version
        log.debug("rebuilt task state %s at batch %d from %d files",
                  self.directory, version, len(files) - start)
        return state

    def _apply(self, state: TaskState, f: _File) -> None:
        header, chunks = self._read(f.name)
        if f.snapshot:
            if state.entries():
                raise RuntimeError(f"task state {self.directory}: a snapshot applied over state")
            state.batches_since_snapshot = 0
            state.delta_entries_since_snapshot = 0
        else:
            state.batches_since_snapshot += 1
        for store_name, changes in chunks:
            if not f.snapshot:
                state.delta_entries_since_snapshot += len(changes)
            state.store(store_name).restore(changes, fresh=f.snapshot)
        state.stream_time = state.written_stream_time = header["stream_time"]
        state.nonce = f.nonce

    # -- committing ------------------------------------------------------------------------
    def commit(self, state: TaskState, batch: int) -> dict[str, dict[Any, Any]]:
        """Persist what ``batch`` changed (or a snapshot), and return the changes per store."""
        drained = {name: _drain(s) for name, s in state.stores.items()}
        changes = {name: c for name, (c, _) in drained.items()}
        changed = sum(len(c) for c in changes.values())
        state.batches_since_snapshot += 1
        state.delta_entries_since_snapshot += changed
        snapshot = self.should_snapshot(state)
        # the listing of the checkout: between checkout and commit, only another attempt of
        # this very batch writes here, and its files are replaced below either way
        names = state.listing if state.listing is not None else self._names()
        state.listing = None
        # files of this batch from an earlier attempt, and of later batches (a run that went
        # further before its checkpoint was reset): none of them may count any more
        stale = [n for n in names if n.endswith((".delta", ".snap"))
                 and _File(n).batch >= batch]
        if snapshot or not changed:  # nothing to write from the chunks: written as they are
            for _, chunks in drained.values():
                for _ in chunks:
                    pass
            state.flush()
        if not snapshot and not changed and state.stream_time == state.written_stream_time:
            for name in stale:
                self._remove(name)
            state.version = batch
            state.committed()
            return changes
        nonce = secrets.token_hex(8)
        header = {"batch": batch, "stream_time": state.stream_time}
        if snapshot:
            name = f"{batch:012d}-{nonce}.snap"
            self._write(name, header, [(n, _whole(s)) for n, s in state.stores.items()])
        else:
            name = f"{batch:012d}-{nonce}.delta"
            self._write(name, header, [(n, chunks) for n, (_, chunks) in drained.items()])
        for old in stale:
            self._remove(old)
        if snapshot:
            self._compact(names, batch)
            state.batches_since_snapshot = 0
            state.delta_entries_since_snapshot = 0
        state.version = batch
        state.nonce = nonce
        state.written_stream_time = state.stream_time
        state.committed()
        return changes

    def write_snapshot(self, state: TaskState, batch: int) -> None:
        """Write ``state`` whole as the state after ``batch`` (an upgrade's state carried into
        a new layout); nothing else may be in this task's directory."""
        header = {"batch": batch, "stream_time": state.stream_time}
        self._write(f"{batch:012d}-{secrets.token_hex(8)}.snap", header,
                    [(n, _whole(s)) for n, s in state.stores.items()])

    @staticmethod
    def should_snapshot(state: TaskState) -> bool:
        """When the deltas since the last snapshot (each file counted as
        ``ENTRIES_PER_FILE`` entries) outweigh the state ``DELTAS_PER_STATE`` times."""
        weight = (state.delta_entries_since_snapshot
                  + ENTRIES_PER_FILE * state.batches_since_snapshot)
        return weight > max(MIN_SNAPSHOT_ENTRIES, DELTAS_PER_STATE * state.entries())

    def _compact(self, names: list[str], batch: int) -> None:
        """Delete files older than the previous snapshot: a replay of ``batch`` needs the state
        after ``batch - 1``, which the previous snapshot and the deltas after it give."""
        files = [_File(n) for n in names if n.endswith((".delta", ".snap"))]
        snaps = [f.batch for f in files if f.snapshot and f.batch < batch]
        if not snaps:
            return
        for f in files:
            if f.batch < max(snaps):
                self._remove(f.name)


_CACHE: dict[str, TaskState] = {}
_CACHE_LOCK = threading.Lock()


class FileTaskStatePersistence:
    """Task state as delta and snapshot files under ``location`` (a directory or a
    ``pyarrow.fs`` URL; ``<location>/<subtopology>/<task>/``), with each Python worker's working
    copies reused across batches when still valid.

    >>> import tempfile
    >>> files = FileTaskStatePersistence(tempfile.mkdtemp())
    >>> state = files.checkout(0, 1, -1)
    >>> state.store("counts").put("a", (1, 0))
    >>> files.commit(state, 0)
    {'counts': {'a': (1, 0)}}
    >>> files.checkin(state)
    >>> files.checkout(0, 1, 0).store("counts").get("a")
    (1, 0)

    With ``local_dir``, each worker's working copy of a task is a RocksDB database under it
    (see :mod:`streamtable.state.rocksdb`).
    """

    def __init__(self, location: str, local_dir: str | None = None) -> None:
        self.location = location
        self.storage = storage_at(location)
        # with a local directory, working copies are RocksDB databases there (state bounded by
        # the disk, kept across restarts); without, dicts in the worker's memory
        self.local_dir = local_dir

    def keeps_state(self) -> bool:
        """Whether this process keeps working copies of these tasks that hold state between
        batches (in-memory ones: a RocksDB copy is closed after its commit)."""
        mine = f"{self.location}|"
        with _CACHE_LOCK:
            return any(state.entries() for key, state in _CACHE.items() if key.startswith(mine))

    def task_store(self, subtopology: int, task_id: int) -> TaskStateStore:
        """The durable state of one task."""
        return self._store(subtopology, task_id)

    def _store(self, subtopology: int, task_id: int) -> TaskStateStore:
        return TaskStateStore(self.storage, f"{subtopology}/{task_id}")

    def checkout(self, subtopology: int, task_id: int, version: int) -> TaskState:
        """The task state after batch ``version``, from this worker's cache when valid."""
        store = self._store(subtopology, task_id)
        key = f"{self.location}|{store.directory}"
        with _CACHE_LOCK:
            cached = _CACHE.pop(key, None)
        if cached is None and self.local_dir is not None:
            from streamtable.state.rocksdb import RocksDBTaskState

            cached = RocksDBTaskState.open_slot(f"{self.local_dir}/{store.directory}")
        state = store.load(cached, version)
        state.location = key
        state.task = (subtopology, task_id)
        return state

    def commit(self, state: TaskState, batch: int) -> dict[str, dict[Any, Any]]:
        changes = self._store(*state.task).commit(state, batch)
        state.hand_over = self.local_dir is not None
        return changes

    def checkin(self, state: TaskState) -> None:
        """Keep the working copy for this worker's next checkout of the task; a copy on disk
        that a commit wrote is closed instead, for whichever worker runs the task next to open
        it up to date. A task runs on any of the Python workers, and another worker's own copy
        would be caught up from the deltas it lacks (18% of the workers' time in Nexmark q4
        at 10,000,000 events); opening a copy takes tens of milliseconds."""
        if state.hand_over:
            state.hand_over = False
            state.close()
            return
        with _CACHE_LOCK:
            _CACHE[state.location] = state
