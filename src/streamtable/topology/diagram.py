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

from collections.abc import Callable
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


@dataclass(frozen=True)
class _Notation:
    """How one diagram language writes the lines of a :class:`Diagram`: format strings whose
    texts (``name``, ``label``, ``topic``, ``quoted_title``) ``quote`` has made safe for the
    language (``{title}`` stands as given); ``end`` and ``tail`` are lines as they are."""

    quote: Callable[[str], str]
    head: tuple[str, ...]  # {title}, {quoted_title}
    topic: str  # {id}, {name}
    subgraph: tuple[str, ...]  # {st}: the sub-topology's id
    boxes: dict[str, str]  # per box kind: {id}, {label}
    store: str  # {id}, {name}
    end: str
    flow: str  # {a}, {b}
    repartition: str  # {a}, {b}, {topic}
    store_use: str  # {a}, {b}
    tail: tuple[str, ...] = ()


def _draw(d: Diagram, notation: _Notation) -> str:
    """``d`` in ``notation``: topics, then each sub-topology's boxes and stores, then edges."""
    q = notation.quote
    lines = [line.format(title=d.title, quoted_title=q(d.title)) for line in notation.head]
    lines += [notation.topic.format(id=tid, name=q(name)) for tid, name in d.topics]
    for st, boxes in d.boxes.items():
        lines += [line.format(st=st) for line in notation.subgraph]
        lines += [notation.boxes[kind].format(id=box, label=q(label))
                  for box, label, kind in boxes]
        lines += [notation.store.format(id=sid, name=q(name))
                  for sid, name in d.stores.get(st, [])]
        lines.append(notation.end)
    for a, b, topic, style in d.edges:
        if style == "store":
            lines.append(notation.store_use.format(a=a, b=b))
        elif topic:
            lines.append(notation.repartition.format(a=a, b=b, topic=q(topic)))
        else:
            lines.append(notation.flow.format(a=a, b=b))
    return "\n".join(lines + list(notation.tail))


def _mermaid_text(text: str) -> str:
    return '"' + text.replace('"', "#quot;") + '"'


_MERMAID = _Notation(
    quote=_mermaid_text,
    head=("---", "title: {title}", "---", "flowchart LR"),
    topic="  {id}[/{name}/]",
    subgraph=('  subgraph st{st}["Sub-topology {st}"]',),
    boxes={"node": "    {id}[{label}]", "operation": "    {id}[[{label}]]"},
    store="    {id}[({name})]",
    end="  end",
    flow="  {a} --> {b}",
    repartition="  {a} -->|{topic}| {b}",
    store_use="  {a} -.- {b}",
)


def _dot_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


_DOT = _Notation(
    quote=_dot_text,
    head=("digraph {quoted_title} {{", "  rankdir=LR;",
          '  node [fontname="Helvetica", fontsize=10];'),
    topic="  {id} [label={name}, shape=parallelogram];",
    subgraph=("  subgraph cluster_{st} {{", '    label="Sub-topology {st}";'),
    boxes={"node": "    {id} [label={label}, shape=box];",
           "operation": "    {id} [label={label}, shape=box3d];"},
    store="    {id} [label={name}, shape=cylinder];",
    end="  }",
    flow="  {a} -> {b};",
    repartition="  {a} -> {b} [label={topic}];",
    store_use="  {a} -> {b} [dir=none, style=dashed];",
    tail=("}",),
)


def mermaid(topology: Topology, application_id: str) -> str:
    """A Mermaid flowchart of ``topology`` (paste it in a ```` ```mermaid ```` block)."""
    return _draw(layout(topology, application_id), _MERMAID)


def dot(topology: Topology, application_id: str) -> str:
    """A Graphviz DOT digraph of ``topology`` (``dot -Tsvg``)."""
    return _draw(layout(topology, application_id), _DOT)
