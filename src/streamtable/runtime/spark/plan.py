"""How a topology runs as one Spark query: stage order, task counts and routing labels."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streamtable.engine.wiring import stage_order, upstream_of
from streamtable.errors import TopologyError
from streamtable.topology.graph import Topology


@dataclass
class StagePlan:
    subtopology: int
    partitions: int
    external_inputs: list[str]  # real topic names
    internal_inputs: list[str]  # real names of repartition topics read
    upstream: list[int]
    queryable_stores: list[str]
    consumed_later: bool = False
    # writes to Kafka or to a queryable store, so the driver collects its output
    has_results: bool = True


@dataclass
class QueryPlan:
    stages: list[StagePlan]
    internal_topics: set[str]
    source_topics: list[str]
    sink_topics: list[str]
    labels: dict[int, list[int]] = field(default_factory=dict)
    # real internal topic -> task count of the stage reading it
    topic_partitions: dict[str, int] = field(default_factory=dict)


def plan_query(topology: Topology, application_id: str,
               source_partitions: Mapping[str, int],
               default_partitions: int | None = None,
               dead_letters: bool = False) -> QueryPlan:
    """Order the sub-topologies so that each comes after those writing its repartition topics
    (the engine's stage order, which the test driver's batch mode follows too), and give each
    its task count: the partition count of its source topics (which must agree, as Kafka
    Streams requires for co-partitioning), or for a sub-topology fed only by repartition
    topics the largest task count upstream. ``dead_letters``: any stage may write
    to a dead-letter topic."""
    real = {t: topology.internal_topic_name(application_id, t) for t in topology.topics}
    upstream = upstream_of(topology)
    partitions: dict[int, int] = {}
    stages: list[StagePlan] = []
    for sid in stage_order(topology, upstream):
        st = topology.subtopologies[sid]
        external = [t for t in st.source_topics if not topology.topics[t].internal]
        internal = [t for t in st.source_topics if topology.topics[t].internal]
        counts = {t: source_partitions[t] for t in external}
        if len(set(counts.values())) > 1:
            raise TopologyError(
                f"sub-topology {sid} reads topics with different partition counts {counts}: "
                "they must be co-partitioned (the same number of partitions)"
            )
        if counts:
            p = next(iter(counts.values()))
        else:
            explicit = [n for t in internal if (n := topology.topics[t].partitions)]
            p = max(explicit) if explicit else max(
                [partitions[u] for u in upstream[sid]] or [default_partitions or 1]
            )
        partitions[sid] = p
        queryable = [s for s in st.stores if topology.stores[s].queryable]
        external_sinks = [t for t in st.sink_topics if not topology.topics[t].internal]
        stages.append(StagePlan(
            sid, p, external, [real[t] for t in internal], upstream[sid], queryable,
            has_results=bool(queryable or external_sinks or dead_letters),
        ))
    for stage in stages:
        for u in stage.upstream:
            next(s for s in stages if s.subtopology == u).consumed_later = True
    topic_partitions = {t: s.partitions for s in stages
                        for t in s.internal_inputs + s.external_inputs}
    return QueryPlan(
        topic_partitions=topic_partitions,
        stages=stages,
        internal_topics={real[t] for t, spec in topology.topics.items() if spec.internal},
        source_topics=topology.source_topics,
        sink_topics=topology.sink_topics,
    )


def routing_labels(spark: Any, partitions: int) -> list[int]:
    """Values ``L[t]`` with ``pmod(hash(L[t]), partitions) == t`` under Spark's own hash, so that
    ``repartition(partitions, label)`` puts task ``t`` on Spark partition ``t``."""
    from pyspark.sql import functions as F

    rows = (spark.range(0, 64 * partitions)
            .select("id", F.expr(f"pmod(hash(id), {partitions})").alias("t"))
            .collect())
    labels: dict[int, int] = {}
    for r in rows:
        labels.setdefault(int(r["t"]), int(r["id"]))
    missing = [t for t in range(partitions) if t not in labels]
    if missing:
        raise RuntimeError(f"no routing label found for tasks {missing}")
    return [labels[t] for t in range(partitions)]
