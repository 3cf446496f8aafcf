"""Benchmark-only runner: a streamtable topology on Spark's ``transformWithStateInPandas``.

The candidate the design set against streamtable's own runtime (``mapInArrow`` stages + its own
versioned state files): each sub-topology is a ``transformWithStateInPandas`` operator grouped by
TASK (a routing label that puts task ``t`` on Spark partition ``t``, as ``plan.routing_labels``
does for the real runtime), and one handler call runs the whole sub-topology over that task's
records of the micro-batch. The per-task code is streamtable's own ``StageRunner.run`` (record
order, :class:`Task` and its processors, store changes, output rows) with only its task-state
persistence port plugged with Spark's state instead of files, so both runtimes do the same work
per task.

A task's state lives in Spark's state store (RocksDB provider), keyed by the task's label:

* ``log`` (ListState of ``(snapshot, blob)``): one pickled delta per batch that changed something,
  after a snapshot entry; when the deltas outweigh the state (the rule of
  ``state.TaskStateStore.should_snapshot``) the list is replaced by one snapshot entry;
* ``meta`` (ValueState): the version token (a fresh nonce per commit), stream time and the
  compaction counters.

A Python worker keeps a working copy (``state.task_state.TaskState``) per (stage, task), tagged
with the token of the commit it reflects. It is reused when the token in Spark's state equals it
and rebuilt from ``log`` otherwise (another worker ran the task, or Spark replays a batch: the
state store then rolls back to the previous version, whose token differs from the one the first
attempt committed).

The two stages are chained in ONE streaming query: stage 0's output is re-keyed by task of
stage 1. Stage 0's non-internal rows (changes of queryable stores) pass through stage 1 unchanged,
because a streaming DataFrame used twice would run its stateful operator twice.
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from streamtable.config import StreamsConfig
from streamtable.runtime.spark.stage import (
    KIND_INTERNAL,
    OUTPUT_DDL,
    OUTPUT_SCHEMA,
    RECORD_FIELDS,
    StageRunner,
)
from streamtable.state.persistence import TaskStateStore
from streamtable.state.task_state import TaskState

META_DDL = "nonce string, stream_time long, batches_since_snapshot int, delta_entries int"
LOG_DDL = "snapshot boolean, blob binary"
RECORD_COLUMNS = [name for name, _ in RECORD_FIELDS]
OUTPUT_COLUMNS = ["kind", *RECORD_COLUMNS, "route"]
INPUT_SCHEMA = pa.schema(RECORD_FIELDS)

# worker-local working copies: (app, stage, task) -> TaskState tagged with its version token
_CACHE: dict[tuple[str, int, int], TaskState] = {}


@dataclass
class StageSpec:
    app_id: str
    topology_blob: bytes
    subtopology: int
    config: dict[str, Any]
    internal_topics: set[str]
    queryable_stores: list[str]
    topic_partitions: dict[str, int]
    passthrough: bool  # input has stage-0 output columns; non-internal rows are passed on
    profile_path: str | None = None
    check_token: bool = True  # False: reuse any cached copy (a deliberately broken control)


def _empty_output() -> pd.DataFrame:
    return OUTPUT_SCHEMA.empty_table().to_pandas(types_mapper=_PANDAS_TYPES.get)


# nullable integers stay integers (Spark converts the handler's frames with the output schema)
_PANDAS_TYPES = {pa.int8(): pd.Int8Dtype(), pa.int32(): pd.Int32Dtype(),
                 pa.int64(): pd.Int64Dtype()}


class _SparkTaskState:
    """The task-state persistence port of ``StageRunner``, on the Spark state of the task this
    handler call runs (a TWS handler call runs one task)."""

    def __init__(self, processor: TaskProcessor, cache_key: tuple[str, int, int],
                 prof: dict[str, Any]) -> None:
        self.processor = processor
        self.cache_key = cache_key
        self.prof = prof

    def checkout(self, subtopology: int, task_id: int, version: int) -> TaskState:
        t0 = time.perf_counter()
        state = self.processor._checkout(self.cache_key, self.prof)
        self.prof["state_load_s"] = time.perf_counter() - t0
        return state

    def commit(self, state: TaskState, batch: int) -> dict[str, dict[Any, Any]]:
        t0 = time.perf_counter()
        changes = self.processor._commit(state, self.prof)
        self.prof["commit_s"] = time.perf_counter() - t0
        return changes

    def checkin(self, state: TaskState) -> None:
        _CACHE[self.cache_key] = state
        self.prof["store_entries"] = state.entries()


class TaskProcessor(StatefulProcessor):
    """One sub-topology; one ``handleInputRows`` call = one task's records of one batch."""

    def __init__(self, spec: StageSpec) -> None:
        self.spec = spec

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.meta = handle.getValueState("meta", META_DDL)
        self.log = handle.getListState("log", LOG_DDL)

    def close(self) -> None:
        pass

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],
                        timerValues: Any) -> Iterator[pd.DataFrame]:
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            yield from self._handle(rows)
        finally:
            if gc_was_enabled:
                gc.enable()

    def _handle(self, rows: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        spec = self.spec
        prof: dict[str, Any] = {"stage": spec.subtopology, "pid": os.getpid(),
                                "start": time.time()}
        t0 = time.perf_counter()
        frames = [f for f in rows if len(f)]
        t_recv = time.perf_counter()
        prof["recv_s"] = t_recv - t0
        if not frames:
            return
        pdf = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        prof["rows_in"] = len(pdf)
        out_frames = []
        if spec.passthrough:
            internal = pdf["kind"] == KIND_INTERNAL
            other = pdf.loc[~internal, OUTPUT_COLUMNS]
            if len(other):
                other = other.astype({"kind": "Int8", "partition": "Int32", "route": "Int32"})
                out_frames.append(other.reset_index(drop=True))
            pdf = pdf.loc[internal]
        prof["rows_processed"] = len(pdf)
        if len(pdf):
            routes = pdf["st_route"]
            task_id = int(routes.iloc[0])
            if routes.min() != task_id or routes.max() != task_id:
                raise RuntimeError(f"stage {spec.subtopology}: a group holds several tasks")
            table = pa.Table.from_pandas(pdf[RECORD_COLUMNS], schema=INPUT_SCHEMA,
                                         preserve_index=False)
            t1 = time.perf_counter()
            prof["convert_in_s"] = t1 - t_recv
            batch = self._run(task_id, table, prof)
            t2 = time.perf_counter()
            out_frames.append(batch.to_pandas(types_mapper=_PANDAS_TYPES.get))
            prof["convert_out_s"] = time.perf_counter() - t2
            prof["task"] = task_id
        out = (out_frames[0] if len(out_frames) == 1 else
               pd.concat(out_frames, ignore_index=True) if out_frames else _empty_output())
        prof["rows_out"] = len(out)
        prof["handler_s"] = time.perf_counter() - t0
        if spec.profile_path:
            with open(spec.profile_path, "a") as f:
                f.write(json.dumps(prof) + "\n")
        yield out

    # -- state -----------------------------------------------------------------------------
    def _checkout(self, cache_key: tuple[str, int, int], prof: dict[str, Any]) -> TaskState:
        meta = self.meta.get()
        token = "" if meta is None else meta[0]
        cached = _CACHE.pop(cache_key, None)
        if cached is not None and (cached.nonce == token or not self.spec.check_token):
            prof["cache"] = "hit" if cached.nonce == token else "stale-reused"
            return cached
        prof["cache"] = "miss" if cached is None else "stale"
        state = TaskState()
        entries = 0
        blob_bytes = 0
        if meta is not None:
            for snapshot, blob in self.log.get():
                body = pickle.loads(blob)
                entries += 1
                blob_bytes += len(blob)
                if snapshot:
                    state.stores = {}
                for name, changes in body.items():
                    state.store(name).restore(changes)
            state.nonce = token
            state.stream_time = state.written_stream_time = meta[1]
            state.batches_since_snapshot = meta[2]
            state.delta_entries_since_snapshot = meta[3]
        prof["rebuild_entries"] = entries
        prof["rebuild_bytes"] = blob_bytes
        return state

    def _commit(self, state: TaskState, prof: dict[str, Any]) -> dict[str, dict[Any, Any]]:
        changes = {name: s.drain_changes() for name, s in state.stores.items()}
        changed = sum(len(c) for c in changes.values())
        state.batches_since_snapshot += 1
        state.delta_entries_since_snapshot += changed
        snapshot = TaskStateStore.should_snapshot(state)
        prof["changed"] = changed
        if not snapshot and not changed and state.stream_time == state.written_stream_time:
            prof["wrote"] = "nothing"
            return changes  # token unchanged: the working copy stays valid
        if snapshot:
            body = {name: dict(s.items()) for name, s in state.stores.items()}
            blob = pickle.dumps(body, protocol=pickle.HIGHEST_PROTOCOL)
            self.log.put([(True, blob)])
            state.batches_since_snapshot = 0
            state.delta_entries_since_snapshot = 0
        else:
            blob = pickle.dumps(changes, protocol=pickle.HIGHEST_PROTOCOL)
            self.log.appendValue((False, blob))
        nonce = secrets.token_hex(8)
        self.meta.update((nonce, state.stream_time, state.batches_since_snapshot,
                          state.delta_entries_since_snapshot))
        state.nonce = nonce
        state.written_stream_time = state.stream_time
        prof["wrote"] = "snapshot" if snapshot else "delta"
        prof["blob_bytes"] = len(blob)
        return changes

    def _run(self, task_id: int, table: pa.Table, prof: dict[str, Any]) -> pa.RecordBatch:
        """StageRunner's own per-task code (ordering, Task, store changes, output), with its
        task-state persistence port on Spark's state."""
        spec = self.spec
        persistence = _SparkTaskState(self, (spec.app_id, spec.subtopology, task_id), prof)
        runner = StageRunner(spec.topology_blob, spec.subtopology, 0, persistence, spec.config,
                             spec.queryable_stores, spec.topic_partitions)
        t0 = time.perf_counter()
        batch = runner.run(task_id, table)
        prof["process_s"] = (time.perf_counter() - t0 - prof.get("state_load_s", 0.0)
                             - prof.get("commit_s", 0.0))
        return batch


def build_query(spark: Any, topology: Any, app_id: str, source_dir: str, source_ddl: str,
                source_partitions: dict[str, int], checkpoint: str, sink: Any,
                config: dict[str, Any] | None = None, profile_path: str | None = None,
                check_token: bool = True) -> Any:
    """The whole topology as one streaming query over a parquet file stream (one file per
    trigger, Trigger.AvailableNow), ``sink`` as its ``foreachBatch``; returns the started query.
    """
    from pyspark import cloudpickle
    from pyspark.sql import functions as F

    from streamtable.runtime.spark.plan import plan_query, routing_labels

    settings = StreamsConfig({"application.id": app_id, **(config or {})}).as_dict()
    plan = plan_query(topology, app_id, source_partitions, settings.get("num.partitions"))
    if len(plan.stages) != 2 or plan.stages[1].upstream != [plan.stages[0].subtopology]:
        raise NotImplementedError("this runner chains exactly two stages: s0 -> s1")
    s0, s1 = plan.stages
    if s0.partitions != s1.partitions:
        raise NotImplementedError("both stages must have the same task count")
    p = s0.partitions
    if int(spark.conf.get("spark.sql.shuffle.partitions")) != p:
        raise ValueError(f"set spark.sql.shuffle.partitions to the task count {p}")
    labels = F.array(*[F.lit(x).cast("long") for x in routing_labels(p)])
    blob = cloudpickle.dumps(topology)

    def spec(stage: Any, passthrough: bool) -> StageSpec:
        return StageSpec(app_id, blob, stage.subtopology, settings, plan.internal_topics,
                         stage.queryable_stores, plan.topic_partitions, passthrough,
                         profile_path, check_token)

    source = (spark.readStream.schema(source_ddl).option("maxFilesPerTrigger", 1)
              .parquet(source_dir)
              .where(F.col("topic").isin(s0.external_inputs)))
    # no leading "_" in column names: the pandas TWS worker regroups rows through
    # DataFrame.itertuples, whose namedtuples rename such columns to positional names
    in0 = (source.withColumn("st_route", F.col("partition"))
           .withColumn("st_label", F.element_at(labels, F.col("st_route") + 1)))
    out0 = in0.groupBy("st_label").transformWithStateInPandas(
        TaskProcessor(spec(s0, False)), OUTPUT_DDL, "Append", "None")
    internal = (F.col("kind") == KIND_INTERNAL) & F.col("topic").isin(s1.internal_inputs)
    in1 = (out0
           .withColumn("st_route", F.when(internal, F.coalesce(
               F.col("route"), F.expr(f"pmod(hash(key), {p})"))).otherwise(F.col("partition")))
           .withColumn("st_label", F.element_at(labels, F.col("st_route") + 1)))
    out1 = in1.groupBy("st_label").transformWithStateInPandas(
        TaskProcessor(spec(s1, True)), OUTPUT_DDL, "Append", "None")
    return (out1.writeStream.queryName(app_id)
            .option("checkpointLocation", checkpoint)
            .foreachBatch(sink)
            .trigger(availableNow=True)
            .start())
