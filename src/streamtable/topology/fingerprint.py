"""The shape of a topology kept with a run's state, so that a restart with a changed topology
keeps, builds or drops each store instead of reading state written for another topology (see
:mod:`streamtable.topology.evolution`).

What counts: the sub-topologies, their nodes (name, kind, topics, stores, parents) and the stores
(name, kind). Functions inside the nodes do not: changing a mapper's body keeps the shape.

>>> from streamtable import StreamsBuilder
>>> b = StreamsBuilder()
>>> b.stream("in").group_by_key().count(materialized="counts")  # doctest: +ELLIPSIS
<...>
>>> old = topology_fingerprint(b.build())
>>> b2 = StreamsBuilder()
>>> b2.stream("in").group_by_key().count(materialized="totals")  # doctest: +ELLIPSIS
<...>
>>> fingerprint_diff(old, topology_fingerprint(b2.build()))[:2]
["store 'counts' (key-value) removed", "store 'totals' (key-value) added"]
"""

from __future__ import annotations

import logging
from typing import Any

from streamtable.errors import TopologyError
from streamtable.topology.graph import Topology
from streamtable.topology.signature import (
    output_signatures,
    output_stores,
    store_spec_signature,
    upstream_signatures,
)

log = logging.getLogger(__name__)

__all__ = ["TopologyChangedError", "fingerprint_diff", "legacy_fingerprint",
           "topology_fingerprint"]


class TopologyChangedError(TopologyError):
    """The topology differs from the one the application's state was written for."""


#: how the keys of internal topics are written (they decide the task a record goes to): kept
#: with a topology that has internal topics, so that state whose keys were routed another way
#: is not read as if they had been routed this way
INTERNAL_KEYS = "marshal-2"


#: the format of the fingerprint written now: ``state`` (per store: kind, spec and upstream
#: digests, sub-topology, legacy name) and ``outputs`` (per output topic: its digest) beside the
#: shape of format 1 (kept as it was, so that either format reads the other's shape)
FORMAT = 2


def topology_fingerprint(topology: Topology) -> dict[str, Any]:
    """A JSON-able description of the topology's shape (see the module doc) and of what each
    store and output means (:mod:`streamtable.topology.signature`)."""
    upstream = upstream_signatures(topology)
    outputs = output_signatures(topology)
    sids = {s: st.id for st in topology.subtopologies + topology.global_subtopologies
            for s in st.stores}
    return {
        **_shape(topology),
        "format": FORMAT,
        "state": {name: {"kind": spec.kind, "spec": store_spec_signature(spec),
                         "upstream": upstream[name], "subtopology": sids.get(name),
                         "queryable": spec.queryable, "legacy": spec.legacy_name}
                  for name, spec in sorted(topology.stores.items())},
        "outputs": dict(sorted(outputs.items())),
        "output_stores": output_stores(topology),
        "inputs": sorted(topology.source_topics + topology.global_topics),
        # to read state written before stable store names (see topology.evolution)
        "legacy_shape": legacy_fingerprint(topology),
    }


def legacy_fingerprint(topology: Topology) -> dict[str, Any]:
    """The fingerprint streamtable wrote for ``topology`` before stable store names (format
    1): its generated stores, and the internal topics named after them, under their counter
    names."""
    names = {n: spec.legacy_name for n, spec in topology.stores.items() if spec.legacy_name}

    def topic(t: str) -> str:
        for new, old in names.items():
            if t.startswith(new):
                return old + t[len(new):]
        return t

    shape = _shape(topology)
    shape["stores"] = {names.get(n, n): kind for n, kind in shape["stores"].items()}
    for st in shape["subtopologies"]:
        for node in st["nodes"].values():
            node["stores"] = [names.get(s, s) for s in node["stores"]]
            node["topics"] = [topic(t) for t in node["topics"]]
    return shape


def _shape(topology: Topology) -> dict[str, Any]:
    routed = any(spec.internal for spec in topology.topics.values())
    return {
        **({"internal_keys": INTERNAL_KEYS} if routed else {}),
        "stores": {name: spec.kind for name, spec in sorted(topology.stores.items())},
        "subtopologies": [
            {"id": st.id,
             "nodes": {name: {"kind": topology.nodes[name].kind.value,
                              "topics": list(topology.nodes[name].topics),
                              "stores": list(topology.nodes[name].stores),
                              "parents": list(topology.nodes[name].parents)}
                       for name in st.nodes}}
            for st in topology.subtopologies
        ],
    }


def _nodes(fp: dict[str, Any]) -> dict[str, tuple[int, dict[str, Any]]]:
    return {name: (st["id"], node) for st in fp["subtopologies"]
            for name, node in st["nodes"].items()}


def fingerprint_diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What changed from ``old`` to ``new``, one phrase per change (empty: the same shape).

    >>> fingerprint_diff({"stores": {}, "subtopologies": []},
    ...                  {"stores": {"s": "window"}, "subtopologies": []})
    ["store 's' (window) added"]
    """
    changes: list[str] = []
    if old.get("internal_keys") != new.get("internal_keys") and new.get("internal_keys"):
        changes.append("the keys of internal topics are written another way (before "
                       f"{INTERNAL_KEYS}, equal keys made in different ways could reach "
                       "different tasks), so the state behind them must be rebuilt")
    old_stores, new_stores = old.get("stores", {}), new.get("stores", {})
    for name in sorted(old_stores.keys() - new_stores.keys()):
        changes.append(f"store {name!r} ({old_stores[name]}) removed")
    for name in sorted(new_stores.keys() - old_stores.keys()):
        changes.append(f"store {name!r} ({new_stores[name]}) added")
    for name in sorted(old_stores.keys() & new_stores.keys()):
        if old_stores[name] != new_stores[name]:
            changes.append(f"store {name!r} changed from {old_stores[name]} to "
                           f"{new_stores[name]}")
    old_nodes, new_nodes = _nodes(old), _nodes(new)
    for name in sorted(old_nodes.keys() - new_nodes.keys()):
        changes.append(f"node {name} ({old_nodes[name][1]['kind']}) removed")
    for name in sorted(new_nodes.keys() - old_nodes.keys()):
        changes.append(f"node {name} ({new_nodes[name][1]['kind']}) added")
    for name in sorted(old_nodes.keys() & new_nodes.keys()):
        (old_st, was), (new_st, now) = old_nodes[name], new_nodes[name]
        if old_st != new_st:
            changes.append(f"node {name} moved from sub-topology {old_st} to {new_st}")
        for what in ("kind", "topics", "stores", "parents"):
            if was.get(what) != now.get(what):
                changes.append(f"node {name}: {what} {was.get(what)} -> {now.get(what)}")
    if not changes and len(old["subtopologies"]) != len(new["subtopologies"]):
        changes.append(f"{len(old['subtopologies'])} sub-topologies became "
                       f"{len(new['subtopologies'])}")
    return changes
