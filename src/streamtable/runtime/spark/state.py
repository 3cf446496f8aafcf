"""Exactly-once task state for the Spark runtime, in files (a
:class:`~streamtable.engine.ports.TaskStatePersistence`).

Each task (sub-topology, partition) keeps its stores as a chain of files under the state root:
``<root>/<subtopology>/<task>/<batch>.delta`` holds the keys a batch changed, and every few batches
a ``<batch>.snap`` holds the whole state; older files are deleted (compaction). Processing batch
``b`` always starts from the state after batch ``b - 1``: Spark replays an unfinished batch with
the same input after a crash, so the replay recomputes and overwrites ``b``'s delta, and nothing is
applied twice.

A Python worker keeps a working copy of the tasks it ran, tagged with the batch and the nonce of
the last file it reflects. Another worker may have run the task since, so the copy is brought up
to date from the newer deltas; if it is ahead of the wanted version or its last file was rewritten
by a retried attempt, it is rebuilt from the latest snapshot.
"""

from __future__ import annotations

import logging
import os
import pickle
import secrets
import threading
from typing import Any

from streamtable.engine.task_state import TaskState

log = logging.getLogger(__name__)

SNAPSHOT_EVERY = 20  # batches between snapshots (bounded by size, see should_snapshot)


def _file_batch(name: str) -> int:
    return int(name.split(".", 1)[0])


