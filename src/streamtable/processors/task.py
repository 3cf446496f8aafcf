"""A task: one sub-topology's processors over one input partition.

Both drivers (the TopologyTestDriver and the Spark runtime) run tasks the same way: feed raw
records in order with :meth:`Task.process`, then :meth:`Task.commit` to flush caches. Records
sent to topics go to the task's collector.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from streamtable.config import StreamsConfig
from streamtable.errors import DeserializationError, ProcessingError, RecordError
from streamtable.processors.api import Headers, Processor, RawRecord, failing_processor
from streamtable.processors.cache import ChangeForwarder
from streamtable.processors.io import SinkProcessor, SourceProcessor
from streamtable.serde import INTERNAL
from streamtable.topology.graph import NodeKind, StoreSpec, SubTopology, Topology

log = logging.getLogger(__name__)

DLQ_HEADER_PREFIX = "__streams.errors."


class RecordCollector(Protocol):
    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
        partition: int | None,
    ) -> None: ...


StoreFactory = Callable[[StoreSpec, int], Any]


class Task:
    """Runs one sub-topology for one partition."""

    def __init__(
        self,
        topology: Topology,
        subtopology: SubTopology,
        partition: int,
        config: StreamsConfig,
        store_factory: StoreFactory,
        collector: RecordCollector,
        topic_partitions: dict[str, int] | None = None,
        cache_max_entries: int | None = None,
    ) -> None:
        self.topology = topology
        self.subtopology = subtopology
        self.partition = partition
        self.config = config
        self.collector = collector
        self.topic_partitions = topic_partitions or {}
        self.cache_max_entries = cache_max_entries or config.cache_max_entries
        self.app_id = config.application_id
        self.stream_time = -1
        self.current_raw: RawRecord | None = None
        self.dropped: Counter[str] = Counter()
        self.dead_lettered = 0
        self._deser_handler = config.handler("default.deserialization.exception.handler")
        self._proc_handler = config.handler("processing.exception.handler")
        self.stores: dict[str, Any] = {
            name: store_factory(topology.stores[name], partition) for name in subtopology.stores
        }
        self._forwarders: list[ChangeForwarder] = []
        self.processors: dict[str, Processor] = {}
        self.sources: dict[str, SourceProcessor] = {}
        self._build()

    # -- construction ----------------------------------------------------------------------
    def _build(self) -> None:
        topo = self.topology
        for name in self.subtopology.nodes:
            node = topo.nodes[name]
            proc = node.factory()
            proc.name = name
            if isinstance(proc, (SourceProcessor, SinkProcessor)):
                internal = any(topo.topics[t].internal for t in node.topics)
                default_key = INTERNAL if internal else self.config.default_key_serde
                default_value = INTERNAL if internal else self.config.default_value_serde
                proc.key_serde = proc.key_serde or default_key
                proc.value_serde = proc.value_serde or default_value
                proc.carries_changes = any(topo.topics[t].carries_changes for t in node.topics)
                if isinstance(proc, SourceProcessor):
                    proc.check_partitioner = bool(node.options.get("check_partitioner"))
            if isinstance(proc, SinkProcessor):
                proc.real_topic = topo.internal_topic_name(self.app_id, proc.topic)
            self.processors[name] = proc
        for name in self.subtopology.nodes:
            node = topo.nodes[name]
            proc = self.processors[name]
            proc._children = [self.processors[c] for c in node.children]
            proc._children_by_name = {c: self.processors[c] for c in node.children}
            if node.kind is NodeKind.SOURCE:
                for t in node.topics:
                    self.sources[topo.internal_topic_name(self.app_id, t)] = proc  # type: ignore[assignment]
        for name in self.subtopology.nodes:
            self.processors[name].init(self)

    def partitions_of(self, topic: str) -> int:
        """Partition count of a topic as this run knows it (1 in the test driver)."""
        return self.topic_partitions.get(topic, 1)

    def get_store(self, name: str) -> Any:
        try:
            return self.stores[name]
        except KeyError:
            raise ProcessingError(f"store {name!r} is not connected to this sub-topology") from None

    def change_forwarder(self, processor: Processor, store_name: str) -> ChangeForwarder:
        spec = self.topology.stores[store_name]
        caching = self.config.caching_enabled if spec.caching is None else spec.caching
        fw = ChangeForwarder(processor, caching, self.cache_max_entries)
        self._forwarders.append(fw)
        return fw

    # -- processing ------------------------------------------------------------------------
    def process(self, raw: RawRecord) -> None:
        """Process one input record of a source topic of this task."""
        source = self.sources[raw.topic]
        self.current_raw = raw
        try:
            source.process_raw(raw)
        except DeserializationError as e:
            self._handle_failure(raw, e, self._deser_handler)
        except RecordError as e:
            self._handle_failure(raw, self._locate(e, raw), self._proc_handler)
        except Exception as e:  # a user function raised
            err = ProcessingError(
                f"{type(e).__name__}: {e}",
                topic=raw.topic, partition=raw.partition, offset=raw.offset,
                processor=failing_processor(e),
            )
            err.__cause__ = e
            self._handle_failure(raw, err, self._proc_handler)

    def _locate(self, e: RecordError, raw: RawRecord) -> RecordError:
        if e.topic is None:
            located = type(e)(
                e.reason, topic=raw.topic, partition=raw.partition, offset=raw.offset,
                processor=e.processor or failing_processor(e),
            )
            located.__cause__ = e.__cause__
            return located
        return e

    def _handle_failure(self, raw: RawRecord, error: RecordError, handler: str) -> None:
        dlq = self.config.dead_letter_topic
        if dlq:
            headers = tuple(raw.headers) + (
                (DLQ_HEADER_PREFIX + "exception", type(error).__name__.encode()),
                (DLQ_HEADER_PREFIX + "exception.message", str(error).encode()),
                (DLQ_HEADER_PREFIX + "topic", raw.topic.encode()),
                (DLQ_HEADER_PREFIX + "partition", str(raw.partition).encode()),
                (DLQ_HEADER_PREFIX + "offset", str(raw.offset).encode()),
            )
            self.collector.send(dlq, raw.key, raw.value, raw.timestamp, headers, None)
            self.dead_lettered += 1
        if handler == "fail":
            raise error
        log.warning("skipped record: %s%s", error, f" (sent to {dlq})" if dlq else "")
        self.dropped["error"] += 1

    def record_dropped(self, processor: str, reason: str) -> None:
        """Count and log a record an operator drops by Kafka Streams' rules (null keys, ...)."""
        self.dropped[reason] += 1
        raw = self.current_raw
        where = "" if raw is None else (
            f" [topic={raw.topic!r} partition={raw.partition} offset={raw.offset}]"
        )
        log.warning("dropped record at %s: %s%s", processor, reason, where)

    def commit(self) -> None:
        """Flush the record caches, in topological order, until nothing is held."""
        again = True
        while again:
            again = False
            for fw in self._forwarders:
                if fw.flush():
                    again = True

    def close(self) -> None:
        for p in self.processors.values():
            p.close()
