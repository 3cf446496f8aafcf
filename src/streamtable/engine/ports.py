"""The engine's ports: the protocols every host (the test driver, the Spark runtime) plugs into.

A :class:`~streamtable.engine.task.Task` runs one sub-topology over one partition's records and
knows nothing of where they come from or go. What it needs from its host is named here, each
as one protocol; adding a backend means implementing one of them in one new file:

``RecordCollector``
    Where the task's processors send serialized records (sinks, dead letters). The test
    driver appends them to its in-memory topics; a Spark stage gathers them into Arrow rows.
``StoreBackend``
    Creates the stores of a task for its :class:`~streamtable.topology.graph.StoreSpec`
    (``spec.kind`` says which kind of store is wanted). In memory: ``state.stores``; the Spark
    runtime's stores are those of the task state it checked out.
``TaskStatePersistence``
    Durable, versioned task state: ``checkout`` the state after batch ``b - 1``, ``commit``
    what batch ``b`` changed (a replay of ``b`` overwrites its own commit: exactly once),
    ``checkin`` the working copy for the next batch. Files: ``runtime/spark/state.py``.
``ServingStore``
    The queryable stores as users read them (``app.store(name)``, the HTTP API): each batch's
    changes applied once per batch id. SQLite: ``serving/sqlite.py``. Rows cross processes in
    the encoding of ``serving/codec.py``.
``OutputWriter``
    Writes a batch's records for external topics exactly once per batch id. Kafka:
    ``kafka/output.py``.
``DurableStorage``
    Named byte objects every task of the application can reach, written atomically: where task
    state and the sink's batch markers live. A directory: ``storage/local.py``; any
    ``pyarrow.fs`` URL (S3, GCS, HDFS): ``storage/arrow.py``.
``RecordOrdering``
    The order a task processes one batch's records in. Kafka Streams' rules (each partition in
    offset order, partitions merged by timestamp, ...): ``engine/ordering.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from streamtable.engine.task_state import TaskState
    from streamtable.processors.api import Headers, RawRecord
    from streamtable.topology.graph import StoreSpec


class RecordCollector(Protocol):
    """Receives every serialized record a task sends to a topic (``partition`` None: the
    key's default partition)."""

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
             headers: Headers, partition: int | None) -> None: ...


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


class StoreBackend(Protocol):
    """Creates the store described by ``spec`` for task ``task_id``."""

    def create(self, spec: StoreSpec, task_id: int) -> KeyValueStore: ...


class TaskStatePersistence(Protocol):
    """Durable, versioned state of the tasks of one application.

    ``checkout(subtopology, task_id, version)`` returns the state after batch ``version``;
    ``commit(state, batch)`` makes what ``batch`` changed durable and returns those changes
    per store (``None`` = deleted); ``checkin(state)`` hands the working copy back for reuse.
    Implementations must be picklable: a Spark stage ships them to its executors.
    """

    def checkout(self, subtopology: int, task_id: int, version: int) -> TaskState: ...

    def commit(self, state: TaskState, batch: int) -> dict[str, dict[Any, Any]]: ...

    def checkin(self, state: TaskState) -> None: ...


class QueryableStore(Protocol):
    """The read-only view of a queryable store, as Kafka Streams' ``ReadOnlyKeyValueStore``."""

    name: str

    def get(self, key: Any) -> Any: ...

    def get_with_timestamp(self, key: Any) -> tuple[Any, int] | None: ...

    def all(self) -> Iterator[tuple[Any, Any]]: ...

    def range(self, from_key: Any = None, to_key: Any = None) -> Iterator[tuple[Any, Any]]: ...

    def prefix_scan(self, prefix: str | bytes) -> Iterator[tuple[Any, Any]]: ...

    def keys_of_task(self, task: int) -> list[Any]: ...

    def approximate_num_entries(self) -> int: ...

    def to_dict(self) -> dict[Any, Any]: ...

    def __len__(self) -> int: ...


StoreChange = tuple[str, bytes, "bytes | None", int]
"""``(store, encoded key, encoded (value, timestamp) or None for a deletion, task)``."""


class ServingStore(Protocol):
    """All queryable stores of one application, updated once per batch id."""

    def apply(self, batch_id: int, changes: Iterable[StoreChange]) -> bool:
        """Apply a batch's changes unless a batch id ≥ ``batch_id`` was applied before
        (then return False and change nothing)."""
        ...

    def last_batch(self) -> int: ...

    def view(self, store: str, kind: str = "key-value") -> QueryableStore:
        """The query view of ``store``: a ``window`` or ``session`` store answers Kafka
        Streams' window or session queries too."""
        ...

    def stores(self) -> list[str]: ...

    def reset(self) -> None: ...


class OutputWriter(Protocol):
    """Writes a batch's records for external topics (dicts with topic, key, value, timestamp,
    partition, headers), exactly once per batch id: a replayed batch writes nothing twice.

    A writer with a true ``distributed`` attribute is picklable and is called by each task
    where it runs (``writer`` = the task), so nothing is gathered on the driver; any other is
    called once per batch on the driver with all the batch's records."""

    def write(self, batch_id: int, records: list[dict[str, Any]], writer: str = "0") -> None:
        """``writer`` names one of several writers of the same batch (e.g. a task): each
        replays its own records."""
        ...


class DurableStorage(Protocol):
    """Byte objects under one location, named by ``/``-separated relative paths. ``write``
    is atomic (a reader sees the whole old object or the whole new one) and durable when it
    returns; ``list(directory)`` gives the names of the objects directly in it, sorted.
    Implementations must be picklable: executors use them."""

    location: str

    def read(self, name: str) -> bytes: ...

    def write(self, name: str, data: bytes | Iterable[bytes]) -> None:
        """Write the object whole (``data`` may come in parts)."""
        ...

    def delete(self, name: str) -> None: ...

    def exists(self, name: str) -> bool: ...

    def list(self, directory: str) -> list[str]: ...

    def clear(self) -> None:
        """Delete everything under the location."""
        ...


class RecordOrdering(Protocol):
    """The order in which a task processes the records of one batch."""

    def order(self, records: Sequence[RawRecord]) -> Iterable[RawRecord]: ...