class TaskStateStore:
    """Durable, versioned state of one task under ``directory``."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)

    def _files(self) -> list[tuple[int, str]]:
        out = []
        for name in os.listdir(self.directory):
            if name.endswith((".delta", ".snap")):
                out.append((_file_batch(name), name))
        out.sort()
        return out

    def _read_header(self, name: str) -> dict[str, Any]:
        with open(os.path.join(self.directory, name), "rb") as f:
            return pickle.load(f)

    def _read(self, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
        with open(os.path.join(self.directory, name), "rb") as f:
            header = pickle.load(f)
            body = pickle.load(f)
        return header, body

    def _write(self, name: str, header: dict[str, Any], body: dict[str, Any]) -> None:
        path = os.path.join(self.directory, name)
        tmp = f"{path}.tmp-{secrets.token_hex(4)}"
        with open(tmp, "wb") as f:
            pickle.dump(header, f, protocol=pickle.HIGHEST_PROTOCOL)
            pickle.dump(body, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    # -- loading ---------------------------------------------------------------------------
    def load(self, cached: TaskState | None, version: int) -> TaskState:
        """The state after batch ``version``, reusing ``cached`` when it is a valid prefix."""
        files = [(b, n) for b, n in self._files() if b <= version]
        if cached is not None and cached.version <= version and self._valid(cached, files):
            for b, name in files:
                if b > cached.version:
                    self._apply(cached, name)
            cached.version = version
            return cached
        return self._rebuild(files, version)

    def _valid(self, cached: TaskState, files: list[tuple[int, str]]) -> bool:
        upto = [(b, n) for b, n in files if b <= cached.version]
        if not upto:
            return cached.nonce == ""
        if cached.nonce == "":
            return False
        return self._read_header(upto[-1][1]).get("nonce") == cached.nonce

    def _rebuild(self, files: list[tuple[int, str]], version: int) -> TaskState:
        state = TaskState()
        start = 0
        for i in range(len(files) - 1, -1, -1):
            if files[i][1].endswith(".snap"):
                start = i
                break
        for _b, name in files[start:]:
            self._apply(state, name)
        state.version = version
        log.debug("rebuilt task state %s at batch %d from %d files",
                  self.directory, version, len(files) - start)
        return state

    def _apply(self, state: TaskState, name: str) -> None:
        header, body = self._read(name)
        if name.endswith(".snap"):
            state.stores = {}
            state.batches_since_snapshot = 0
            state.delta_entries_since_snapshot = 0
        else:
            state.batches_since_snapshot += 1
            state.delta_entries_since_snapshot += sum(len(c) for c in body["stores"].values())
        for store_name, changes in body["stores"].items():
            state.store(store_name).restore(changes)
        state.stream_time = state.written_stream_time = header["stream_time"]
        state.nonce = header["nonce"]

    # -- committing ------------------------------------------------------------------------
    def commit(self, state: TaskState, batch: int) -> dict[str, dict[Any, Any]]:
        """Persist what ``batch`` changed (or a snapshot), and return the changes per store."""
        changes = {name: s.drain_changes() for name, s in state.stores.items()}
        changed = sum(len(c) for c in changes.values())
        state.batches_since_snapshot += 1
        state.delta_entries_since_snapshot += changed
        snapshot = self.should_snapshot(state)
        delta_name, snap_name = f"{batch:012d}.delta", f"{batch:012d}.snap"
        if not snapshot and not changed and state.stream_time == state.written_stream_time:
            # nothing to keep; a file an earlier attempt of this batch left must not count
            self._remove(delta_name)
            self._remove(snap_name)
            state.version = batch
            return changes
        nonce = secrets.token_hex(8)
        header = {"batch": batch, "nonce": nonce, "stream_time": state.stream_time}
        if snapshot:
            full = {name: dict(s.items()) for name, s in state.stores.items()}
            self._write(snap_name, header, {"stores": full})
            self._remove(delta_name)
            self._compact(batch)
            state.batches_since_snapshot = 0
            state.delta_entries_since_snapshot = 0
        else:
            self._write(delta_name, header, {"stores": changes})
            self._remove(snap_name)
        state.version = batch
        state.nonce = nonce
        state.written_stream_time = state.stream_time
        return changes

    def _remove(self, name: str) -> None:
        try:
            os.remove(os.path.join(self.directory, name))
        except FileNotFoundError:
            pass

    @staticmethod
    def should_snapshot(state: TaskState) -> bool:
        if state.batches_since_snapshot >= SNAPSHOT_EVERY:
            return True
        # the deltas since the last snapshot outweigh the state: compact them
        return state.delta_entries_since_snapshot > max(10_000, 2 * state.entries())

    def _compact(self, batch: int) -> None:
        """Delete files older than the previous snapshot: a replay of ``batch`` needs the state
        after ``batch - 1``, which the previous snapshot and the deltas after it give."""
        files = self._files()
        snaps = [b for b, n in files if n.endswith(".snap") and b < batch]
        if not snaps:
            return
        for b, name in files:
            if b < snaps[-1]:
                self._remove(name)


_CACHE: dict[str, TaskState] = {}
_CACHE_LOCK = threading.Lock()


class FileTaskStatePersistence:
    """Task state as delta and snapshot files under ``root`` (``<root>/<subtopology>/<task>``),
    with each Python worker's working copies reused across batches when still valid.

    >>> import tempfile
    >>> files = FileTaskStatePersistence(tempfile.mkdtemp())
    >>> state = files.checkout(0, 1, -1)
    >>> state.store("counts").put("a", (1, 0))
    >>> files.commit(state, 0)
    {'counts': {'a': (1, 0)}}
    >>> files.checkin(state)
    >>> files.checkout(0, 1, 0).store("counts").get("a")
    (1, 0)
    """

    def __init__(self, root: str) -> None:
        self.root = root

    def _directory(self, subtopology: int, task_id: int) -> str:
        return f"{self.root}/{subtopology}/{task_id}"

    def checkout(self, subtopology: int, task_id: int, version: int) -> TaskState:
        """The task state after batch ``version``, from this worker's cache when valid."""
        directory = self._directory(subtopology, task_id)
        with _CACHE_LOCK:
            cached = _CACHE.pop(directory, None)
        state = TaskStateStore(directory).load(cached, version)
        state.location = directory
        return state

    def commit(self, state: TaskState, batch: int) -> dict[str, dict[Any, Any]]:
        return TaskStateStore(state.location).commit(state, batch)

    def checkin(self, state: TaskState) -> None:
        with _CACHE_LOCK:
            _CACHE[state.location] = state
