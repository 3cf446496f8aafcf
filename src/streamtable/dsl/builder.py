"""StreamsBuilder: the entry point of the DSL."""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamtable.dsl.materialized import Materialized, as_materialized
from streamtable.dsl.stores import VersionedKeyValueStoreSupplier
from streamtable.errors import TopologyError
from streamtable.processors.api import Processor
from streamtable.processors.io import SinkProcessor, SourceProcessor, TimestampExtractor
from streamtable.serde import Serde, serde_from
from streamtable.topology.graph import Node, NodeKind, StoreSpec, TopicSpec, Topology

if TYPE_CHECKING:
    from streamtable.dsl.global_table import GlobalKTable
    from streamtable.dsl.stores import StoreBuilder
    from streamtable.dsl.stream import KStream
    from streamtable.dsl.table import KTable


def with_key(fn: Callable[..., Any], name: str) -> Callable[[Any, Any], Any]:
    """Adapt ``fn(value)`` or ``fn(key, value)`` to the two-argument form."""
    try:
        params = [
            p for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
        varargs = any(p.kind is p.VAR_POSITIONAL for p in inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return lambda k, v: fn(v)
    if len(params) >= 2 or varargs:
        return fn
    if len(params) == 1:
        return lambda k, v: fn(v)
    raise TypeError(f"{name} expects a function of (value) or (key, value)")


_PACKAGE = str(Path(__file__).resolve().parents[1]) + os.sep


def _declaration() -> dict[str, Any]:
    """The DSL method the user called to make the node being added (the outermost
    streamtable frame on the stack) and where they called it (the frame that called it), so
    that an error names the operator as the user wrote it (see ``engine/blame.py``). Read
    once per node while the topology is built."""
    frame = sys._getframe(1)
    method = None
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        method = frame.f_code.co_name
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None or method is None:
        return {}
    return {"operator": method, "declared_at": (frame.f_code.co_filename, frame.f_lineno)}


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def params_text(*params: Any) -> str:
    """What decides the meaning of a store's entries besides its upstream (windows, a
    suppression's settings), as text that is the same for equal settings in any process.

    >>> from streamtable import TimeWindows
    >>> params_text(TimeWindows.of(60_000))
    'TimeWindows(size=60000, advance=60000, grace=0)'
    """
    text = ", ".join(repr(p) for p in params)
    return re.sub(r" at 0x[0-9a-fA-F]+", "", text)


def _maybe_serde(spec: Serde | str | None, key: bool = False) -> Serde | None:
    return None if spec is None else serde_from(spec, key=key)


def table_source(store: StoreSpec) -> Callable[[], Processor]:
    """The factory of the processor that keeps a table in ``store``: a versioned store's
    source puts each record as a version (KIP-914)."""
    from streamtable.processors.table import TableSource, VersionedTableSource

    name = store.name
    if store.kind == "versioned":
        return lambda: VersionedTableSource(name)
    return lambda: TableSource(name)


def _table_serdes(materialized: Materialized | str | None, key_serde: Serde | str | None,
                  value_serde: Serde | str | None
                  ) -> tuple[Materialized | str | None, Serde | str | None, Serde | str | None]:
    """The serdes a table's source reads its topic with, and its store's ``materialized``:
    a serde the source does not name comes from ``materialized``, and the store keeps what
    the source reads (Kafka Streams' ``StreamsBuilder.table``/``globalTable``)."""
    mat = as_materialized(materialized)
    if mat is None:
        return materialized, key_serde, value_serde
    key_serde = mat.key_serde if key_serde is None else key_serde
    value_serde = mat.value_serde if value_serde is None else value_serde
    return replace(mat, key_serde=key_serde, value_serde=value_serde), key_serde, value_serde


class StreamsBuilder:
    """Builds a topology from streams and tables.

    >>> builder = StreamsBuilder()
    >>> counts = (builder.stream("text")
    ...     .flat_map_values(lambda line: line.lower().split())
    ...     .group_by(lambda key, word: word)
    ...     .count(materialized="counts-store"))
    >>> counts.to_stream().to("word-counts")
    >>> topology = builder.build()
    """

    def __init__(self) -> None:
        self._nodes: dict[str, Node] = {}
        self._stores: dict[str, StoreSpec] = {}
        self._topics: dict[str, TopicSpec] = {}
        self._index = 0
        self._ops: dict[str, str] = {}  # node name -> the operator (prefix) that made it
        # generated store names made so far per (prefix, upstream): the ordinal of the next
        self._generated: dict[tuple[str, str], int] = {}

    # -- naming and graph ------------------------------------------------------------------
    def new_name(self, prefix: str, named: str | None = None) -> str:
        if named is not None:
            if named in self._nodes:
                raise TopologyError(f"a processor named {named!r} already exists")
            self._ops[named] = prefix
            return named
        name = f"{prefix}-{self._index:010d}"
        self._index += 1
        self._ops[name] = prefix
        return name

    def generated_store_name(self, prefix: str, upstream: Iterable[str], *, suffix: str = "",
                             legacy: str | None = None) -> tuple[str, str]:
        """A name for a store the user did not name, and its name before stable names
        (``legacy``, by default Kafka Streams' counter: ``<prefix>-0000000003<suffix>``).

        Kafka Streams numbers generated names by position in the topology, so adding an
        operator anywhere before a store renames it (KIP-1111). Here the number is a digest of
        what the store is computed from: the input topics and the stateful operators upstream
        (``upstream``: the nodes feeding the store's operator), and the store's operator.
        Adding a branch elsewhere, or stateless operators upstream, keeps the name (the latter
        changes the store's meaning, which :mod:`streamtable.topology.evolution` detects from
        the whole upstream). Stores with the same derivation are numbered in the order they
        are built.

        >>> b = StreamsBuilder()
        >>> words = b.stream("words")
        >>> counts = words.group_by_key().count()
        >>> b2 = StreamsBuilder()
        >>> words2 = b2.stream("words")
        >>> words2.filter(lambda k, v: v).to("non-empty")     # a new branch
        >>> counts2 = words2.group_by_key().count()
        >>> list(b.build().stores) == list(b2.build().stores)
        True
        """
        old = legacy if legacy is not None else self.new_name(prefix) + suffix
        seen: dict[str, str] = {}
        derivation = "|".join([prefix, *(self._skeleton(n, seen) for n in upstream)])
        ordinal = self._generated.get((prefix, derivation), 0)
        self._generated[(prefix, derivation)] = ordinal + 1
        digest = _sha(f"{derivation}#{ordinal}")[:10]
        return f"{prefix}-{digest}{suffix}", old

    def _skeleton(self, name: str, seen: dict[str, str]) -> str:
        """A digest of what node ``name``'s records are computed from: its input topics and
        the stateful operators (and their stores) upstream; stateless operators and
        repartitions pass their parents' through."""
        if name in seen:
            return seen[name]
        seen[name] = ""  # a cycle (FK joins back to their table) ends here
        node = self._nodes[name]
        if node.kind is NodeKind.SOURCE:
            internal = [t for t in node.topics if self._topics[t].internal]
            if internal:
                writers = [n for n, w in self._nodes.items()
                           if w.kind is NodeKind.SINK and set(w.topics) & set(internal)]
                parts = [self._skeleton(w, seen) for w in writers]
                digest = parts[0] if len(parts) == 1 else _sha("+".join(parts))
            else:
                digest = _sha("source:" + ",".join(node.topics))
        else:
            parents = [self._skeleton(p, seen) for p in node.parents]
            # a node passing its one parent's records through has that parent's digest
            digest = parents[0] if len(parents) == 1 and not node.stores else _sha(
                f"{self._ops.get(name, '')}[{','.join(sorted(node.stores))}]"
                f"({'+'.join(parents)})")
        seen[name] = digest
        return digest

    def add_node(
        self,
        name: str,
        factory: Callable[[], Processor],
        parents: Iterable[str] = (),
        *,
        kind: NodeKind = NodeKind.PROCESSOR,
        stores: Iterable[str] = (),
        topics: Iterable[str] = (),
        reads: Iterable[str] = (),
    ) -> Node:
        """Add a node; ``reads``: those of its ``stores`` it only reads (a join's look-ups), so
        that a store's meaning is what its writers make of their inputs."""
        node = Node(name, kind, factory, list(parents), [], list(stores), list(topics))
        node.options.update(_declaration())
        node.options["op"] = self._ops.get(name, "")
        if reads:
            node.options["reads"] = list(reads)
        for p in node.parents:
            self._nodes[p].children.append(name)
        self._nodes[name] = node
        return node

    def add_store(
        self, materialized: Materialized | str | None, generated_prefix: str,
        upstream: Iterable[str] = (), legacy_prefix: str | None = None, *,
        versioned_ok: bool = False,
    ) -> StoreSpec:
        """A store named by ``materialized``, or else a generated name derived from the
        ``upstream`` nodes feeding it (see :meth:`generated_store_name`; ``legacy_prefix``: the
        counter name's prefix before stable names, when not ``generated_prefix``).
        ``versioned_ok``: whether the operation may keep its table in a versioned store (a
        table's source, ``to_table``, ``filter`` and ``map_values``; Kafka Streams advises
        against it for aggregations and joins, whose results have no version history)."""
        mat = as_materialized(materialized) or Materialized()
        name, legacy = mat.name, None
        if name is None:
            name, legacy = self.generated_store_name(
                generated_prefix, upstream,
                legacy=self.new_name(legacy_prefix) if legacy_prefix else None)
        if name in self._stores:
            raise TopologyError(f"a store named {name!r} already exists")
        spec = StoreSpec(
            name=name,
            caching=mat.caching,
            logging=mat.logging,
            queryable=mat.name is not None,
            key_serde=_maybe_serde(mat.key_serde, key=True),
            value_serde=_maybe_serde(mat.value_serde),
            legacy_name=legacy,
        )
        supplier = mat.supplier
        if isinstance(supplier, VersionedKeyValueStoreSupplier):
            if not versioned_ok:
                raise TopologyError(
                    f"store {name!r} is a versioned store, which only a table's source, "
                    "to_table, filter, filter_not and map_values may be materialized in: an "
                    "aggregation's or a join's results have no complete version history "
                    "(Kafka Streams' KIP-914)")
            # Kafka Streams' versioned stores have no record cache: every update is forwarded
            spec.kind, spec.caching = "versioned", False
            spec.retention_ms = supplier.history_retention_ms
            spec.segment_interval_ms = supplier.segment_interval_ms
        self._stores[name] = spec
        return spec

    def add_state_store(self, store: StoreBuilder) -> StoreSpec:
        """Add a user's store (see :class:`~streamtable.dsl.stores.Stores`), for processors that
        name it: ``stream.process(MyProcessor, store.name)``.

        >>> from streamtable.dsl.stores import Stores
        >>> b = StreamsBuilder()
        >>> b.add_state_store(Stores.key_value_store_builder(
        ...     Stores.in_memory_key_value_store("last-state"))).name
        'last-state'
        """
        if store.name in self._stores:
            raise TopologyError(f"a store named {store.name!r} already exists")
        spec = StoreSpec(name=store.name, kind=store.kind, caching=False,
                         logging=store.logging, queryable=store.queryable,
                         key_serde=_maybe_serde(store.key_serde, key=True),
                         value_serde=_maybe_serde(store.value_serde),
                         timestamped=store.timestamped, headers=store.headers,
                         window_size_ms=store.window_size_ms,
                         retention_ms=store.retention_ms,
                         retain_duplicates=store.retain_duplicates,
                         segment_interval_ms=store.segment_interval_ms)
        self._stores[store.name] = spec
        return spec

    def add_topic(self, name: str, *, internal: bool = False, kind: str = "external",
                  partitions: int | None = None) -> None:
        existing = self._topics.get(name)
        if existing is not None and existing.internal != internal:
            raise TopologyError(f"topic {name!r} is used both as internal and external")
        if existing is None:
            self._topics[name] = TopicSpec(name, internal, kind, partitions)

    def add_source(
        self,
        topics: list[str],
        key_serde: Serde | str | None,
        value_serde: Serde | str | None,
        timestamp_extractor: TimestampExtractor | None = None,
        named: str | None = None,
        internal: bool = False,
    ) -> str:
        for t in topics:
            for node in self._nodes.values():
                if node.kind is NodeKind.SOURCE and t in node.topics:
                    raise TopologyError(f"topic {t!r} is already read by {node.name}")
            self.add_topic(t, internal=internal, kind="repartition" if internal else "external")
        name = self.new_name("KSTREAM-SOURCE", named)
        ks, vs = _maybe_serde(key_serde, key=True), _maybe_serde(value_serde)
        node = self.add_node(
            name,
            lambda: SourceProcessor(ks, vs, timestamp_extractor),
            kind=NodeKind.SOURCE,
            topics=topics,
        )
        node.key_serde, node.value_serde = ks, vs
        return name

    def source_of(self, node: str) -> Node:
        """The source node a node's records come from (first parent chain)."""
        current = self._nodes[node]
        while current.kind is not NodeKind.SOURCE:
            current = self._nodes[current.parents[0]]
        return current

    def add_sink(
        self,
        parent: str,
        topic: str,
        key_serde: Serde | str | None = None,
        value_serde: Serde | str | None = None,
        partitioner: Any = None,
        named: str | None = None,
        internal: bool = False,
    ) -> str:
        self.add_topic(topic, internal=internal, kind="repartition" if internal else "external")
        name = self.new_name("KSTREAM-SINK", named)
        ks, vs = _maybe_serde(key_serde, key=True), _maybe_serde(value_serde)
        node = self.add_node(
            name,
            lambda: SinkProcessor(topic, ks, vs, partitioner),
            [parent],
            kind=NodeKind.SINK,
            topics=[topic],
        )
        node.key_serde, node.value_serde = ks, vs
        return name

    def repartition(
        self,
        parent: str,
        topic_base: str,
        key_serde: Serde | str | None = None,
        value_serde: Serde | str | None = None,
        partitions: int | None = None,
        carries_changes: bool = False,
    ) -> str:
        """Sink to and source from the internal topic ``<topic_base>-repartition``; returns the
        source node's name."""
        topic = f"{topic_base}-repartition"
        self.add_sink(parent, topic, key_serde, value_serde, internal=True)
        self._topics[topic].partitions = partitions
        self._topics[topic].carries_changes = carries_changes
        return self.add_source([topic], key_serde, value_serde, internal=True)

    # -- entry points ----------------------------------------------------------------------
    def stream(
        self,
        topics: str | list[str],
        *,
        key_serde: Serde | str | None = None,
        value_serde: Serde | str | None = None,
        timestamp_extractor: TimestampExtractor | None = None,
        named: str | None = None,
    ) -> KStream:
        """A KStream of one or more topics (every record is an independent event)."""
        from streamtable.dsl.stream import KStream

        topic_list = [topics] if isinstance(topics, str) else list(topics)
        name = self.add_source(topic_list, key_serde, value_serde, timestamp_extractor, named)
        return KStream(self, name)

    def table(
        self,
        topic: str,
        materialized: Materialized | str | None = None,
        *,
        key_serde: Serde | str | None = None,
        value_serde: Serde | str | None = None,
        timestamp_extractor: TimestampExtractor | None = None,
        named: str | None = None,
    ) -> KTable:
        """A KTable of a (compacted) topic: each record upserts its key, a ``None`` value deletes
        it. The table is kept in a store, named by ``materialized`` to make it queryable. The
        topic is read with ``key_serde`` and ``value_serde``, or, where they are not given,
        with the serdes of ``materialized`` (then the application's defaults).

        >>> from streamtable import Materialized
        >>> builder = StreamsBuilder()
        >>> positions = builder.table("share-holders", materialized="share-holder-store")
        >>> prices = builder.table("prices", materialized=Materialized.as_("price-store")
        ...                        .with_key_serde("string").with_value_serde("double"))
        """
        from streamtable.dsl.table import KTable

        materialized, key_serde, value_serde = _table_serdes(materialized, key_serde,
                                                             value_serde)
        source = self.add_source([topic], key_serde, value_serde, timestamp_extractor, named)
        self._nodes[source].options["table"] = True  # see Topology.table_topics
        store = self.add_store(materialized, f"{topic}-STATE-STORE", [source],
                               versioned_ok=True)
        name = self.new_name("KTABLE-SOURCE")
        self.add_node(name, table_source(store), [source], stores=[store.name])
        return KTable(self, name, store.name, versioned=store.kind == "versioned")

    def global_table(
        self,
        topic: str,
        materialized: Materialized | str | None = None,
        *,
        key_serde: Serde | str | None = None,
        value_serde: Serde | str | None = None,
        named: str | None = None,
    ) -> GlobalKTable:
        """A GlobalKTable of ``topic``: every task holds the whole table (all partitions), kept
        up to date before the stream records that need it; streams join it with
        ``join(global_table, key_selector, joiner)``. The topic is read with ``key_serde`` and
        ``value_serde``, or, where they are not given, with the serdes of ``materialized``.

        >>> builder = StreamsBuilder()
        >>> products = builder.global_table("products", materialized="products-store")
        """
        from streamtable.dsl.global_table import GlobalKTable
        from streamtable.processors.table import TableSource

        materialized, key_serde, value_serde = _table_serdes(materialized, key_serde,
                                                             value_serde)
        mat = as_materialized(materialized)
        if mat is not None and mat.versioned:
            raise TopologyError(f"global table {mat.name!r}: a global table cannot be "
                                "versioned (as in Kafka Streams); use builder.table")
        source = self.add_source([topic], key_serde, value_serde, None, named)
        store = self.add_store(materialized, f"{topic}-STATE-STORE", [source])
        store.logging = False  # the topic is the table's changelog
        name = self.new_name("KTABLE-SOURCE")
        store_name = store.name
        self.add_node(name, lambda: TableSource(store_name), [source], stores=[store_name])
        # a global table's nodes form a sub-topology of their own that generates no tasks
        self._nodes[source].options["global"] = True
        self._nodes[name].options["global"] = True
        self._topics[topic].kind = "global"
        return GlobalKTable(self, name, store_name)

    def add_global_store(
        self,
        store: StoreBuilder,
        topic: str,
        processor_supplier: Callable[[], Processor],
        *,
        key_serde: Serde | str | None = None,
        value_serde: Serde | str | None = None,
        timestamp_extractor: TimestampExtractor | None = None,
        named: str | None = None,
        source_named: str | None = None,
    ) -> None:
        """A global store kept by a processor of your own (Kafka Streams' ``addGlobalStore``):
        ``processor_supplier()`` makes the processor that sees every record of ``topic`` (all
        its partitions) and puts into the store what it wants
        (``context.get_state_store(store.name)``); every task's processors can read the store
        by name (``context.get_state_store``), without connecting it, but not write it. The
        store is state like a global table's: updated before the stream records of the same
        micro-batch on Spark, exactly once. ``named`` names the processor (and its source
        ``<named>-source``, unless ``source_named`` says otherwise).

        >>> from streamtable import Processor
        >>> from streamtable.dsl.stores import Stores
        >>> class KeepLatest(Processor):
        ...     def init(self, context):
        ...         self.store = context.get_state_store("rates")
        ...     def process(self, record):
        ...         self.store.put(record.key, record.value)
        >>> b = StreamsBuilder()
        >>> b.add_global_store(Stores.key_value_store_builder(
        ...     Stores.in_memory_key_value_store("rates")), "fx-rates", KeepLatest)
        """
        from streamtable.dsl.stream import _user_supplier

        if store.kind != "key-value":
            raise TopologyError(f"global store {store.name!r} must be a key-value store, not a "
                                f"{store.kind} store (as in Kafka Streams)")
        # Kafka Streams' names: "<named>-source" and "<named>", else generated ones
        if source_named is None and named is not None:
            source_named = f"{named}-source"
        source = self.add_source([topic], key_serde, value_serde, timestamp_extractor,
                                 source_named)
        spec = self.add_state_store(store)
        spec.logging = False  # the topic is the store's changelog, as for a global table
        name = self.new_name("KTABLE-SOURCE", named)
        node = self.add_node(name, _user_supplier(processor_supplier, name), [source],
                             stores=[store.name])
        node.options["user"] = True
        # the source and the processor form a sub-topology of their own that generates no
        # tasks (like a global table's)
        self._nodes[source].options["global"] = True
        node.options["global"] = True
        self._topics[topic].kind = "global"

    def build(self) -> Topology:
        """Freeze what was built into a :class:`~streamtable.topology.Topology`."""
        if not self._nodes:
            raise TopologyError("the topology is empty: add a stream or a table first")
        return Topology(dict(self._nodes), dict(self._stores), dict(self._topics))
