"""A micro-batch of a topology with cycles through internal topics, run in rounds.

A foreign-key join's result joined back to its left table (or foreign-key joins chained to one
right table) makes sub-topologies that read each other's repartition topics: the left side
subscribes, the right side answers on the response topic, which the left side's sub-topology
reads. Kafka Streams runs the same cycle, each answer consumed when it arrives. Here a batch
runs each group of sub-topologies (:func:`~streamtable.engine.wiring.stage_groups`) in rounds,
as the test driver's batch mode does: in a round each member of the group takes the records
written for it so far (round 0: the batch's source records too) and runs as one Spark stage;
what it writes for a member that already ran in the round (or for itself) waits for the next
round, until a round writes nothing within the group. So a batch ends with every answer
processed, as a record-by-record run does after each record.

Each stage's output is collected to the driver before the next stage runs, and the records for
later stages go back to Spark as a new DataFrame: no stage of the batch is ever recomputed by a
later one (a round's task state is its own version, and recomputing an earlier round after a
later one committed would discard the later one's state). Exactly-once is the batch's: a
replayed batch starts again from round 0 and the state after the previous batch
(:func:`~streamtable.engine.wiring.state_version`), and each round's tasks write to Kafka as
writers of their own.
"""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from streamtable.runtime.spark.dataflow import (
    INPUT_COLUMNS,
    ORIGIN_COLUMNS,
    RECORD_COLUMNS,
    RunnerFactory,
    heartbeats,
)
from streamtable.runtime.spark.plan import QueryPlan, StagePlan
from streamtable.runtime.spark.stage import (
    KIND_INTERNAL,
    KIND_STORE,
    ORIGIN_DDL,
    OUTPUT_DDL,
    OUTPUT_SCHEMA,
)
from streamtable.topology.graph import Topology

log = logging.getLogger(__name__)

_INTERNAL_DDL = (
    "topic string, partition int, offset bigint, timestamp bigint, key binary, value binary, "
    f"headers array<struct<key:string,value:binary>>, route int, {ORIGIN_DDL}"
)


def run(topology: Topology, plan: QueryPlan, source: Any, runner: RunnerFactory, *,
        distributed: bool) -> pa.Table:
    """Run one batch over ``source`` (stage input rows) in rounds; returns the rows the driver
    writes (records for Kafka unless ``distributed``, and the last change of each key of the
    queryable stores), as :meth:`Dataflow.collect` does."""
    from pyspark.sql import functions as F

    spark = source.sparkSession
    source.persist()  # read by every stage with source topics, and the global tables
    try:
        results: list[pa.Table] = []
        for st in topology.global_subtopologies:
            records = (source.where(F.col("topic").isin(st.source_topics))
                       .withColumn("_route", F.lit(0)).repartition(1)
                       .select(*INPUT_COLUMNS, "_route"))
            results.append(records.mapInArrow(runner(st.id, None, False), OUTPUT_DDL)
                           .where(F.col("kind") == KIND_STORE).toArrow())
        stages = {s.subtopology: s for s in plan.stages}
        reader = {t: s.subtopology for s in plan.stages for t in s.internal_inputs}
        pending: dict[int, list[pa.Table]] = defaultdict(list)
        for group in plan.groups:
            round_ = 0
            while True:
                for sid in group:
                    out = _run_stage(spark, source, plan, stages[sid], pending.pop(sid, []),
                                     runner, round_)
                    if out is None:
                        continue
                    kinds = out.column("kind")
                    internal = out.filter(pc.equal(kinds, KIND_INTERNAL))
                    for topic in pc.unique(internal.column("topic")).to_pylist():
                        pending[reader[topic]].append(
                            internal.filter(pc.equal(internal.column("topic"), topic)))
                    results.append(out.filter(pc.equal(kinds, KIND_STORE)) if distributed
                                   else out.filter(pc.not_equal(kinds, KIND_INTERNAL)))
                if not any(pending.get(s) for s in group):
                    break
                round_ += 1
                log.debug("a cycle of sub-topologies %s: round %d", group, round_)
        table = pa.concat_tables(results) if results else OUTPUT_SCHEMA.empty_table()
        return last_store_changes(table)
    finally:
        source.unpersist()


def _run_stage(spark: Any, source: Any, plan: QueryPlan, stage: StagePlan,
               held: list[pa.Table], runner: RunnerFactory, round_: int) -> pa.Table | None:
    """Run ``stage``'s round ``round_`` over its records: the batch's source records (round 0),
    and ``held``, the rows other stages (or it) wrote for it. None when it has none."""
    from pyspark.sql import functions as F

    parts = []
    if round_ == 0 and stage.external_inputs:
        parts.append(source.where(F.col("topic").isin(stage.external_inputs))
                     .withColumn("_route", F.col("partition")))
    rows = pa.concat_tables(held) if held else None
    if rows is not None and rows.num_rows:
        frame = spark.createDataFrame(rows.select([*RECORD_COLUMNS, "route", *ORIGIN_COLUMNS]),
                                      _INTERNAL_DDL)
        parts.append(frame.withColumn("_route", F.coalesce(
            F.col("route"), F.expr(f"pmod(hash(key), {stage.partitions})")))
            .select(*RECORD_COLUMNS, *ORIGIN_COLUMNS, F.lit(None).cast("long").alias("_end"),
                    "_route"))
    if round_ == 0 and stage.punctuates:
        parts.append(heartbeats(spark, stage.partitions))
    if not parts:
        return None
    stage_input = functools.reduce(lambda a, b: a.unionByName(b), parts)
    labels = F.array(*[F.lit(x).cast("long") for x in plan.labels[stage.partitions]])
    routed = (stage_input
              .withColumn("_label", F.element_at(labels, F.col("_route") + 1))
              .repartition(stage.partitions, "_label")
              .select(*INPUT_COLUMNS, "_route"))
    out: pa.Table = routed.mapInArrow(runner(stage.subtopology, stage, False, round_),
                                      OUTPUT_DDL).toArrow()
    return out


def last_store_changes(table: pa.Table) -> pa.Table:
    """``table`` with only the last change of each key of each store: a serving store applies a
    batch's changes as one per key, and rounds may change a key more than once.

    >>> rows = [(2, "s", b"k", b"1"), (1, "out", b"k", b"x"), (2, "s", b"k", None)]
    >>> t = pa.table({"kind": pa.array([r[0] for r in rows], pa.int8()),
    ...               "topic": [r[1] for r in rows], "key": [r[2] for r in rows],
    ...               "value": [r[3] for r in rows]})
    >>> last_store_changes(t).to_pylist()  # doctest: +NORMALIZE_WHITESPACE
    [{'kind': 1, 'topic': 'out', 'key': b'k', 'value': b'x'},
     {'kind': 2, 'topic': 's', 'key': b'k', 'value': None}]
    """
    kinds = table.column("kind").to_pylist()
    if kinds.count(KIND_STORE) < 2:
        return table
    topics, keys = table.column("topic").to_pylist(), table.column("key").to_pylist()
    last: dict[tuple[str, bytes], int] = {}
    for i, kind in enumerate(kinds):
        if kind == KIND_STORE:
            last[(topics[i], keys[i])] = i
    keep = [kind != KIND_STORE or last[(topics[i], keys[i])] == i
            for i, kind in enumerate(kinds)]
    return table.filter(pa.array(keep))
