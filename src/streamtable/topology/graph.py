"""The topology: a graph of source, processor and sink nodes plus the stores they use.

It is split into sub-topologies at topics: the nodes connected by parent-child edges or by a
shared store form one sub-topology; a repartition topic is written by a sink of one
sub-topology and read by a source of another. Each sub-topology runs as one task per input
partition in every driver.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamtable.errors import TopologyError
from streamtable.processors.api import Processor
from streamtable.serde import Serde
from streamtable.state.spec import StoreSpec


class NodeKind(enum.Enum):
    SOURCE = "Source"
    PROCESSOR = "Processor"
    SINK = "Sink"


@dataclass
class Node:
    """One vertex of the topology."""

    name: str
    kind: NodeKind
    factory: Callable[[], Processor]
    parents: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    stores: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class TopicSpec:
    """A topic the topology reads or writes. Internal topics are named without the application id;
    drivers prefix it (``<application.id>-<name>``)."""

    name: str
    internal: bool = False
    kind: str = "external"  # external | repartition | global
    partitions: int | None = None
    carries_changes: bool = False  # values are Change(new, old), written as (new, old)


@dataclass
class SubTopology:
    """A connected part of the topology; runs as one task per partition of its source topics."""

    id: int
    nodes: list[str]
    source_topics: list[str]
    sink_topics: list[str]
    stores: list[str]


class Topology:
    """What ``StreamsBuilder.build()`` returns; run it with a driver, inspect it with
    :meth:`describe`.

    >>> from streamtable import StreamsBuilder
    >>> b = StreamsBuilder()
    >>> b.stream("in").filter(lambda k, v: v).to("out")
    >>> print(b.build().describe())  # doctest: +ELLIPSIS
    Topologies:
       Sub-topology: 0
        Source: KSTREAM-SOURCE-0000000000 (topics: [in])
    ...
    """

    def __init__(
        self,
        nodes: dict[str, Node],
        stores: dict[str, StoreSpec],
        topics: dict[str, TopicSpec],
    ) -> None:
        self.nodes = nodes
        self.stores = stores
        self.topics = topics
        self.global_nodes = [n for n, node in nodes.items() if node.options.get("global")]
        self.subtopologies = self._split()
        self.global_subtopologies = self._split_global()
        self._check_copartitioning_declared()

    # -- structure -------------------------------------------------------------------------
    def _split(self) -> list[SubTopology]:
        parent: dict[str, str] = {n: n for n in self.nodes}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        def union(a: str, b: str) -> None:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[rb] = ra

        store_users: dict[str, str] = {}
        for node in self.nodes.values():
            if node.options.get("global"):
                continue
            for p in node.parents:
                union(p, node.name)
            for s in node.stores:
                if s in store_users:
                    union(store_users[s], node.name)
                else:
                    store_users[s] = node.name
        order = [n for n in self.nodes if not self.nodes[n].options.get("global")]
        groups: dict[str, list[str]] = {}
        for name in order:
            groups.setdefault(find(name), []).append(name)
        result = []
        for i, members in enumerate(sorted(groups.values(), key=lambda m: order.index(m[0]))):
            sources: list[str] = []
            sinks: list[str] = []
            stores: list[str] = []
            for name in members:
                node = self.nodes[name]
                if node.kind is NodeKind.SOURCE:
                    sources.extend(t for t in node.topics if t not in sources)
                elif node.kind is NodeKind.SINK:
                    sinks.extend(t for t in node.topics if t not in sinks)
                stores.extend(s for s in node.stores if s not in stores)
            result.append(SubTopology(i, members, sources, sinks, stores))
        return result

    def _split_global(self) -> list[SubTopology]:
        """One sub-topology per global table (its source and table source), numbered after the
        others: it generates no tasks of its own (every task reads the table whole)."""
        result: list[SubTopology] = []
        first = len(self.subtopologies)
        for name in self.global_nodes:
            node = self.nodes[name]
            if node.kind is not NodeKind.SOURCE:
                continue
            members = [name] + [c for c in node.children if self.nodes[c].options.get("global")]
            stores = [s for m in members for s in self.nodes[m].stores]
            result.append(SubTopology(first + len(result), members, list(node.topics), [],
                                      stores))
        return result

    def subtopology(self, sid: int) -> SubTopology:
        """The sub-topology (or global sub-topology) numbered ``sid``."""
        if sid < len(self.subtopologies):
            return self.subtopologies[sid]
        return self.global_subtopologies[sid - len(self.subtopologies)]

    @property
    def global_stores(self) -> dict[str, SubTopology]:
        """Store of each global table -> the global sub-topology keeping it."""
        return {s: st for st in self.global_subtopologies for s in st.stores}

    @property
    def global_topics(self) -> list[str]:
        """Topics of global tables: read whole by every task, never as partitioned input."""
        return [t for st in self.global_subtopologies for t in st.source_topics]

    @property
    def table_topics(self) -> list[str]:
        """Topics read by ``StreamsBuilder.table`` (a global table's are not). At equal
        timestamps a batch host processes their records before the others' (see
        :mod:`streamtable.engine.ordering`): a stream record then joins a table as it stands
        at its own time, updates at that time included."""
        return [t for node in self.nodes.values()
                if node.kind is NodeKind.SOURCE and node.options.get("table")
                for t in node.topics]

    def global_stores_of(self, subtopology: SubTopology) -> list[str]:
        """The global stores the processors of ``subtopology`` read: those a join names, and
        every global store when a user's processor is among them (it may read any by name, as
        in Kafka Streams)."""
        out: list[str] = []
        if subtopology in self.global_subtopologies:
            return out
        for name in subtopology.nodes:
            node = self.nodes[name]
            names = (list(self.global_stores) if node.options.get("user")
                     else node.options.get("global_stores", ()))
            for s in names:
                if s not in out:
                    out.append(s)
        return out

    def _check_copartitioning_declared(self) -> None:
        seen: dict[str, int] = {}
        for st in self.subtopologies:
            for t in st.source_topics:
                if t in seen and seen[t] != st.id:
                    raise TopologyError(
                        f"topic {t!r} is read by sub-topologies {seen[t]} and {st.id}; "
                        "read it once and share the stream or table instead"
                    )
                seen[t] = st.id

    def subtopology_of_topic(self, topic: str) -> SubTopology | None:
        """The sub-topology reading ``topic``, or None."""
        for st in self.subtopologies:
            if topic in st.source_topics:
                return st
        return None

    @property
    def source_topics(self) -> list[str]:
        """External topics the application reads."""
        return [
            t for st in self.subtopologies for t in st.source_topics if not self.topics[t].internal
        ]

    @property
    def sink_topics(self) -> list[str]:
        """External topics the application writes."""
        out: list[str] = []
        for st in self.subtopologies:
            out.extend(t for t in st.sink_topics if not self.topics[t].internal and t not in out)
        return out

    @property
    def repartition_topics(self) -> list[str]:
        """The repartition topics (internal: named without the application id)."""
        return [t.name for t in self.topics.values() if t.kind == "repartition"]

    def internal_topic_name(self, application_id: str, topic: str) -> str:
        """The real name of ``topic`` for an application: internal topics are prefixed."""
        return f"{application_id}-{topic}" if self.topics[topic].internal else topic

    # -- description -----------------------------------------------------------------------
    def describe(self, application_id: str | None = None) -> str:
        """Kafka Streams style text: sub-topologies, their nodes and stores, then the internal
        topics (repartition and changelog) the application needs, under their real names when
        ``application_id`` is given (else with a ``<application.id>-`` placeholder)."""

        def real(topic: str) -> str:
            if application_id is None:
                return topic
            return self.internal_topic_name(application_id, topic)

        lines = ["Topologies:"]
        for st in self.subtopologies:
            lines.append(f"   Sub-topology: {st.id}")
            for name in st.nodes:
                node = self.nodes[name]
                if node.kind is NodeKind.SOURCE:
                    topics = ", ".join(real(t) for t in node.topics)
                    lines.append(f"    Source: {name} (topics: [{topics}])")
                elif node.kind is NodeKind.SINK:
                    lines.append(f"    Sink: {name} (topic: {real(node.topics[0])})")
                else:
                    lines.append(f"    Processor: {name} (stores: [{', '.join(node.stores)}])")
                if node.kind is not NodeKind.SINK:
                    lines.append(f"      --> {', '.join(node.children) or 'none'}")
                if node.parents:
                    lines.append(f"      <-- {', '.join(node.parents)}")
            lines.append("")
        for st in self.global_subtopologies:
            lines.append(f"   Sub-topology: {st.id} for global store (will not generate tasks)")
            for name in st.nodes:
                node = self.nodes[name]
                if node.kind is NodeKind.SOURCE:
                    lines.append(f"    Source: {name} (topics: [{', '.join(node.topics)}])")
                else:
                    lines.append(f"    Processor: {name} (stores: [{', '.join(node.stores)}])")
                lines.append(f"      --> {', '.join(node.children) or 'none'}")
                if node.parents:
                    lines.append(f"      <-- {', '.join(node.parents)}")
            lines.append("")
        internal = [t for t in self.topics.values() if t.internal]
        changelogs = [s for s in self.stores.values() if s.logging]
        if internal or changelogs:
            prefix = "<application.id>-" if application_id is None else f"{application_id}-"
            lines.append("Internal topics:" if application_id else
                         "Internal topics (prefixed with <application.id>-):")
            shown = prefix if application_id else ""
            for t in internal:
                lines.append(f"    {t.kind}: {shown}{t.name}")
            for s in changelogs:
                lines.append(f"    changelog: {shown}{s.name}-changelog (store: {s.name})")
        return "\n".join(lines).rstrip() + "\n"

    def __str__(self) -> str:
        return self.describe()
