"""The Spark plan of a micro-batch: each stage as ``repartition`` + ``mapInArrow`` over its input,
ending in the rows the driver collects (changes of queryable stores, and the records for a
driver-side output writer).

It is built in one of two ways:

* per batch, over a DataFrame of the batch's records (what ``StreamsApp.process_batch`` gets
  from a source in ``read.mode=records``, or from a test);
* once per query, over one row per source partition (:func:`prepared_source`), when the tasks
  read their offset ranges themselves: its stage runners learn the batch from the batch context
  the driver sets on each batch's Spark jobs (see ``stage.py``), so a micro-batch only runs the
  prepared plan again. Building the DataFrames through py4j, each analysed as it is made, cost
  about 0.25 s a batch; running a prepared plan is one new Dataset over the same logical plan (a
  new physical plan, so no shuffle of an earlier batch is ever reused).
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from streamtable.runtime.spark.plan import QueryPlan
from streamtable.runtime.spark.stage import (
    INPUT_FIELDS,
    KIND_INTERNAL,
    KIND_STORE,
    ORIGIN_DDL,
    ORIGIN_FIELDS,
    OUTPUT_DDL,
    PARTITION_RANGE,
    RECORD_DDL,
    RECORD_FIELDS,
)
from streamtable.topology.graph import Topology

log = logging.getLogger(__name__)

RECORD_COLUMNS = [name for name, _ in RECORD_FIELDS]
ORIGIN_COLUMNS = [name for name, _ in ORIGIN_FIELDS]
INPUT_COLUMNS = [name for name, _ in INPUT_FIELDS]
# the columns a record of an input topic leaves empty (it is its own origin)
_ORIGIN_NULLS = [("origin_topic", "string"), ("origin_partition", "int"),
                 ("origin_offset", "long")]
# the record columns an offset range leaves empty, with their Spark types
_RANGE_NULLS = [("timestamp", "long"), ("key", "binary"), ("value", "binary"),
                ("headers", "array<struct<key:string,value:binary>>"), *_ORIGIN_NULLS]

# a stage's (or a global table's) mapInArrow function, given its sub-topology, its stage plan,
# whether its tasks get their Kafka partition's records in offset order (``streamed``) and,
# optionally, the round of the batch (a topology with cycles, see rounds.py)
RunnerFactory = Callable[..., Any]


@dataclass
class Dataflow:
    """One micro-batch's plan: ``globals`` (the global tables' stages, run first, each collected
    on its own) and ``result`` (every other stage; the rows the driver collects)."""

    result: Any
    globals: list[Any] = field(default_factory=list)
    # stage outputs read by a later stage and by the driver: kept for the time of one batch,
    # so that the stage runs once
    cached: list[Any] = field(default_factory=list)
    # for a prepared flow: the (topic, partition) pairs it has rows for
    partitions: frozenset[tuple[str, int]] = frozenset()
    # the next batch's Datasets, being planned while the driver finishes this one
    _ahead: Future[tuple[Any, list[Any]]] | None = field(default=None, repr=False)

    def collect(self) -> Any:
        """Run the batch: the global stages, then the others; returns one Arrow table of the
        collected rows. A prepared flow runs as a new Dataset each time (``select("*")``)."""
        import pyarrow as pa

        for df in self.cached:
            df.persist()
        try:
            result, globals_ = self._next_datasets()
            tables = [g.toArrow() for g in globals_]
            table = result.toArrow()
            return pa.concat_tables([table, *tables]).combine_chunks() if tables else table
        finally:
            for df in self.cached:
                df.unpersist()

    def plan_ahead(self) -> None:
        """Plan the Datasets of the next run on the planner's thread. Spark plans a Dataset
        (optimizer, physical plan) when it first runs: 40-60 ms of the driver's JVM per batch,
        which then overlaps the end of a batch and the start of the next (results, offset and
        commit logs). A flow that keeps stage outputs (``cached``) is planned when it runs, after
        they are cached, so that its plan reads them."""
        if not self.cached and self._ahead is None:
            self._ahead = _planner().submit(self._datasets, True)

    def _datasets(self, planned: bool = False) -> tuple[Any, list[Any]]:
        """New Datasets over the flow's plans (a new physical plan: no shuffle of an earlier
        run is reused); ``planned``: with their physical plans made."""
        result = self.result.select("*")
        globals_ = [g.select("*") for g in self.globals]
        if planned:
            for df in (result, *globals_):
                df._jdf.queryExecution().executedPlan()
        return result, globals_

    def _next_datasets(self) -> tuple[Any, list[Any]]:
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            try:
                return ahead.result()
            except Exception as e:  # planned again below, where an error is reported
                log.debug("planning the next batch ahead failed: %s", e)
        return self._datasets()


class _Planner:
    """One daemon thread that runs planning calls in turn (one thread, so that py4j keeps one
    connection for it)."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="streamtable-planner",
                                                daemon=True)
                self._thread.start()
        self._calls.put((future, fn, args))
        return future

    def _serve(self) -> None:
        while True:
            future, fn, args = self._calls.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as e:
                    future.set_exception(e)


@functools.cache
def _planner() -> _Planner:
    return _Planner()


