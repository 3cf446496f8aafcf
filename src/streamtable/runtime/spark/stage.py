"""One sub-topology over one batch, inside a Spark task (``mapInArrow``).

The Spark partition index is the task id. The function reads the task's records of the batch,
restores the task's state as of the previous batch, runs the same :class:`Task` the test driver
runs, commits the state and returns every record the task produced plus the changes of its
queryable stores.
"""

from __future__ import annotations

import gc
import heapq
import logging
import sys
from collections.abc import Iterator
from itertools import chain, groupby
from typing import Any

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from streamtable.config import StreamsConfig
from streamtable.processors.api import Headers, RawRecord
from streamtable.processors.task import Task
from streamtable.runtime.spark.state import checkin, checkout
from streamtable.serving.sqlite import encode_key, encode_value
from streamtable.topology.graph import Topology

log = logging.getLogger(__name__)

KIND_INTERNAL = 0  # to a repartition topic: input of a later stage of the same batch
KIND_EXTERNAL = 1  # to a Kafka topic
KIND_STORE = 2  # a change of a queryable store, for the serving store

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
RECORD_FIELDS = [
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", pa.int64()),
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("headers", HEADERS_TYPE),
]
RECORD_DDL = (
    "topic string, partition int, offset bigint, timestamp bigint, key binary, value binary, "
    "headers array<struct<key:string,value:binary>>"
)
# route: for a record to a repartition topic, the task that must receive it when its sink chose
# one (co-partitioning with an external topic); otherwise the key's hash decides.
OUTPUT_SCHEMA = pa.schema([("kind", pa.int8())] + RECORD_FIELDS + [("route", pa.int32())])
OUTPUT_DDL = (
    "kind tinyint, topic string, partition int, offset bigint, timestamp bigint, key binary, "
    "value binary, headers array<struct<key:string,value:binary>>, route int"
)

_TOPOLOGIES: dict[int, Topology] = {}


def _topology(blob: bytes) -> Topology:
    key = hash(blob)
    topo = _TOPOLOGIES.get(key)
    if topo is None:
        from pyspark import cloudpickle

        topo = _TOPOLOGIES[key] = cloudpickle.loads(blob)
    return topo


class _Collector:
    """Gathers a task's output rows."""

    def __init__(self, internal_topics: set[str], task_id: int) -> None:
        self.internal = internal_topics
        self.task_id = task_id
        # (kind, topic, partition, offset, timestamp, key, value, headers, route)
        self.rows: list[tuple[Any, ...]] = []

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
             headers: Headers, partition: int | None) -> None:
        hs = [{"key": k, "value": v} for k, v in headers] if headers else None
        if topic in self.internal:
            self.rows.append((KIND_INTERNAL, topic, self.task_id, len(self.rows), timestamp,
                              key, value, hs, partition))
        else:
            self.rows.append((KIND_EXTERNAL, topic, partition, len(self.rows), timestamp,
                              key, value, hs, None))

    def add_store_changes(self, store: str, changes: dict[Any, Any]) -> None:
        rows = self.rows
        for k, v in changes.items():
            rows.append((KIND_STORE, store, self.task_id, len(rows),
                         -1 if v is None else v[1], encode_key(k),
                         None if v is None else encode_value(v), None, None))

    def to_batch(self) -> pa.RecordBatch:
        if not self.rows:
            return pa.RecordBatch.from_pylist([], schema=OUTPUT_SCHEMA)
        columns = list(zip(*self.rows, strict=True))
        return pa.RecordBatch.from_arrays(
            [pa.array(col, type=field.type) for col, field in zip(columns, OUTPUT_SCHEMA,
                                                                  strict=True)],
            schema=OUTPUT_SCHEMA,
        )


