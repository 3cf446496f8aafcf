"""What a store's entries and an output's records mean, as digests that two versions of a
topology can compare: a store is the same store in a new version when its name, its spec
(kind, serdes, windows) and its upstream (every operator, topic and serde its writers' records
come through, back to the input topics) are the same.

Functions inside operators do not count (a mapper's body can change; the state is kept as
it is), nor do node names (Kafka Streams' counters, which shift) or store names upstream (a
renamed store upstream computes the same thing).

>>> from streamtable import StreamsBuilder
>>> def app(filtered):
...     b = StreamsBuilder()
...     words = b.stream("words")
...     (words.filter(lambda k, v: v) if filtered else words).group_by_key().count("counts")
...     return b.build()
>>> store_signatures(app(False))["counts"] == store_signatures(app(False))["counts"]
True
>>> store_signatures(app(False))["counts"] == store_signatures(app(True))["counts"]
False
"""

from __future__ import annotations

import hashlib
from typing import Any

from streamtable.state.spec import StoreSpec
from streamtable.topology.graph import NodeKind, Topology

__all__ = ["output_signatures", "output_stores", "store_signatures", "store_spec_signature",
           "upstream_signatures"]


def _sha(*parts: Any) -> str:
    return hashlib.sha1("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:16]


def _serde(serde: Any) -> str:
    return "default" if serde is None else str(getattr(serde, "name", type(serde).__name__))


def store_spec_signature(spec: StoreSpec) -> str:
    """The store's own spec: its kind, serdes and settings (windows, retention)."""
    return _sha(spec.kind, _serde(spec.key_serde), _serde(spec.value_serde), spec.params,
                spec.timestamped, spec.window_size_ms, spec.retention_ms, spec.retain_duplicates)


class _Signatures:
    """Node signatures of one topology, each computed once."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.memo: dict[str, str] = {}
        self.writers_of_topic: dict[str, list[str]] = {}
        self.writers_of_store: dict[str, list[str]] = {}
        for name, node in topology.nodes.items():
            if node.kind is NodeKind.SINK:
                for t in node.topics:
                    self.writers_of_topic.setdefault(t, []).append(name)
            reads = set(node.options.get("reads", ()))
            for s in node.stores:
                if s not in reads:
                    self.writers_of_store.setdefault(s, []).append(name)

    def store(self, name: str) -> str:
        """What the store's writers make of their inputs."""
        spec = self.topology.stores[name]
        return _sha(store_spec_signature(spec),
                    *sorted(self.node(w) for w in self.writers_of_store.get(name, ())))

    def node(self, name: str) -> str:
        found = self.memo.get(name)
        if found is not None:
            return found
        self.memo[name] = "cycle"  # an FK join's result joined back to its table
        topo = self.topology
        node = topo.nodes[name]
        parts: list[str] = [node.kind.value, str(node.options.get("op", ""))]
        for t in node.topics:
            spec = topo.topics[t]
            if not spec.internal:
                parts.append(f"topic {t}")
            else:
                parts.append(f"internal {spec.kind} {spec.partitions} {spec.carries_changes}")
                if node.kind is NodeKind.SOURCE:
                    parts += sorted(self.node(w) for w in self.writers_of_topic.get(t, ()))
        if node.kind is not NodeKind.PROCESSOR:
            parts += [_serde(node.key_serde), _serde(node.value_serde)]
        reads = set(node.options.get("reads", ())) | set(node.options.get("global_stores", ()))
        for s in node.stores:
            if s not in reads:
                parts.append("writes " + store_spec_signature(topo.stores[s]))
        for s in sorted(reads):
            parts.append("reads " + self.store(s))  # what the join looks up means something
        parts += [self.node(p) for p in node.parents]
        self.memo[name] = _sha(*parts)
        return self.memo[name]


def store_signatures(topology: Topology) -> dict[str, str]:
    """Store name -> the digest of its spec and its whole upstream."""
    sigs = _Signatures(topology)
    return {name: sigs.store(name) for name in topology.stores}


def upstream_signatures(topology: Topology) -> dict[str, str]:
    """Store name -> the digest of its writers' upstream alone (without its own spec)."""
    sigs = _Signatures(topology)
    return {name: _sha(*sorted(sigs.node(w) for w in sigs.writers_of_store.get(name, ())))
            for name in topology.stores}


def output_stores(topology: Topology) -> dict[str, list[str]]:
    """External output topic -> the stores its records are computed through (written by an
    operator upstream of its sinks)."""
    sigs = _Signatures(topology)

    def upstream(names: list[str]) -> set[str]:
        seen: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            node = topology.nodes[name]
            todo += node.parents
            for t in node.topics:
                if node.kind is NodeKind.SOURCE and topology.topics[t].internal:
                    todo += sigs.writers_of_topic.get(t, [])
        return seen

    out = {}
    for t in topology.sink_topics:
        nodes = upstream(sigs.writers_of_topic.get(t, []))
        out[t] = sorted({s for n in nodes for s in topology.nodes[n].stores
                         if s not in topology.nodes[n].options.get("reads", ())})
    return out


def output_signatures(topology: Topology) -> dict[str, str]:
    """External output topic -> the digest of the sinks writing it and their upstream."""
    sigs = _Signatures(topology)
    return {t: _sha(*sorted(sigs.node(w) for w in sigs.writers_of_topic.get(t, ())))
            for t in topology.sink_topics}
