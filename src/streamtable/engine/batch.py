"""The batch host: one task of one sub-topology over its records of one micro-batch.

Every batch host runs a task's batch with :func:`run_task_batch`: the Spark stage (inside a
``mapInArrow`` task, see ``runtime/spark/stage.py``) and the test driver's batch mode, which
runs a task per partition group as the runtime does. The function checks out the task's state
as of the previous batch from a :class:`~streamtable.state.base.TaskStatePersistence`, builds
the :class:`~streamtable.engine.task.Task` on it (with the global stores as of this batch),
processes the records in Kafka Streams' partition-group order, fires the wall-clock
punctuations due at the batch's time, commits the record caches and the state, and checks the
state back in. A replay of the same batch starts from the same state, so it redoes exactly what
the first attempt did.

>>> from streamtable import StreamsBuilder
>>> from streamtable.config import StreamsConfig
>>> from streamtable.engine.wiring import wire
>>> from streamtable.records import RawRecord
>>> from streamtable.state.persistence import FileTaskStatePersistence
>>> b = StreamsBuilder()
>>> b.stream("in").group_by_key().count(materialized="counts").to_stream().to("out")
>>> topology, config = b.build(), StreamsConfig({"application.id": "doc"})
>>> sent = []
>>> class Collector:
...     def send(self, topic, key, value, timestamp, headers, partition):
...         sent.append((topic, key, value))
>>> records = [RawRecord("in", 0, o, 5, b'"k"', b'"v"') for o in range(3)]
>>> result = run_task_batch(
...     topology, wire(topology, config), 0, 0, 0, config=config,
...     persistence=FileTaskStatePersistence("memory://batch-doc"), collector=Collector(),
...     records=lambda ordering: ordering.order(records))
>>> sent, result.received, result.changes["counts"]
([('out', b'"k"', b'3')], {'in': 3}, {'k': (3, 5)})
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from streamtable.config import StreamsConfig
from streamtable.engine.ordering import PartitionGroupOrdering
from streamtable.engine.ports import RecordCollector
from streamtable.engine.task import Task
from streamtable.engine.wiring import Wiring, state_version
from streamtable.records import RawRecord, RecordRun
from streamtable.state.base import TaskStatePersistence
from streamtable.topology.graph import SubTopology, Topology

Records = Callable[[PartitionGroupOrdering], Iterable["RawRecord | RecordRun"]]
"""Gives a task's records of the batch in the order it is handed (records, or runs of one
partition's records), e.g. ``lambda ordering: ordering.merge(runs)``."""


@dataclass
class BatchResult:
    """What one task did in one batch: the records it received per topic, the changes of its
    stores as committed (per store: key -> ``(value, timestamp)``, or None for a deletion),
    what it dropped by reason and how many records it sent to the dead-letter topic."""

    received: dict[str, int]
    changes: dict[str, dict[Any, Any]]
    dropped: Counter[str]
    dead_lettered: int


def run_task_batch(topology: Topology, wiring: Wiring, subtopology: int, task_id: int,
                   batch_id: int, *, config: StreamsConfig, persistence: TaskStatePersistence,
                   collector: RecordCollector, records: Records,
                   topic_partitions: Mapping[str, int] | None = None,
                   wall_clock_ms: int = 0, started_ms: int | None = None,
                   round_: int = 0) -> BatchResult:
    """Run task ``task_id`` of ``subtopology`` over its records of batch ``batch_id``, from
    the state after batch ``batch_id - 1``; what it sends goes to ``collector``. In a topology
    with cycles, ``round_`` is the round of the batch (see
    :func:`~streamtable.engine.wiring.stage_groups`): it starts from the state the round before
    left.

    ``wall_clock_ms`` is the batch's time (wall-clock punctuations due then fire after the
    records). The processors are initialised at ``started_ms`` when given (the application's
    start: a wall-clock punctuation scheduled for the first time is due one interval after
    it), else at the batch's time."""
    # The stores hold many long-lived objects and the record path allocates many short-lived
    # ones without cycles: the cyclic collector would rescan the stores again and again.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(topology, wiring, topology.subtopology(subtopology), task_id, batch_id,
                    config, persistence, collector, records, topic_partitions, wall_clock_ms,
                    started_ms, round_)
    finally:
        if gc_was_enabled:
            gc.enable()


def _run(topology: Topology, wiring: Wiring, sub: SubTopology, task_id: int, batch_id: int,
         config: StreamsConfig, persistence: TaskStatePersistence, collector: RecordCollector,
         records: Records, topic_partitions: Mapping[str, int] | None,
         wall_clock_ms: int, started_ms: int | None, round_: int) -> BatchResult:
    version = state_version(wiring, batch_id, round_)
    state = persistence.checkout(sub.id, task_id, version - 1)
    # global tables as of this batch: their task ran before this one
    keepers = global_keepers(topology, sub)
    global_states = [persistence.checkout(gid, 0, state_version(wiring, batch_id))
                     for gid in keepers]
    global_stores = {name: g.create(topology.stores[name], 0)
                     for gid, g in zip(keepers, global_states, strict=True)
                     for name in topology.subtopology(gid).stores}
    # the record caches hold at most cache.max.bytes.buffering, as in record mode: a full
    # cache forwards its eldest change, so a batch's memory does not grow with its size
    task = Task(topology, sub, task_id, config, state, collector, dict(topic_partitions or {}),
                wiring=wiring, global_stores=global_stores,
                wall_clock_ms=wall_clock_ms if started_ms is None else started_ms)
    task.wall_clock_ms = wall_clock_ms
    task.stream_time = state.stream_time
    received: dict[str, int] = {}
    for item in records(PartitionGroupOrdering(wiring.topic_rank, wiring.first_topics,
                                                 wiring.table_topics)):
        if isinstance(item, RecordRun):
            received[item.topic] = received.get(item.topic, 0) + len(item)
            task.process_run(item)
        else:
            received[item.topic] = received.get(item.topic, 0) + 1
            task.process(item)
    task.punctuate_wall_clock()
    task.commit()
    task.close()  # a task lives for one batch: its processors' init ran at its start
    state.stream_time = task.stream_time
    changes = persistence.commit(state, version)
    persistence.checkin(state)
    for g in global_states:  # read only: handed back as checked out
        persistence.checkin(g)
    return BatchResult(received, changes, task.dropped, task.dead_lettered)


def global_keepers(topology: Topology, sub: SubTopology) -> list[int]:
    """Ids of the global sub-topologies keeping the global stores ``sub`` reads."""
    keepers = topology.global_stores
    out: list[int] = []
    for name in topology.global_stores_of(sub):
        if keepers[name].id not in out:
            out.append(keepers[name].id)
    return out
