"""The protocols of state: the stores tasks keep, the backend that creates them, and the
durable, versioned persistence of a task's stores between batches.

A store backend is one new file implementing :class:`StoreBackend` (in memory:
``state/stores.py``; a checked-out :class:`~streamtable.state.task_state.TaskState` is the
backend of the task that runs on it). A persistence is one new file implementing
:class:`TaskStatePersistence` (delta and snapshot files on durable storage:
``state/persistence.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from streamtable.state.spec import StoreSpec
    from streamtable.state.task_state import TaskState


class KeyValueStore(Protocol):
    """A task's key-value store. Values are ``(value, timestamp)`` pairs."""

    name: str

    def get(self, key: Any) -> Any: ...

    def put(self, key: Any, value: Any) -> None: ...

    def delete(self, key: Any) -> Any: ...

    def items(self) -> Iterator[tuple[Any, Any]]: ...

    def keys_with_first(self, first: Any) -> list[Any]:
        """Tuple keys whose first element is ``first``, in key order."""
        ...

    def __len__(self) -> int: ...


class RangeKeyValueStore(KeyValueStore, Protocol):
    """A store that reads tuple keys ``(first, *ints)`` by range of their 64-bit int elements
    from where it keeps them (RocksDB: one range of its sorted keys). A join's window store
    on it is read through these, without an index of the store in the worker's memory.
    """

    def range_with_first(self, first: Any, low: tuple[int, ...],
                         high: tuple[int, ...]) -> list[tuple[Any, Any]]:
        """``(key, value)`` of the keys ``(first, *rest)`` with ``low <= rest <= high``, in
        key order."""
        ...

    def insert(self, key: Any, value: Any) -> None:
        """Put ``key``, which the caller knows the store does not hold (a join window
        store's keys carry a sequence number of their own): no read of the store."""
        ...

    def delete_with_second_up_to(self, up_to: int) -> int:
        """Delete the keys ``(first, second, *ints)`` with ``second <= up_to``; how many. The
        store's changes record it as one entry,
        :data:`~streamtable.state.stores.EXPIRED_UP_TO`, which every store's ``restore``
        applies."""
        ...


class StoreBackend(Protocol):
    """Creates the store described by ``spec`` for task ``task_id``."""

    def create(self, spec: StoreSpec, task_id: int) -> KeyValueStore: ...


class TaskStatePersistence(Protocol):
    """Durable, versioned state of the tasks of one application.

    ``checkout(subtopology, task_id, version)`` returns the state after batch ``version``;
    ``commit(state, batch)`` makes what ``batch`` changed durable and returns those changes
    per store (``None`` = deleted); ``checkin(state)`` hands the working copy back for reuse;
    ``keeps_state()`` says whether this process keeps working copies with state between
    batches (a worker that does is not replaced to free memory). Implementations must be
    picklable: a Spark stage ships them to its executors.
    """

    def checkout(self, subtopology: int, task_id: int, version: int) -> TaskState: ...

    def commit(self, state: TaskState, batch: int) -> dict[str, dict[Any, Any]]: ...

    def checkin(self, state: TaskState) -> None: ...

    def keeps_state(self) -> bool: ...
