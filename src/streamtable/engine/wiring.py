"""Wiring: what sources and sinks need from the application, resolved once per application.

A topology is built without an application: its internal topics have no application id yet,
and serdes left out mean "the application's default". :func:`wire` resolves all of that once,
for one application id and configuration, into a :class:`~streamtable.processors.api.NodeWiring`
per source and sink node, and the ordering rules every host applies to a batch. Tasks hand each
node its wiring through the processor context; nothing is patched onto processors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from streamtable.config import StreamsConfig
from streamtable.errors import TopologyError
from streamtable.processors.api import NodeWiring
from streamtable.serde import INTERNAL, Serde
from streamtable.topology.graph import NodeKind, Topology


@dataclass(frozen=True)
class Wiring:
    """The resolved wiring of one application.

    ``nodes``: node name -> its wiring (sources and sinks). ``stage_order``: sub-topology ids,
    each after every sub-topology writing a repartition topic it reads. ``topic_rank``: real
    internal topic -> position in ``stage_order`` of the sub-topology writing it (at equal
    timestamps, records of earlier stages first). ``first_topics``: real topics whose records
    a task processes before all others of a batch (the mirrored left values of a foreign-key
    join, which must be known before the answers about them).
    """

    application_id: str
    nodes: Mapping[str, NodeWiring]
    stage_order: tuple[int, ...]
    topic_rank: Mapping[str, int]
    first_topics: frozenset[str]
    internal_topics: frozenset[str]

    def node(self, name: str) -> NodeWiring:
        try:
            return self.nodes[name]
        except KeyError:
            raise TopologyError(f"node {name!r} is not a source or sink of this topology") from None


def wire(topology: Topology, config: StreamsConfig) -> Wiring:
    """Resolve the wiring of ``topology`` for the application that ``config`` describes.

    >>> from streamtable import StreamsBuilder
    >>> b = StreamsBuilder()
    >>> b.stream("in").group_by_key().count(materialized="counts")  # doctest: +ELLIPSIS
    <...KTable...>
    >>> w = wire(b.build(), StreamsConfig({"application.id": "app"}))
    >>> sorted(w.internal_topics), w.stage_order
    ([], (0,))
    """
    app_id = config.application_id
    real = {t: topology.internal_topic_name(app_id, t) for t in topology.topics}
    nodes: dict[str, NodeWiring] = {}
    for node in topology.nodes.values():
        if node.kind is NodeKind.PROCESSOR:
            continue
        internal = any(topology.topics[t].internal for t in node.topics)
        partition_like = None
        like = node.options.get("partition_like")
        if like is not None:
            source = topology.nodes[like]
            partition_like = (source.topics[0], source.key_serde or config.default_key_serde)
        nodes[node.name] = NodeWiring(
            topics=tuple(real[t] for t in node.topics),
            key_serde=INTERNAL if internal else config.default_key_serde,
            value_serde=INTERNAL if internal else config.default_value_serde,
            carries_changes=any(topology.topics[t].carries_changes for t in node.topics),
            check_partitioner=bool(node.options.get("check_partitioner")),
            partition_like=partition_like,
        )
    order = stage_order(topology)
    writers = _internal_writers(topology)
    position = {sid: i for i, sid in enumerate(order)}
    return Wiring(
        application_id=app_id,
        nodes=nodes,
        stage_order=tuple(order),
        topic_rank={real[t]: position[sid] for t, sid in writers.items()},
        first_topics=frozenset(
            real[t] for node in topology.nodes.values() if node.options.get("process_first")
            for t in node.topics
        ),
        internal_topics=frozenset(real[t] for t, spec in topology.topics.items()
                                  if spec.internal),
    )


def external_topic_serdes(topology: Topology,
                          config: StreamsConfig) -> dict[str, tuple[Serde, Serde]]:
    """The ``(key serde, value serde)`` of each external topic the application reads or writes:
    the source's or sink's own serdes, else the application's defaults. A topic that is both
    read and written is given the serdes of the node reading it.

    >>> from streamtable import StreamsBuilder
    >>> b = StreamsBuilder()
    >>> b.stream("lines").group_by(lambda k, v: v).count().to_stream().to(
    ...     "counts", value_serde="long")
    >>> serdes = external_topic_serdes(b.build(), StreamsConfig({"default.key.serde": "string"}))
    >>> serdes["lines"], serdes["counts"]
    ((StringSerde(), JsonSerde()), (StringSerde(), LongSerde()))
    """
    found: dict[str, tuple[Serde, Serde]] = {}
    nodes = sorted(topology.nodes.values(), key=lambda n: n.kind is not NodeKind.SOURCE)
    for node in nodes:
        if node.kind is NodeKind.PROCESSOR:
            continue
        for t in node.topics:
            if not topology.topics[t].internal and t not in found:
                found[t] = (node.key_serde or config.default_key_serde,
                            node.value_serde or config.default_value_serde)
    return found


def _internal_writers(topology: Topology) -> dict[str, int]:
    """Internal topic -> the sub-topology writing it."""
    writers: dict[str, int] = {}
    for st in topology.subtopologies:
        for t in st.sink_topics:
            if topology.topics[t].internal:
                writers[t] = st.id
    return writers


def upstream_of(topology: Topology) -> dict[int, list[int]]:
    """Sub-topology id -> the sub-topologies writing the repartition topics it reads."""
    writers = _internal_writers(topology)
    upstream: dict[int, list[int]] = {}
    for st in topology.subtopologies:
        ups: list[int] = []
        for t in st.source_topics:
            if topology.topics[t].internal:
                if t not in writers:
                    raise TopologyError(f"repartition topic {t!r} has no writer")
                if writers[t] not in ups:
                    ups.append(writers[t])
        upstream[st.id] = ups
    return upstream


def stage_order(topology: Topology,
                upstream: Mapping[int, list[int]] | None = None) -> list[int]:
    """Sub-topology ids, each after those writing the repartition topics it reads
    (``upstream``: :func:`upstream_of`, when the caller has it already)."""
    if upstream is None:
        upstream = upstream_of(topology)
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
    return order


def task_counts(topology: Topology, source_partitions: Mapping[str, int],
                default_partitions: int | None = None,
                upstream: Mapping[int, list[int]] | None = None) -> dict[int, int]:
    """Sub-topology id -> its number of tasks, in stage order: the partition count of its
    source topics (``source_partitions``, by topic name; they must agree, as Kafka Streams
    requires for co-partitioning), or for a sub-topology fed only by repartition topics their
    explicit partition count, else the largest task count upstream (``default_partitions``, or
    1, without any).

    >>> from streamtable import StreamsBuilder
    >>> b = StreamsBuilder()
    >>> b.stream("in").group_by(lambda k, v: v).count()  # doctest: +ELLIPSIS
    <...KTable...>
    >>> task_counts(b.build(), {"in": 3})
    {0: 3, 1: 3}
    """
    if upstream is None:
        upstream = upstream_of(topology)
    counts: dict[int, int] = {}
    for sid in stage_order(topology, upstream):
        st = topology.subtopologies[sid]
        external = {t: source_partitions[t] for t in st.source_topics
                    if not topology.topics[t].internal}
        if len(set(external.values())) > 1:
            raise TopologyError(
                f"sub-topology {sid} reads topics with different partition counts {external}: "
                "they must be co-partitioned (the same number of partitions)"
            )
        if external:
            counts[sid] = next(iter(external.values()))
            continue
        explicit = [n for t in st.source_topics if (n := topology.topics[t].partitions)]
        counts[sid] = max(explicit) if explicit else max(
            [counts[u] for u in upstream[sid]] or [default_partitions or 1])
    return counts


def punctuates_on_wall_clock(topology: Topology, subtopology: int) -> bool:
    """Whether a sub-topology holds a user's processor, which may punctuate on wall-clock time:
    then every task of it runs in every batch, with records or without."""
    return any(topology.nodes[n].options.get("user")
               for n in topology.subtopology(subtopology).nodes)
