"""Diagrams of a topology, in Mermaid or Graphviz DOT: sub-topologies as boxes, stores as
cylinders, external topics as parallelograms, repartition topics as labelled edges between
sub-topologies. The nodes of one operation (a foreign-key join's dozen generated nodes and
stores) are drawn as one box per sub-topology.

>>> from streamtable import StreamsBuilder
>>> b = StreamsBuilder()
>>> b.stream("in", named="read").filter(lambda k, v: v, named="keep").to("out", named="write")
>>> print(mermaid(b.build(), "app"))
---
title: app
---
flowchart LR
  t0[/"in"/]
  t1[/"out"/]
  subgraph st0["Sub-topology 0"]
    n0["read"]
    n1["keep"]
    n2["write"]
  end
  t0 --> n0
  n0 --> n1
  n1 --> n2
  n2 --> t1
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamtable.topology.graph import NodeKind, Topology

__all__ = ["Diagram", "layout", "mermaid", "dot"]


@dataclass
class Diagram:
    """What a drawing shows: ``boxes`` (id, label, shape) per sub-topology, ``stores`` (id,
    name) per sub-topology, external ``topics`` (id, name), and ``edges`` (from, to, label,
    style) where style is ``flow`` or ``store``."""

    title: str
    boxes: dict[int, list[tuple[str, str, str]]] = field(default_factory=dict)
    stores: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    topics: list[tuple[str, str]] = field(default_factory=list)
    edges: list[tuple[str, str, str | None, str]] = field(default_factory=list)


def layout(topology: Topology, application_id: str) -> Diagram:
    """The boxes and edges of ``topology`` as the application ``application_id`` runs it."""
    diagram = Diagram(application_id)
    box_of: dict[str, str] = {}
    operation_boxes: set[str] = set()
    for st in topology.subtopologies:
        boxes = diagram.boxes.setdefault(st.id, [])
        groups: dict[str, str] = {}
        for name in st.nodes:
            operation = topology.nodes[name].options.get("operation")
            if operation is not None and operation in groups:
                box_of[name] = groups[operation]
                continue
            box = f"n{sum(len(b) for b in diagram.boxes.values())}"
            box_of[name] = box
            if operation is not None:
                groups[operation] = box
                operation_boxes.add(box)
                boxes.append((box, operation, "operation"))
            else:
                boxes.append((box, name, "node"))

    def edge(a: str, b: str, label: str | None = None, style: str = "flow") -> None:
        if a != b and (a, b, label, style) not in diagram.edges:
            diagram.edges.append((a, b, label, style))

    topic_ids: dict[str, str] = {}
    for name in topology.topics:
        if not topology.topics[name].internal:
            topic_ids[name] = f"t{len(topic_ids)}"
            diagram.topics.append((topic_ids[name], name))
    readers: dict[str, list[str]] = {}
    for node in topology.nodes.values():
        if node.kind is NodeKind.SOURCE:
            for t in node.topics:
                readers.setdefault(t, []).append(node.name)
    for st in topology.subtopologies:
        for name in st.nodes:
            node = topology.nodes[name]
            if node.kind is NodeKind.SOURCE:
                for t in node.topics:
                    if t in topic_ids:
                        edge(topic_ids[t], box_of[name])
            for child in node.children:
                edge(box_of[name], box_of[child])
            if node.kind is NodeKind.SINK:
                t = node.topics[0]
                if t in topic_ids:
                    edge(box_of[name], topic_ids[t])
                else:
                    real = topology.internal_topic_name(application_id, t)
                    for reader in readers.get(t, []):
                        edge(box_of[name], box_of[reader], real)
    for st in topology.subtopologies:
        for store in st.stores:
            users = [box_of[n] for n in st.nodes if store in topology.nodes[n].stores]
            user_boxes = list(dict.fromkeys(users))
            hidden = (not topology.stores[store].queryable and len(user_boxes) == 1
                      and user_boxes[0] in operation_boxes)
            if hidden:
                continue
            sid = f"s{sum(len(s) for s in diagram.stores.values())}"
            diagram.stores.setdefault(st.id, []).append((sid, store))
            for box in user_boxes:
                edge(box, sid, None, "store")
    return diagram


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;")


def mermaid(topology: Topology, application_id: str) -> str:
    """A Mermaid flowchart of ``topology`` (paste it in a ```` ```mermaid ```` block)."""
    d = layout(topology, application_id)
    shapes = {"node": '["{}"]', "operation": '[["{}"]]'}
    lines = ["---", f"title: {d.title}", "---", "flowchart LR"]
    lines += [f'  {tid}[/"{_mermaid_text(name)}"/]' for tid, name in d.topics]
    for st in topology.subtopologies:
        lines.append(f'  subgraph st{st.id}["Sub-topology {st.id}"]')
        for box, label, kind in d.boxes[st.id]:
            lines.append(f"    {box}{shapes[kind].format(_mermaid_text(label))}")
        for sid, name in d.stores.get(st.id, []):
            lines.append(f'    {sid}[("{_mermaid_text(name)}")]')
        lines.append("  end")
    for a, b, topic, style in d.edges:
        if style == "store":
            lines.append(f"  {a} -.- {b}")
        elif topic:
            lines.append(f'  {a} -->|"{_mermaid_text(topic)}"| {b}')
        else:
            lines.append(f"  {a} --> {b}")
    return "\n".join(lines)


def _dot_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dot(topology: Topology, application_id: str) -> str:
    """A Graphviz DOT digraph of ``topology`` (``dot -Tsvg``)."""
    d = layout(topology, application_id)
    shapes = {"node": "box", "operation": "box3d"}
    lines = [f"digraph {_dot_text(d.title)} {{", "  rankdir=LR;",
             '  node [fontname="Helvetica", fontsize=10];']
    lines += [f"  {tid} [label={_dot_text(name)}, shape=parallelogram];"
              for tid, name in d.topics]
    for st in topology.subtopologies:
        lines.append(f"  subgraph cluster_{st.id} {{")
        lines.append(f'    label="Sub-topology {st.id}";')
        for box, label, kind in d.boxes[st.id]:
            lines.append(f"    {box} [label={_dot_text(label)}, shape={shapes[kind]}];")
        for sid, name in d.stores.get(st.id, []):
            lines.append(f"    {sid} [label={_dot_text(name)}, shape=cylinder];")
        lines.append("  }")
    for a, b, topic, style in d.edges:
        if style == "store":
            lines.append(f"  {a} -> {b} [dir=none, style=dashed];")
        elif topic:
            lines.append(f"  {a} -> {b} [label={_dot_text(topic)}];")
        else:
            lines.append(f"  {a} -> {b};")
    lines.append("}")
    return "\n".join(lines)
