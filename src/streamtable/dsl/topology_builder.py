"""The low-level topology API (Kafka Streams' ``Topology.addSource/addProcessor/addSink``):
a graph of named sources, user processors and sinks, with stores connected by name.

It builds the same graph as the DSL (the same nodes, sub-topologies and runtime), so it can be
run by both drivers; processors are the Processor API's (see ``processors/user.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtable.dsl.builder import StreamsBuilder
from streamtable.dsl.stores import StoreBuilder
from streamtable.dsl.stream import _is_global_store
from streamtable.errors import TopologyError
from streamtable.processors.io import Partitioner, TimestampExtractor
from streamtable.serde import Serde
from streamtable.topology.graph import NodeKind, Topology


class TopologyBuilder:
    """Build a topology node by node.

    >>> from streamtable import Processor, Record, Stores, TopologyTestDriver
    >>> class Upper(Processor):
    ...     def init(self, context):
    ...         self.context = context
    ...     def process(self, record):
    ...         self.context.forward(record.with_value(record.value.upper()), child="loud")
    >>> t = (TopologyBuilder()
    ...      .add_source("words", "in")
    ...      .add_processor("upper", Upper, "words")
    ...      .add_sink("loud", "out", "upper"))
    >>> driver = TopologyTestDriver(t.build())
    >>> driver.create_input_topic("in").pipe_input("k", "hi")
    >>> driver.create_output_topic("out").read_values()
    ['HI']
    """

    def __init__(self) -> None:
        self._b = StreamsBuilder()

    def _check_parents(self, name: str, parents: tuple[str, ...]) -> None:
        if not parents:
            raise TopologyError(f"{name!r} needs at least one parent")
        for p in parents:
            node = self._b._nodes.get(p)
            if node is None:
                raise TopologyError(f"parent {p!r} of {name!r} is not a node of the topology")
            if node.kind is NodeKind.SINK:
                raise TopologyError(f"sink {p!r} cannot be the parent of {name!r}")

    def add_source(self, name: str, *topics: str, key_serde: Serde | str | None = None,
                   value_serde: Serde | str | None = None,
                   timestamp_extractor: TimestampExtractor | None = None) -> TopologyBuilder:
        """A source node ``name`` reading ``topics``."""
        if not topics:
            raise TopologyError(f"source {name!r} needs at least one topic")
        self._b.add_source(list(topics), key_serde, value_serde, timestamp_extractor, named=name)
        return self

    def add_processor(self, name: str, supplier: Callable[[], Any],
                      *parents: str) -> TopologyBuilder:
        """A user processor node (``supplier()`` makes one per task) fed by ``parents``; it
        may ``context.forward(record, child=name)`` to one of its children by name."""
        from streamtable.dsl.stream import _user_supplier

        self._check_parents(name, parents)
        node = self._b.add_node(self._b.new_name("", name), _user_supplier(supplier, name),
                                parents)
        node.options["user"] = True
        return self

    def add_state_store(self, store: StoreBuilder, *processor_names: str) -> TopologyBuilder:
        """Add a store and connect it to ``processor_names`` (more with
        :meth:`connect_processor_and_state_stores`)."""
        self._b.add_state_store(store)
        for p in processor_names:
            self.connect_processor_and_state_stores(p, store.name)
        return self

    def add_global_store(self, store: StoreBuilder, source_name: str, topic: str,
                         processor_name: str, supplier: Callable[[], Any], *,
                         key_serde: Serde | str | None = None,
                         value_serde: Serde | str | None = None,
                         timestamp_extractor: TimestampExtractor | None = None
                         ) -> TopologyBuilder:
        """A global store kept by the processor ``supplier()`` makes, fed by a source of
        ``topic`` (Kafka Streams' ``Topology.addGlobalStore``); see
        :meth:`StreamsBuilder.add_global_store`."""
        self._b.add_global_store(store, topic, supplier, key_serde=key_serde,
                                 value_serde=value_serde,
                                 timestamp_extractor=timestamp_extractor, named=processor_name,
                                 source_named=source_name)
        return self

    def connect_processor_and_state_stores(self, processor: str,
                                           *store_names: str) -> TopologyBuilder:
        """Give processor ``processor`` access to stores already added (by name)."""
        node = self._b._nodes.get(processor)
        if node is None or not node.options.get("user"):
            raise TopologyError(f"{processor!r} is not a processor added with add_processor")
        for s in store_names:
            if s not in self._b._stores:
                raise TopologyError(f"no store named {s!r}: add it with add_state_store first")
            if s not in node.stores and not _is_global_store(self._b, s):
                node.stores.append(s)
        return self

    def add_sink(self, name: str, topic: str, *parents: str,
                 key_serde: Serde | str | None = None, value_serde: Serde | str | None = None,
                 partitioner: Partitioner | None = None) -> TopologyBuilder:
        """A sink node ``name`` writing what its ``parents`` forward to ``topic``."""
        self._check_parents(name, parents)
        self._b.add_sink(parents[0], topic, key_serde, value_serde, partitioner, named=name)
        sink = self._b._nodes[name]
        for p in parents[1:]:
            sink.parents.append(p)
            self._b._nodes[p].children.append(name)
        return self

    def build(self) -> Topology:
        """The topology, to run with a ``TopologyTestDriver`` or a ``StreamsApp``."""
        return self._b.build()

    def describe(self) -> str:
        """The topology's description (:meth:`Topology.describe`)."""
        return self.build().describe()
