"""The engine's ports: the protocols every host (the test driver, the Spark runtime) plugs into.

A :class:`~streamtable.engine.task.Task` runs one sub-topology over one partition's records and
knows nothing of where they come from or go. What it needs from its host is named here, each
as one protocol; adding a backend means implementing one of them in one new file. The ports of
the engine itself are defined here; those of state, durable storage and serving are defined
beside their implementations (``state/base.py``, ``storage/base.py``, ``serving/base.py``), so
those packages never import the engine, and are named here too:

``RecordCollector``
    Where the task's processors send serialized records (sinks, dead letters). The test
    driver appends them to its in-memory topics; a Spark stage gathers them into Arrow rows.
``StoreBackend`` (``state/base.py``)
    Creates the stores of a task for its :class:`~streamtable.topology.graph.StoreSpec`
    (``spec.kind`` says which kind of store is wanted). In memory: ``state.stores``; a batch
    host's stores are those of the task state it checked out.
``TaskStatePersistence`` (``state/base.py``)
    Durable, versioned task state: ``checkout`` the state after batch ``b - 1``, ``commit``
    what batch ``b`` changed (a replay of ``b`` overwrites its own commit: exactly once),
    ``checkin`` the working copy for the next batch. Files: ``state/persistence.py``.
``ServingStore`` (``serving/base.py``)
    The queryable stores as users read them (``app.store(name)``, the HTTP API): each batch's
    changes applied once per batch id. SQLite: ``serving/sqlite.py``. Rows cross processes in
    the encoding of ``serving/codec.py``.
``OutputWriter``
    Writes a batch's records for external topics exactly once per batch id. Kafka:
    ``kafka/output.py``.
``DurableStorage`` (``storage/base.py``)
    Named byte objects every task of the application can reach, written atomically: where task
    state and the sink's batch markers live. A directory: ``storage/local.py``; any
    ``pyarrow.fs`` URL (S3, GCS, HDFS): ``storage/arrow.py``; memory (the test driver's
    batch mode): ``storage/memory.py``.
``RecordOrdering``
    The order a task processes one batch's records in. Kafka Streams' rules (each partition in
    offset order, partitions merged by timestamp, ...): ``engine/ordering.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from streamtable.serving.base import QueryableStore, ServingStore, StoreChange
from streamtable.state.base import KeyValueStore, StoreBackend, TaskStatePersistence
from streamtable.storage.base import DurableStorage

if TYPE_CHECKING:
    from streamtable.records import Headers, OutputRecord, RawRecord

__all__ = [
    "DurableStorage",
    "KeyValueStore",
    "OutputWriter",
    "QueryableStore",
    "RecordCollector",
    "RecordOrdering",
    "ServingStore",
    "StoreBackend",
    "StoreChange",
    "TaskStatePersistence",
]


class RecordCollector(Protocol):
    """Receives every serialized record a task sends to a topic (``partition`` None: the
    key's default partition).

    A collector may also have ``bind(task)``, called once by the task it collects for: it may
    then read ``task.current_raw`` (the input record being processed) to keep the origin of
    the records it carries for repartition topics (``RawRecord.origin``, see
    :func:`~streamtable.engine.task.origin_of`); and ``find_origin(raw)``, the origin of an
    input record of a repartition topic that carries none.
    """

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
             headers: Headers, partition: int | None) -> None: ...


class OutputWriter(Protocol):
    """Writes a batch's records for external topics (:data:`OutputRecord` tuples), exactly once
    per batch id: a replayed batch writes nothing twice.

    A writer with a true ``distributed`` attribute is picklable and is called by each task
    where it runs (``writer`` = the task), so nothing is gathered on the driver; any other is
    called once per batch on the driver with all the batch's records."""

    def write(self, batch_id: int, records: list[OutputRecord], writer: str = "0") -> None:
        """``writer`` names one of several writers of the same batch (e.g. a task): each
        replays its own records."""
        ...


class RecordOrdering(Protocol):
    """The order in which a task processes the records of one batch."""

    def order(self, records: Sequence[RawRecord]) -> Iterable[RawRecord]: ...
