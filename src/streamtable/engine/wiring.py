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

    ``nodes``: node name -> its wiring (sources and sinks). ``stage_groups``: the
    sub-topology ids in groups (:func:`stage_groups`), each group after every group writing a
    repartition topic it reads; ``stage_order`` the same ids, one after the other.
    ``topic_rank``: real internal topic -> position in ``stage_order`` of the sub-topology
    writing it (at equal timestamps, records of earlier stages first). ``first_topics``: real
    topics whose records a task processes before all others of a batch (the mirrored left
    values of a foreign-key join, which must be known before the answers about them).
    ``table_topics``: topics read as tables, whose records go first at equal timestamps
    (:attr:`~streamtable.topology.graph.Topology.table_topics`).
    ``rounds_per_batch``: how many state versions a batch has room for
    (:func:`state_version`): 1 without cycles, else :data:`MAX_ROUNDS`.
    """

    application_id: str
    nodes: Mapping[str, NodeWiring]
    stage_order: tuple[int, ...]
    topic_rank: Mapping[str, int]
    first_topics: frozenset[str]
    internal_topics: frozenset[str]
    table_topics: frozenset[str] = frozenset()
    stage_groups: tuple[tuple[int, ...], ...] = ()
    rounds_per_batch: int = 1

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
    like_external = _copartitioned_sinks(topology)
    checked = set(like_external.values())
    nodes: dict[str, NodeWiring] = {}
    for node in topology.nodes.values():
        if node.kind is NodeKind.PROCESSOR:
            continue
        internal = any(topology.topics[t].internal for t in node.topics)
        partition_like = None
        like = node.options.get("partition_like") or like_external.get(node.name)
        if like is not None:
            source = topology.nodes[like]
            partition_like = (source.topics[0], source.key_serde or config.default_key_serde)
        nodes[node.name] = NodeWiring(
            topics=tuple(real[t] for t in node.topics),
            key_serde=INTERNAL if internal else config.default_key_serde,
            value_serde=INTERNAL if internal else config.default_value_serde,
            carries_changes=any(topology.topics[t].carries_changes for t in node.topics),
            check_partitioner=bool(node.options.get("check_partitioner"))
            or node.name in checked,
            partition_like=partition_like,
        )
    groups = stage_groups(topology)
    order = [sid for group in groups for sid in group]
    writers = _internal_writers(topology)
    position = {sid: i for i, sid in enumerate(order)}
    return Wiring(
        application_id=app_id,
        nodes=nodes,
        stage_order=tuple(order),
        stage_groups=tuple(tuple(g) for g in groups),
        rounds_per_batch=MAX_ROUNDS if is_cyclic(topology, groups) else 1,
        topic_rank={real[t]: position[sid] for t, sid in writers.items()},
        first_topics=frozenset(
            real[t] for node in topology.nodes.values() if node.options.get("process_first")
            for t in node.topics
        ),
        internal_topics=frozenset(real[t] for t, spec in topology.topics.items()
                                  if spec.internal),
        table_topics=frozenset(real[t] for t in topology.table_topics),
    )


def _copartitioned_sinks(topology: Topology) -> dict[str, str]:
    """Sink of a repartition topic -> the source of an external topic its reader reads too,
    for the sinks that name no placement of their own: their records must go to the partition
    Kafka's default partitioner gives their key in that topic, where the reader's task holds
    that key (Kafka Streams' repartition topics are co-partitioned with the sub-topology's
    source topics). A foreign-key join's answers reach its left table's sub-topology so when
    its result is joined back to the left table; otherwise a repartition topic's reader reads
    repartition topics only, and both sides are routed by the same hash."""
    external_source: dict[int, str] = {}
    for st in topology.subtopologies:
        for name in st.nodes:
            node = topology.nodes[name]
            if (node.kind is NodeKind.SOURCE and st.id not in external_source
                    and not any(topology.topics[t].internal for t in node.topics)):
                external_source[st.id] = name
    out: dict[str, str] = {}
    for node in topology.nodes.values():
        if (node.kind is not NodeKind.SINK or node.options.get("partition_like")
                or not topology.topics[node.topics[0]].internal):
            continue
        reader = topology.subtopology_of_topic(node.topics[0])
        if reader is not None and reader.id in external_source:
            out[node.name] = external_source[reader.id]
    return out


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


#: the most rounds (see :func:`stage_groups`) one batch of a topology with cycles may take
MAX_ROUNDS = 1000


def stage_groups(topology: Topology,
                 upstream: Mapping[int, list[int]] | None = None) -> list[list[int]]:
    """The sub-topology ids in groups, each group after the groups writing the repartition
    topics it reads (``upstream``: :func:`upstream_of`, when the caller has it already).

    A group is one sub-topology, or the sub-topologies of a cycle through internal topics
    (a strongly connected component, in id order), as a foreign-key join's result joined back
    to its left table makes: the left side subscribes, the right side answers on the response
    topic, which the left side's sub-topology reads (Kafka Streams' sub-topologies form the
    same cycle). A host runs a group in rounds: each member in turn takes what was written for
    it so far; what a member writes for itself or for one before it waits for the next round,
    until a round writes nothing within the group (see :func:`is_cyclic`).

    >>> from streamtable import StreamsBuilder
    >>> b = StreamsBuilder()
    >>> left, right = b.table("left", materialized="l"), b.table("right", materialized="r")
    >>> joined = left.join(right, lambda a, b: (a, b), foreign_key_extractor=lambda v: v)
    >>> _ = joined.join(left, lambda j, l: j)
    >>> stage_groups(b.build())
    [[0, 1]]
    """
    if upstream is None:
        upstream = upstream_of(topology)
    ids = [st.id for st in topology.subtopologies]
    downstream: dict[int, list[int]] = {s: [] for s in ids}
    for s in ids:
        for u in upstream[s]:
            downstream[u].append(s)
    # Tarjan's strongly connected components, iteratively
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    components: list[list[int]] = []
    for root in ids:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            children = downstream[node]
            if i < len(children):
                work.append((node, i + 1))
                child = children[i]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    # the groups in waves, as without cycles: each wave every group whose writers are done
    group_of = {sid: i for i, c in enumerate(components) for sid in c}
    pending = sorted(range(len(components)), key=lambda i: components[i][0])
    order: list[list[int]] = []
    done: set[int] = set()
    while pending:
        ready = [g for g in pending
                 if all(group_of[u] in done or group_of[u] == g
                        for sid in components[g] for u in upstream[sid])]
        for g in ready:
            order.append(components[g])
            pending.remove(g)
        done.update(ready)
    return order


def is_cyclic(topology: Topology, groups: list[list[int]] | None = None) -> bool:
    """Whether a sub-topology reads a repartition topic it writes itself or through others:
    then a batch runs its group in rounds (:func:`stage_groups`)."""
    upstream = upstream_of(topology)
    if groups is None:
        groups = stage_groups(topology, upstream)
    return any(len(g) > 1 or g[0] in upstream[g[0]] for g in groups)


def stage_order(topology: Topology,
                upstream: Mapping[int, list[int]] | None = None) -> list[int]:
    """Sub-topology ids, each after those writing the repartition topics it reads, except
    within a cycle (:func:`stage_groups`, one group after the other)."""
    return [sid for group in stage_groups(topology, upstream) for sid in group]


def state_version(wiring: Wiring, batch_id: int, round_: int = 0) -> int:
    """The version of a task's state after round ``round_`` of batch ``batch_id``: the batch id
    itself without cycles; with them, ``rounds_per_batch`` versions per batch, so that each
    round of a batch starts from the state the one before left, and a replay of the batch
    (from its first round) from the state after the previous batch.

    >>> from streamtable import StreamsBuilder
    >>> from streamtable.config import StreamsConfig
    >>> b = StreamsBuilder()
    >>> b.stream("in").to("out")
    >>> state_version(wire(b.build(), StreamsConfig({})), 7)
    7
    """
    if round_ >= wiring.rounds_per_batch:
        raise TopologyError(
            f"a cycle through internal topics did not settle within {wiring.rounds_per_batch} "
            f"rounds of batch {batch_id}: its sub-topologies keep writing to each other")
    return batch_id * wiring.rounds_per_batch + round_


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
    # within a cycle, a sub-topology fed only by repartition topics takes the task counts of
    # those upstream of it that come before it
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
            [counts[u] for u in upstream[sid] if u in counts] or [default_partitions or 1])
    return counts


def punctuates_on_wall_clock(topology: Topology, subtopology: int) -> bool:
    """Whether a sub-topology holds a user's processor, which may punctuate on wall-clock time:
    then every task of it runs in every batch, with records or without."""
    return any(topology.nodes[n].options.get("user")
               for n in topology.subtopology(subtopology).nodes)
