"""The working copy of one task's state between batches: its stores and its stream time.

A :class:`TaskState` is what a :class:`~streamtable.state.base.TaskStatePersistence` checks out
and commits, and the :class:`~streamtable.state.base.StoreBackend` of the task that runs on it:
its stores record which keys changed, so that a commit persists exactly the batch's delta.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamtable.state.spec import StoreSpec
from streamtable.state.stores import InMemoryKeyValueStore, check_store_kind


@dataclass
class TaskState:
    """The working copy of one task's stores.

    >>> state = TaskState()
    >>> state.store("counts").put("a", (1, 0))
    >>> state.store("counts").drain_changes()
    {'a': (1, 0)}
    """

    version: int = -1  # the last batch reflected
    nonce: str = ""  # nonce of the last commit reflected ("" for the empty initial state)
    stream_time: int = -1
    stores: dict[str, InMemoryKeyValueStore] = field(default_factory=dict)
    written_stream_time: int = -1  # stream time in the last commit written or read
    batches_since_snapshot: int = 0
    delta_entries_since_snapshot: int = 0
    location: str = ""  # where the persistence keeps this task's state
    task: tuple[int, int] = (-1, -1)  # (sub-topology, task) when checked out
    listing: list[str] | None = None  # the persistence's file names seen at checkout
    hand_over: bool = False  # committed by this checkout: closed at checkin if on disk

    def store(self, name: str) -> InMemoryKeyValueStore:
        s = self.stores.get(name)
        if s is None:
            s = self.stores[name] = InMemoryKeyValueStore(name, track_changes=True)
        return s

    def create(self, spec: StoreSpec, task_id: int) -> InMemoryKeyValueStore:
        """The :class:`~streamtable.state.base.StoreBackend` of the task running on this
        state."""
        check_store_kind(spec)
        return self.store(spec.name)

    def entries(self) -> int:
        return sum(len(s) for s in self.stores.values())

    def cleared(self) -> TaskState:
        """An empty state to rebuild into (a working copy on disk empties itself)."""
        return TaskState()

    def flush(self, version: int | None = None, nonce: str | None = None) -> None:
        """Write the changes drained from the stores to the working copy (in memory they are
        there already)."""

    def committed(self) -> None:
        """The working copy now reflects ``version`` / ``nonce``: record it with the copy."""

    def close(self) -> None:
        """Release what the working copy holds open."""
