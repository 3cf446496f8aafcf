"""The logical graph a StreamsBuilder produces: nodes, stores, topics and sub-topologies."""

from streamtable.topology.graph import (
    Node,
    NodeKind,
    StoreSpec,
    SubTopology,
    TopicSpec,
    Topology,
)

__all__ = ["Node", "NodeKind", "StoreSpec", "SubTopology", "TopicSpec", "Topology"]
