"""A task: one sub-topology's processors over one input partition.

Every host (the TopologyTestDriver, a Spark stage) runs tasks the same way: feed raw records in
order with :meth:`Task.process`, then :meth:`Task.commit` to flush the record caches. What a task
needs from its host comes through the ports (``engine/ports.py``): a store backend for its
stores and a record collector for what its processors send. Processors see the task only
through its :class:`TaskContext`.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping

from streamtable.config import StreamsConfig
from streamtable.engine import blame
from streamtable.engine.ports import KeyValueStore, RecordCollector, StoreBackend
from streamtable.engine.punctuation import Punctuations, Schedule
from streamtable.engine.runs import TableRun
from streamtable.engine.wiring import Wiring, wire
from streamtable.errors import DeserializationError, ProcessingError, RecordError
from streamtable.processors.api import (
    NodeWiring,
    Processor,
    PunctuationType,
    Punctuator,
    RecordMetadata,
    failing_processor,
)
from streamtable.processors.cache import ChangeForwarder
from streamtable.processors.io import SourceProcessor
from streamtable.processors.user import ProcessorApiContext
from streamtable.records import NO_ORIGIN, Headers, Origin, RawRecord, RecordRun
from streamtable.state.versioned import VERSIONED_META_STORE, VersionedKeyValueStore
from streamtable.topology.graph import NodeKind, StoreSpec, SubTopology, Topology

log = logging.getLogger(__name__)

DLQ_HEADER_PREFIX = "__streams.errors."


class Task:
    """Runs one sub-topology for one partition.

    ``wiring`` is the application's resolved wiring (:func:`~streamtable.engine.wiring.wire`),
    computed once and shared by all tasks; ``topic_partitions`` gives the partition counts of
    real topics as the host knows them (1 when absent); ``cache_max_entries`` bounds each
    table's record cache (``cache.max.bytes.buffering`` by default; a full cache forwards its
    eldest change);
    ``global_stores``: the stores of global tables the sub-topology reads (kept by the host).
    ``wall_clock_ms`` is the host's clock (the host sets ``task.wall_clock_ms`` as it moves):
    wall-clock punctuations are checked against it by :meth:`punctuate_wall_clock`.
    """

    def __init__(
        self,
        topology: Topology,
        subtopology: SubTopology,
        partition: int,
        config: StreamsConfig,
        stores: StoreBackend,
        collector: RecordCollector,
        topic_partitions: dict[str, int] | None = None,
        cache_max_entries: int | None = None,
        wiring: Wiring | None = None,
        global_stores: Mapping[str, KeyValueStore] | None = None,
        wall_clock_ms: int = 0,
    ) -> None:
        self.topology = topology
        self.subtopology = subtopology
        self.partition = partition
        self.config = config
        self.collector = collector
        self.wiring = wiring or wire(topology, config)
        # A collector that keeps the origin of records for repartition topics (RawRecord.origin)
        # reads the input record being processed from the task: it is bound to it. Its
        # ``find_origin`` gives the origin of an input record of a repartition topic that
        # does not carry one.
        bind = getattr(collector, "bind", None)
        if bind is not None:
            bind(self)
        self.find_origin: OriginFinder | None = getattr(collector, "find_origin", None)
        self.internal_topics = self.wiring.internal_topics
        # the host's own dict (not a copy): the test driver adds topics as they are created
        self.topic_partitions = topic_partitions if topic_partitions is not None else {}
        self.cache_max_entries = cache_max_entries or config.cache_max_entries
        self.stream_time = -1
        self.current_raw: RawRecord | None = None
        self.dropped: Counter[str] = Counter()
        self.dead_lettered = 0
        self._deser_handler = config.handler("default.deserialization.exception.handler")
        self._proc_handler = config.handler("processing.exception.handler")
        self.stores: dict[str, KeyValueStore] = {
            name: stores.create(topology.stores[name], partition) for name in subtopology.stores
        }
        self.global_stores = dict(global_stores or {})
        self._backend = stores
        self._internal: dict[str, KeyValueStore] = {}
        self._versioned: dict[str, VersionedKeyValueStore | None] = {}
        self._flushes: list[Callable[[], bool]] = []
        self.wall_clock_ms = wall_clock_ms
        self.commit_requested = False
        self.punctuations = Punctuations(
            lambda: stores.create(StoreSpec(punctuation_store(subtopology.id)), partition))
        self._punctuates_stream_time = False
        self.processors: dict[str, Processor] = {}
        self.sources: dict[str, SourceProcessor] = {}
        self.context = TaskContext(self)
        self._build()
        # topic -> how a run of its records is applied at once (see process_run)
        self._runs: dict[str, TableRun] = {}
        for topic, source in self.sources.items():
            if (run := TableRun.of(self, source)) is not None:
                self._runs[topic] = run
        self._unsettled: list[TableRun] = []  # runs with records still to apply, in order

    # -- construction ----------------------------------------------------------------------
    def _build(self) -> None:
        topo = self.topology
        for name in self.subtopology.nodes:
            proc = topo.nodes[name].factory()
            proc.name = name
            self.processors[name] = proc
        for name in self.subtopology.nodes:
            node = topo.nodes[name]
            proc = self.processors[name]
            proc._children = [self.processors[c] for c in node.children]
            proc._children_by_name = {c: self.processors[c] for c in node.children}
            if node.options.get("user"):
                proc.forwards_by_name = True  # a user's processor may forward to a named child
            if (len(proc._children) == 1 and type(proc).forward is Processor.forward
                    and not proc.forwards_by_name):
                # one child: forwarding is calling it (one Python call less per record and hop)
                proc.forward = proc._children[0].process  # type: ignore[method-assign,assignment]
            if node.kind is NodeKind.SOURCE:
                if not isinstance(proc, SourceProcessor):
                    raise TypeError(f"source node {name} built a {type(proc).__name__}")
                for t in self.wiring.node(name).topics:
                    self.sources[t] = proc
        for name in self.subtopology.nodes:
            node = topo.nodes[name]
            if node.options.get("user"):
                specs = {s: topo.stores[s] for s in node.stores}
                # global stores: readable by name from every user processor
                read_only = frozenset(s for s in self.global_stores if s not in specs)
                specs.update((s, topo.stores[s]) for s in read_only)
                self.processors[name].init(
                    ProcessorApiContext(self.context, self.processors[name], specs, read_only))
            else:
                self.processors[name].init(self.context)

    def get_store(self, name: str) -> KeyValueStore:
        try:
            return self.stores[name]
        except KeyError:
            if name in self.global_stores:
                return self.global_stores[name]
            raise ProcessingError(f"store {name!r} is not connected to this sub-topology") from None

    def versioned_store(self, name: str) -> VersionedKeyValueStore | None:
        """Store ``name`` as a versioned store (one per task), or None if it is not one."""
        if name in self._versioned:
            return self._versioned[name]
        spec = self.topology.stores.get(name)
        found = None
        if spec is not None and spec.kind == "versioned":
            where = f"versioned store {name}"
            found = VersionedKeyValueStore(
                self.get_store(name), self.internal_store(VERSIONED_META_STORE),
                history_retention=spec.retention_ms or 0,
                segment_interval=spec.segment_interval_ms, task=self.partition,
                on_expired=lambda: self.record_dropped(
                    where, "put older than the versioned store's history retention"))
        self._versioned[name] = found
        return found

    def internal_store(self, name: str) -> KeyValueStore:
        """A store of this task the topology does not declare, created on first use."""
        store = self._internal.get(name)
        if store is None:
            store = self._internal[name] = self._backend.create(StoreSpec(name), self.partition)
        return store

    def caching_enabled(self, store_name: str) -> bool:
        spec = self.topology.stores[store_name]
        return self.config.caching_enabled if spec.caching is None else spec.caching

    def store_headers(self, store_name: str) -> bool:
        """Whether ``store_name`` keeps the headers of the records that wrote its values
        (``(value, timestamp, headers)``, not ``(value, timestamp)``)."""
        spec = self.topology.stores.get(store_name)
        if spec is None or spec.headers is None:
            return self.config.store_headers
        return spec.headers

    def change_forwarder(self, processor: Processor, store_name: str) -> ChangeForwarder:
        readers = sum(store_name in self.topology.nodes[n].stores for n in self.subtopology.nodes)
        fw = ChangeForwarder(processor, self.caching_enabled(store_name), self.cache_max_entries,
                             self, read_elsewhere=readers > 1)
        self.register_flush(fw.flush)
        return fw

    def register_flush(self, flush: Callable[[], bool]) -> None:
        """Call ``flush()`` at every commit, in registration order, until none forwards."""
        self._flushes.append(flush)

    # -- processing ------------------------------------------------------------------------
    def process(self, raw: RawRecord) -> None:
        """Process one input record of a source topic of this task."""
        if self._unsettled:
            self._settle()
        source = self.sources[raw.topic]
        self.current_raw = raw
        try:
            source.process_raw(raw)
        except Exception as e:
            self.handle_failure(raw, e)
        if self._punctuates_stream_time:
            self.current_raw = None
            self._punctuate(PunctuationType.STREAM_TIME, self.stream_time)

    def process_run(self, run: RecordRun) -> None:
        """Process a run of records of one topic partition, in order: the same as
        :meth:`process` on each, in fewer steps where the topic feeds a cached table source
        (see :mod:`streamtable.engine.runs`)."""
        table = self._runs.get(run.topic)
        if table is not None and not self._punctuates_stream_time and table.absorb(run):
            if table not in self._unsettled:
                self._unsettled.append(table)
            return
        for raw in run.records():
            self.process(raw)

    def _settle(self) -> None:
        """Apply what runs left pending, before anything else happens in the task."""
        for table in self._unsettled:
            table.settle()
        self._unsettled.clear()

    # -- punctuation -----------------------------------------------------------------------
    def schedule(self, processor: Processor, interval_ms: int, kind: PunctuationType,
                 punctuator: Punctuator) -> Schedule:
        s = self.punctuations.schedule(processor.name, interval_ms, kind, punctuator,
                                       self.stream_time, self.wall_clock_ms)
        if kind is PunctuationType.STREAM_TIME:
            self._punctuates_stream_time = True
        return s

    @property
    def punctuates_wall_clock(self) -> bool:
        return self.punctuations.has(PunctuationType.WALL_CLOCK_TIME)

    def punctuate_wall_clock(self) -> bool:
        """Fire the wall-clock punctuations due at ``wall_clock_ms``; True if any fired."""
        self.current_raw = None
        return self._punctuate(PunctuationType.WALL_CLOCK_TIME, self.wall_clock_ms)

    def _punctuate(self, kind: PunctuationType, now: int) -> bool:
        if self._unsettled:
            self._settle()
        if now < 0:
            return False  # no stream time before the first record
        fired = False
        while (s := self.punctuations.due(kind, now)) is not None:
            fired = True
            try:
                s.punctuator(now)
            except Exception as e:
                self.punctuation_failed(s, e)
            finally:
                if not s.cancelled:
                    s.advance(now)
        return fired

    def punctuation_failed(self, schedule: Schedule, error: Exception) -> None:
        """A punctuator raised: the processing exception handler decides, as for a record
        (there is no input record to skip or dead-letter: ``continue`` logs and counts)."""
        if isinstance(error, RecordError):
            reason, where = error.reason, error.processor
        else:  # the innermost operator: the punctuator's, or one its forwards reached
            where = failing_processor(error) or schedule.node
            message = " ".join(str(error).splitlines())
            reason = (f"{type(error).__name__}: {message} "
                      f"{blame.describe(error, self.topology, where)}")
        located = ProcessingError(
            f"{reason} (in a {schedule.type.name} punctuator of {schedule.node}, no input "
            "record)",
            processor=where or schedule.node)
        located.__cause__ = error
        if self._proc_handler == "fail":
            raise located
        log.warning("skipped punctuation: %s", located)
        self.dropped["error"] += 1

    def handle_failure(self, raw: RawRecord | None, error: Exception) -> None:
        """``error`` raised for input record ``raw``: while it was processed, or later when a
        change it caused was forwarded from a record cache (at a commit, or evicted). The record
        is the one to name, skip or send to the dead-letter topic, as the handler says."""
        if isinstance(error, RecordError):
            located = error if raw is None else self._locate(error, raw)
        else:  # a user function raised
            located = self._user_error(error, raw)
        if raw is None:
            raise located
        handler = (self._deser_handler if isinstance(located, DeserializationError)
                   else self._proc_handler)
        self._apply_handler(raw, located, handler)

    def _locate(self, e: RecordError, raw: RawRecord) -> RecordError:
        """``e`` naming the input record ``raw`` came from (for a record of a repartition
        topic, the one before the repartition: the topic exists only inside the batch)."""
        same = (e.topic, e.partition, e.offset) == (raw.topic, raw.partition, raw.offset)
        if e.topic is None or same:
            topic, partition, offset, key = self.input_position(raw)
            if (e.topic, e.partition, e.offset, e.key) == (topic, partition, offset, key):
                return e
            located = type(e)(
                e.reason, topic=topic, partition=partition, offset=offset,
                processor=e.processor or failing_processor(e), key=key,
            )
            located.__cause__ = e.__cause__
            return located
        return e

    def input_position(self, raw: RawRecord | None
                       ) -> tuple[str | None, int | None, int | None, bytes | None]:
        """(topic, partition, offset, key) of the input record behind ``raw``: ``raw``'s own
        for a record of an input topic, its origin's (no key) for a record of a repartition
        topic, all None when no input record caused it."""
        if raw is None:
            return None, None, None, None
        if raw.origin is None and raw.topic not in self.internal_topics:
            return raw.topic, raw.partition, raw.offset, raw.key
        origin = origin_of(raw, self.internal_topics, self.find_origin)
        if origin == NO_ORIGIN:
            return None, None, None, None
        return origin[0], origin[1], origin[2], None

    def _user_error(self, error: Exception, raw: RawRecord | None) -> ProcessingError:
        """A user function's exception as an error naming the input record, the operator, the
        user's code (file, line) and the record the operator held."""
        node = failing_processor(error)
        topic, partition, offset, key = self.input_position(raw)
        message = " ".join(str(error).splitlines())  # one paragraph, whatever the user wrote
        err = ProcessingError(
            f"{type(error).__name__}: {message} {blame.describe(error, self.topology, node)}",
            topic=topic, partition=partition, offset=offset, processor=node, key=key,
        )
        err.__cause__ = error
        return err

    def _apply_handler(self, raw: RawRecord, error: RecordError, handler: str) -> None:
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
        topic, partition, offset, _ = self.input_position(self.current_raw)
        where = "" if topic is None else (
            f" [topic={topic!r} partition={partition} offset={offset}]"
        )
        log.warning("dropped record at %s: %s%s", processor, reason, where)

    def commit(self) -> None:
        """Flush the record caches, in topological order, until nothing is held."""
        self._settle()
        again = True
        while again:
            again = False
            for flush in self._flushes:
                if flush():
                    again = True

    def close(self) -> None:
        self._settle()
        for p in self.processors.values():
            p.close()


