"""How a topology runs as one Spark query: stage order, task counts and routing labels."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

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
    # holds a user's processor, which may punctuate on wall-clock time: every task of the
    # stage runs in every micro-batch, with or without records (see stage.py)
    punctuates: bool = False


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
            punctuates=any(topology.nodes[n].options.get("user") for n in st.nodes),
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


_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * 0xCC9E2D51) & _M32, 15) * 0x1B873593) & _M32


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & _M32


def spark_hash_long(value: int, seed: int = 42) -> int:
    """Spark SQL's ``hash()`` of a bigint (Murmur3 x86_32 ``hashLong``, seed 42), as a signed
    32-bit integer.

    >>> spark_hash_long(0), spark_hash_long(1)
    (-1670924195, -1712319331)
    """
    value &= 0xFFFFFFFFFFFFFFFF
    h1 = _mix_h1(seed & _M32, _mix_k1(value & _M32))
    h1 = _mix_h1(h1, _mix_k1(value >> 32))
    h1 ^= 8
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _M32
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _M32
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


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
