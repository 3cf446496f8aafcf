"""How a topology runs as one Spark query: stage order, task counts and routing labels."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
    # real internal topic -> position of the stage writing it (ties of timestamps: earlier first)
    topic_rank: dict[str, int] = field(default_factory=dict)
    # real topics whose records a task processes before all others of the batch
    first_topics: frozenset[str] = frozenset()


def plan_query(topology: Topology, application_id: str,
               source_partitions: Mapping[str, int],
               default_partitions: int | None = None,
               dead_letters: bool = False) -> QueryPlan:
    """Order the sub-topologies so that each comes after those writing its repartition topics,
    and give each its task count: the partition count of its source topics (which must agree,
    as Kafka Streams requires for co-partitioning), or for a sub-topology fed only by
    repartition topics the largest task count upstream. ``dead_letters``: any stage may write
    to a dead-letter topic."""
    real = {t: topology.internal_topic_name(application_id, t) for t in topology.topics}
    writers: dict[str, int] = {}
    for st in topology.subtopologies:
        for t in st.sink_topics:
            if topology.topics[t].internal:
                writers[t] = st.id
    upstream: dict[int, list[int]] = {}
    for st in topology.subtopologies:
        ups = []
        for t in st.source_topics:
            if topology.topics[t].internal:
                if t not in writers:
                    raise TopologyError(f"repartition topic {t!r} has no writer")
                if writers[t] not in ups:
                    ups.append(writers[t])
        upstream[st.id] = ups
    order: list[int] = []
    done: set[int] = set()
    pending = [st.id for st in topology.subtopologies]
    while pending:
        ready = [s for s in pending if all(u in done for u in upstream[s])]
        if not ready:
            raise TopologyError(f"sub-topologies {pending} form a cycle through internal topics")
        for s in ready:
            order.append(s)
            done.add(s)
            pending.remove(s)
    partitions: dict[int, int] = {}
    stages: list[StagePlan] = []
    for sid in order:
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
    position = {s.subtopology: i for i, s in enumerate(stages)}
    topic_rank = {}
    for t, sid in writers.items():
        topic_rank[real[t]] = position[sid]
    first = frozenset(
        real[t] for node in topology.nodes.values() if node.options.get("process_first")
        for t in node.topics
    )
    return QueryPlan(
        first_topics=first,
        topic_partitions=topic_partitions,
        topic_rank=topic_rank,
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