OriginFinder = Callable[[RawRecord], "Origin | None"]
"""A host's origin of a record of a repartition topic (None: unknown)."""


def origin_of(raw: RawRecord | None, internal_topics: frozenset[str],
              find: OriginFinder | None = None) -> Origin:
    """The origin of a record sent to a repartition topic while ``raw`` was processed (see
    ``RawRecord.origin``): ``raw``'s position for a record of an input topic, its own origin
    for one of a repartition topic (set, or as ``find`` finds it), ``NO_ORIGIN`` when there is
    no input record (a punctuation). Hosts call it only when they need the origin (an error,
    or a batch's records made into rows), never per record sent.

    >>> origin_of(RawRecord("clicks", 1, 7, 0, None, None), frozenset())
    ('clicks', 1, 7)
    >>> origin_of(None, frozenset())
    ('', -1, -1)
    """
    if raw is None:
        return NO_ORIGIN
    if raw.origin is not None:
        return raw.origin
    if raw.topic in internal_topics:
        found = find(raw) if find is not None else None
        return NO_ORIGIN if found is None else found
    return raw.topic, raw.partition, raw.offset


def punctuation_store(subtopology: int) -> str:
    """The name of the task store holding a sub-topology's punctuation schedules."""
    return f"__punctuations-{subtopology}__"


