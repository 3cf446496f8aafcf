"""How a topology runs as one Spark query: stage order, task counts and routing labels."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streamtable.engine.wiring import (
    is_cyclic,
    punctuates_on_wall_clock,
    stage_groups,
    task_counts,
    upstream_of,
)
from streamtable.partitioner import spark_hash_long
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
    # holds a user's processor, which may punctuate on wall-clock time: every task of the
    # stage runs in every micro-batch, with or without records (see stage.py)
    punctuates: bool = False
    # real internal topic read -> the sub-topology writing it
    input_writers: dict[str, int] = field(default_factory=dict)


@dataclass
class QueryPlan:
    stages: list[StagePlan]
    internal_topics: set[str]
    source_topics: list[str]
    sink_topics: list[str]
    labels: dict[int, list[int]] = field(default_factory=dict)
    # real internal topic -> task count of the stage reading it
    topic_partitions: dict[str, int] = field(default_factory=dict)
    # the sub-topologies in groups, each after those it reads from; a group of a cycle runs in
    # rounds (engine.wiring.stage_groups): then ``cyclic``, and batches run as in rounds.py
    groups: list[list[int]] = field(default_factory=list)
    cyclic: bool = False


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
    counts = task_counts(topology, source_partitions, default_partitions, upstream)
    writers = {t: st.id for st in topology.subtopologies for t in st.sink_topics
               if topology.topics[t].internal}
    stages: list[StagePlan] = []
    for sid, p in counts.items():
        st = topology.subtopologies[sid]
        external = [t for t in st.source_topics if not topology.topics[t].internal]
        internal = [t for t in st.source_topics if topology.topics[t].internal]
        queryable = [s for s in st.stores if topology.stores[s].queryable]
        external_sinks = [t for t in st.sink_topics if not topology.topics[t].internal]
        stages.append(StagePlan(
            sid, p, external, [real[t] for t in internal], upstream[sid], queryable,
            has_results=bool(queryable or external_sinks or dead_letters),
            punctuates=punctuates_on_wall_clock(topology, sid),
            input_writers={real[t]: writers[t] for t in internal},
        ))
    for stage in stages:
        for u in stage.upstream:
            next(s for s in stages if s.subtopology == u).consumed_later = True
    topic_partitions = {t: s.partitions for s in stages
                        for t in s.internal_inputs + s.external_inputs}
    groups = stage_groups(topology, upstream)
    return QueryPlan(
        topic_partitions=topic_partitions,
        groups=groups,
        cyclic=is_cyclic(topology, groups),
        stages=stages,
        internal_topics={real[t] for t, spec in topology.topics.items() if spec.internal},
        source_topics=topology.source_topics,
        sink_topics=topology.sink_topics,
    )


def routing_labels(partitions: int) -> list[int]:
    """Values ``L[t]`` with ``pmod(hash(L[t]), partitions) == t`` under Spark's own hash, so that
    ``repartition(partitions, label)`` puts task ``t`` on Spark partition ``t`` (computed here,
    without a Spark job).

    >>> routing_labels(3)
    [3, 0, 1]
    """
    labels: dict[int, int] = {}
    candidate = 0
    while len(labels) < partitions:
        labels.setdefault(spark_hash_long(candidate) % partitions, candidate)
        candidate += 1
    return [labels[t] for t in range(partitions)]