def prepared_source(spark: Any, partitions: Iterable[tuple[str, int]]) -> Any:
    """The input of a prepared flow: one row per source partition, each in its own Spark
    partition, with the columns of a range row and ``PARTITION_RANGE`` for its offsets (the
    task looks the batch's range up in the batch context)."""
    from pyspark.sql import functions as F

    rows = sorted(partitions)
    ids = spark.range(0, len(rows), 1, max(1, len(rows)))

    def column(values: list[Any], kind: str) -> Any:
        if not values:
            return F.lit(None).cast(kind)
        return F.element_at(F.array(*[F.lit(v).cast(kind) for v in values]),
                            (F.col("id") + 1).cast("int"))

    return ids.select(column([t for t, _ in rows], "string").alias("topic"),
                      column([p for _, p in rows], "int").alias("partition"),
                      F.lit(PARTITION_RANGE).cast("long").alias("offset"),
                      *[F.lit(None).cast(t).alias(c) for c, t in _RANGE_NULLS],
                      F.lit(PARTITION_RANGE).cast("long").alias("_end"))


def range_source(df: Any) -> Any:
    """A ``read.mode=ranges`` DataFrame (topic, partition, start, end) as stage input rows."""
    from pyspark.sql import functions as F

    return df.select("topic", "partition", F.col("start").alias("offset"),
                     *[F.lit(None).cast(t).alias(c) for c, t in _RANGE_NULLS],
                     F.col("end").alias("_end"))


def record_source(df: Any) -> Any:
    """A DataFrame of records (the Kafka source's columns) as stage input rows."""
    from pyspark.sql import functions as F

    return df.select(*RECORD_COLUMNS, *[F.lit(None).cast(t).alias(c) for c, t in _ORIGIN_NULLS],
                     F.lit(None).cast("long").alias("_end"))


def build(topology: Topology, plan: QueryPlan, source: Any, runner: RunnerFactory, *,
          by_partition: bool, distributed: bool) -> Dataflow:
    """The plan of a batch over ``source`` (stage input rows). ``by_partition``: each Spark
    partition of ``source`` is one Kafka partition in offset order (a stage reading one topic
    then needs no shuffle); ``distributed``: the tasks write their records to Kafka themselves,
    so only store changes come to the driver."""
    from pyspark.sql import functions as F

    flow = Dataflow(result=None)
    for st in topology.global_subtopologies:
        records = (source.where(F.col("topic").isin(st.source_topics))
                   .withColumn("_route", F.lit(0)).repartition(1)
                   .select(*INPUT_COLUMNS, "_route"))
        flow.globals.append(records.mapInArrow(runner(st.id, None, False), OUTPUT_DDL)
                            .where(F.col("kind") == KIND_STORE))
    outputs: dict[int, Any] = {}
    results = []
    readers = Counter(up for stage in plan.stages for up in stage.upstream)
    for stage in plan.stages:
        parts = []
        if stage.external_inputs:
            parts.append(source.where(F.col("topic").isin(stage.external_inputs))
                         .withColumn("_route", F.col("partition")))
        for up in stage.upstream:
            parts.append(
                outputs[up]
                .where((F.col("kind") == KIND_INTERNAL)
                       & F.col("topic").isin(stage.internal_inputs))
                .withColumn("_route", F.coalesce(
                    F.col("route"), F.expr(f"pmod(hash(key), {stage.partitions})")))
                .select(*RECORD_COLUMNS, *ORIGIN_COLUMNS, F.lit(None).cast("long").alias("_end"),
                        "_route")
            )
        if stage.punctuates:
            parts.append(heartbeats(source.sparkSession, stage.partitions))
        stage_input = functools.reduce(lambda a, b: a.unionByName(b), parts)
        streamed = (by_partition and len(parts) == 1 and not stage.upstream
                    and len(stage.external_inputs) == 1)
        if streamed:
            # each Spark partition of the Kafka source is one Kafka partition in offset
            # order: one task, whose records can be processed as they arrive
            routed = stage_input.select(*INPUT_COLUMNS, "_route")
        else:
            labels = F.array(*[F.lit(x).cast("long") for x in plan.labels[stage.partitions]])
            routed = (stage_input
                      .withColumn("_label", F.element_at(labels, F.col("_route") + 1))
                      .repartition(stage.partitions, "_label")
                      .select(*INPUT_COLUMNS, "_route"))
        out = routed.mapInArrow(runner(stage.subtopology, stage, streamed), OUTPUT_DDL)
        # A stage read by more than one reader (later stages, the driver) is kept, so that
        # it runs once: each reader's plan would otherwise run it again (correct, from the
        # same state, but the work and the reads of its input twice over). A stage read by
        # one later stage only runs as part of it.
        collect = stage.has_results or not stage.consumed_later
        if readers[stage.subtopology] + collect > 1:
            flow.cached.append(out)
        outputs[stage.subtopology] = out
        if collect:
            # with a distributed writer the tasks wrote their records themselves: only
            # the changes of queryable stores come to the driver
            results.append(out.where(F.col("kind") == KIND_STORE) if distributed
                           else out.where(F.col("kind") != KIND_INTERNAL))
    flow.result = functools.reduce(lambda a, b: a.unionByName(b), results)
    return flow


def heartbeats(spark: Any, tasks: int) -> Any:
    """One row without a topic per task (``_route``), so that each task of a stage runs."""
    return spark.createDataFrame([(None,) * len(INPUT_COLUMNS) + (t,) for t in range(tasks)],
                                 f"{RECORD_DDL}, {ORIGIN_DDL}, _end bigint, _route int")