class TaskContext:
    """The :class:`~streamtable.processors._operator.InternalProcessorContext` of one task: the
    view of the task its built-in operators get (a user's processor gets a narrower one over it,
    :class:`~streamtable.processors.user.ProcessorApiContext`)."""

    __slots__ = ("_task",)

    def __init__(self, task: Task) -> None:
        self._task = task

    @property
    def application_id(self) -> str:
        return self._task.wiring.application_id

    @property
    def task_id(self) -> int:
        return self._task.partition

    @property
    def stream_time(self) -> int:
        return self._task.stream_time

    def advance_stream_time(self, timestamp: int) -> None:
        task = self._task
        if timestamp > task.stream_time:
            task.stream_time = timestamp

    def record_metadata(self) -> RecordMetadata | None:
        raw = self._task.current_raw
        return None if raw is None else RecordMetadata(raw.topic, raw.partition, raw.offset)

    def get_state_store(self, name: str) -> KeyValueStore:
        return self._task.get_store(name)

    def internal_store(self, name: str) -> KeyValueStore:
        return self._task.internal_store(name)

    def versioned_store(self, name: str) -> VersionedKeyValueStore | None:
        return self._task.versioned_store(name)

    def change_forwarder(self, processor: Processor, store_name: str) -> ChangeForwarder:
        return self._task.change_forwarder(processor, store_name)

    def caching_enabled(self, store_name: str) -> bool:
        return self._task.caching_enabled(store_name)

    def store_headers(self, store_name: str) -> bool:
        return self._task.store_headers(store_name)

    def register_flush(self, flush: Callable[[], bool]) -> None:
        self._task.register_flush(flush)

    def wiring(self, node: str) -> NodeWiring:
        return self._task.wiring.node(node)

    def partitions_of(self, topic: str) -> int:
        return self._task.topic_partitions.get(topic, 1)

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
             headers: Headers, partition: int | None) -> None:
        self._task.collector.send(topic, key, value, timestamp, headers, partition)

    def record_dropped(self, processor: str, reason: str) -> None:
        self._task.record_dropped(processor, reason)

    def schedule(self, processor: Processor, interval_ms: int, punctuation_type: PunctuationType,
                 punctuator: Punctuator) -> Schedule:
        return self._task.schedule(processor, interval_ms, punctuation_type, punctuator)

    def current_system_time_ms(self) -> int:
        return self._task.wall_clock_ms

    def request_commit(self) -> None:
        self._task.commit_requested = True