def ordered_records(table: pa.Table, topic_rank: dict[str, int] | None = None,
                    first_topics: frozenset[str] = frozenset()) -> Iterator[RawRecord]:
    """The task's records in Kafka Streams' order: each (topic, partition) in offset order, and
    across them always the one whose next record has the smallest timestamp; at equal
    timestamps, records of topics written by earlier stages first (``topic_rank``), as the test
    driver, which follows each record through the whole topology, would see them.

    Records of ``first_topics`` all come before the others: the left values of a foreign-key
    join must be known before the answers about them, which a cache flush upstream can reorder.
    """
    if table.num_rows == 0:
        return iter(())
    table = table.sort_by([("topic", "ascending"), ("partition", "ascending"),
                           ("offset", "ascending")])
    topics = table.column("topic").to_pylist()
    partitions = table.column("partition").to_pylist()
    offsets = table.column("offset").to_pylist()
    timestamps = table.column("timestamp").to_pylist()
    keys = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    hcol = table.column("headers")
    headers: list[Any] = (
        hcol.to_pylist() if hcol.null_count < len(hcol) else [None] * table.num_rows
    )
    records = [
        RawRecord(t, p, o, ts, k, v,
                  tuple((h["key"], h["value"]) for h in hs) if hs else ())
        for t, p, o, ts, k, v, hs in zip(
            topics, partitions, offsets, timestamps, keys, values, headers, strict=True
        )
    ]
    runs = [list(g) for _, g in groupby(records, key=lambda r: (r.topic, r.partition))]
    if len(runs) == 1:
        return iter(runs[0])
    rank = topic_rank or {}
    runs.sort(key=lambda run: rank.get(run[0].topic, -1))
    first = [run for run in runs if run[0].topic in first_topics]
    rest = [run for run in runs if run[0].topic not in first_topics]
    if first and rest:
        return chain(heapq.merge(*first, key=_timestamp), heapq.merge(*rest, key=_timestamp))
    return heapq.merge(*runs, key=_timestamp)


def _timestamp(record: RawRecord) -> int:
    return record.timestamp


class StageRunner:
    """The ``mapInArrow`` function of one sub-topology for one batch."""

    def __init__(self, topology_blob: bytes, subtopology: int, batch_id: int, state_root: str,
                 config: dict[str, Any], internal_topics: set[str],
                 queryable_stores: list[str], topic_partitions: dict[str, int],
                 topic_rank: dict[str, int], first_topics: frozenset[str]) -> None:
        self.topology_blob = topology_blob
        self.subtopology = subtopology
        self.batch_id = batch_id
        self.state_root = state_root
        self.config = config
        self.internal_topics = internal_topics
        self.queryable_stores = queryable_stores
        self.topic_partitions = topic_partitions
        self.topic_rank = topic_rank
        self.first_topics = first_topics

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # The task is the records' _route, not Spark's partition id: a stage pipelined into a
        # later union numbers its partitions differently.
        received = [b for b in batches if b.num_rows]
        if not received:
            return  # nothing for this task in this batch: its state stays as it is
        table = pa.Table.from_batches(received)
        routes = table.column("_route")
        task_id = routes[0].as_py()
        if pa.compute.min(routes).as_py() != task_id or pa.compute.max(routes).as_py() != task_id:
            raise RuntimeError(f"stage {self.subtopology}: a Spark partition holds several tasks")
        yield self.run(task_id, table.drop_columns(["_route"]).cast(_input_schema()))

    def run(self, task_id: int, table: pa.Table) -> pa.RecordBatch:
        # The stores hold many long-lived objects and the record path allocates many short-lived
        # ones without cycles: the cyclic collector would rescan the stores again and again.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run(task_id, table)
        finally:
            if gc_was_enabled:
                gc.enable()

    def _run(self, task_id: int, table: pa.Table) -> pa.RecordBatch:
        topology = _topology(self.topology_blob)
        sub = topology.subtopologies[self.subtopology]
        directory = f"{self.state_root}/{self.subtopology}/{task_id}"
        state_store, state = checkout(directory, self.batch_id - 1)
        collector = _Collector(self.internal_topics, task_id)
        task = Task(topology, sub, task_id, StreamsConfig(self.config),
                    lambda spec, _p: state.store(spec.name), collector, self.topic_partitions,
                    # with caching, the last change per key per micro-batch: never evict early
                    cache_max_entries=sys.maxsize)
        task.stream_time = state.stream_time
        for raw in ordered_records(table, self.topic_rank, self.first_topics):
            task.process(raw)
        task.commit()
        state.stream_time = task.stream_time
        changes = state_store.commit(state, self.batch_id)
        checkin(directory, state)
        for name in self.queryable_stores:
            if changes.get(name):
                collector.add_store_changes(name, changes[name])
        return collector.to_batch()


def _input_schema() -> pa.Schema:
    return pa.schema(RECORD_FIELDS)
