"""TopologyTestDriver: Kafka Streams' test driver, for Python topologies.

Each piped record is processed through the whole topology — records written to internal
(repartition) topics are processed too — and then the driver commits, flushing the record caches.
So with caching on, each input record yields at most one output per key; without caching
(``cache.max.bytes.buffering = 0``) every intermediate change is visible.

A global table's records update its store as soon as they are piped. In *batch mode* the driver
runs the topology as the Spark runtime does, through the same batch host
(:func:`~streamtable.engine.batch.run_task_batch`): piped records wait for
:meth:`TopologyTestDriver.run_batch`, which applies the batch's global table records first, then
runs the sub-topologies one after the other, each as one task per partition group (partition
``i`` of its source topics; a repartitioned record goes to the task the runtime's shuffle gives
it), each task over its records of the batch in Kafka Streams' partition-group order, with its
state checked out, committed and checked in through the task-state persistence (in memory), so
with caching the last change per key per batch (or earlier, when a full cache forwards its
eldest change).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamtable.config import StreamsConfig
from streamtable.durations import Duration, to_ms
from streamtable.engine.batch import run_task_batch
from streamtable.engine.ports import RecordOrdering
from streamtable.engine.task import Task, origin_of
from streamtable.engine.wiring import punctuates_on_wall_clock, task_counts, wire
from streamtable.partitioner import default_partition, task_of
from streamtable.records import (
    Headers,
    HeadersLike,
    Origin,
    RawRecord,
    RoutedRecord,
    to_headers,
)
from streamtable.serde import Serde, serde_from
from streamtable.state import InMemoryStoreBackend, KeyValueStore, ReadOnlyKeyValueStore
from streamtable.state.base import TaskStatePersistence
from streamtable.state.persistence import FileTaskStatePersistence
from streamtable.state.stores import ReadOnlySessionStore, ReadOnlyWindowStore, TaskStoresView
from streamtable.state.task_state import TaskState
from streamtable.state.versioned import ReadOnlyVersionedKeyValueStore, StoreVersionRows
from streamtable.topology.graph import NodeKind, Topology

TEST_APPLICATION_ID = "test-app"


@dataclass
class TestRecord:
    """A record read from an output topic: key, value, timestamp and headers (``(name,
    value)`` pairs, values as bytes or None).

    >>> TestRecord("alice", 3, 60_000)
    TestRecord(key='alice', value=3, timestamp=60000, headers=())
    """

    key: Any
    value: Any
    timestamp: int
    headers: Headers = field(default_factory=tuple)

    __test__ = False  # not a pytest class


class _Log:
    """One in-memory topic: its records in the order written, offsets counted per partition."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.records: list[RawRecord] = []
        self._next_offset: dict[int, int] = defaultdict(int)

    def append(self, partition: int, timestamp: int, key: bytes | None, value: bytes | None,
               headers: Headers, origin: Origin | None = None) -> RawRecord:
        """Append a record (with its ``origin`` for a repartition topic's)."""
        offset = self._next_offset[partition]
        self._next_offset[partition] = offset + 1
        raw = (RawRecord(self.name, partition, offset, timestamp, key, value, tuple(headers))
               if origin is None else RoutedRecord(self.name, partition, offset, timestamp, key,
                                                   value, tuple(headers), origin))
        self.records.append(raw)
        return raw


class TopologyTestDriver:
    """Runs a topology record by record, in-process.

    >>> from streamtable import StreamsBuilder
    >>> b = StreamsBuilder()
    >>> b.stream("in").map_values(lambda v: v * 2).to("out")
    >>> driver = TopologyTestDriver(b.build())
    >>> driver.create_input_topic("in").pipe_input("k", 21)
    >>> driver.create_output_topic("out").read_key_values()
    [('k', 42)]
    """

    __test__ = False

    def __init__(
        self,
        topology: Topology,
        config: Mapping[str, Any] | None = None,
        initial_wall_clock_time_ms: int | None = None,
        *,
        batch_mode: bool = False,
    ) -> None:
        settings = {"application.id": TEST_APPLICATION_ID}
        settings.update(config or {})
        self.config = StreamsConfig(settings)
        self.topology = topology
        self.batch_mode = batch_mode
        self.wall_clock_ms = (
            int(time.time() * 1000) if initial_wall_clock_time_ms is None
            else initial_wall_clock_time_ms
        )
        self._started_ms = self.wall_clock_ms
        self._logs: dict[str, _Log] = {}
        self._pending: deque[RawRecord] = deque()
        self._partitions: dict[str, int] = {}
        self._backend = InMemoryStoreBackend()
        self._wiring = wire(topology, self.config)
        self._tasks: dict[int, Task] = {}
        self._task_by_topic: dict[str, Task] = {}
        # batch mode: records waiting for run_batch(), each with the task it goes to
        self._batch: list[tuple[RawRecord, int]] = []
        self._reader: dict[str, int] = {}  # source topic -> the sub-topology reading it
        self._dropped: Counter[str] = Counter()
        self._counts: dict[int, int] = {}  # batch mode: sub-topology -> its task count
        if batch_mode:
            self._states = _KeptStates(FileTaskStatePersistence(f"memory://{uuid.uuid4().hex}"))
            for st in topology.global_subtopologies + topology.subtopologies:
                for topic in _source_topics(topology, self._wiring, st.id):
                    self._reader[topic] = st.id
        else:
            # global tables first: their stores are handed to every task that reads them
            for st in topology.global_subtopologies + topology.subtopologies:
                global_stores = {s: self._backend.stores[s]
                                 for s in topology.global_stores_of(st)}
                task = Task(topology, st, 0, self.config, self._backend,
                            _RecordModeCollector(self), self._partitions,
                            wiring=self._wiring, global_stores=global_stores,
                            wall_clock_ms=self.wall_clock_ms)
                self._tasks[st.id] = task
                for t in task.sources:
                    self._task_by_topic[t] = task
        self.batches = 0

    def _log(self, topic: str) -> _Log:
        log = self._logs.get(topic)
        if log is None:
            log = self._logs[topic] = _Log(topic)
        return log

    # -- RecordCollector -------------------------------------------------------------------
    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
             headers: Headers, partition: int | None) -> None:
        raw = self._log(topic).append(0, timestamp, key, value, headers)
        if topic in self._task_by_topic:
            self._pending.append(raw)

    def _send_routed(self, topic: str, key: bytes | None, value: bytes | None,
                     timestamp: int, headers: Headers, cause: RawRecord | None) -> None:
        """A record of a repartition topic, sent while ``cause`` was processed: it keeps the
        position of the input record it came from (named by errors downstream, as on
        Spark)."""
        raw = self._log(topic).append(0, timestamp, key, value, headers,
                                      origin_of(cause, self._wiring.internal_topics))
        if topic in self._task_by_topic:
            self._pending.append(raw)

    def _send_from_task(self, task_id: int, topic: str, key: bytes | None, value: bytes | None,
                        timestamp: int, headers: Headers, partition: int | None,
                        cause: RawRecord | None = None) -> None:
        """Batch mode: what task ``task_id`` sends. A record of a repartition topic is logged
        under the partition of the task that wrote it (its offsets in the order written, as
        the runtime's stage output) and goes to the task the runtime's shuffle gives it; a
        record of another topic goes to the partition its sink chose, else to its key's."""
        reader = self._reader.get(topic)
        if topic in self._wiring.internal_topics:
            raw = self._log(topic).append(task_id, timestamp, key, value, headers,
                                          origin_of(cause, self._wiring.internal_topics))
            if reader is not None:
                self._batch.append((raw, task_of(key, partition, self._counts[reader])))
            return
        if partition is None:
            partitions = self._partitions.get(topic, 1)
            partition = 0 if key is None else default_partition(key, partitions)
        raw = self._log(topic).append(partition, timestamp, key, value, headers)
        if reader is not None:
            self._batch.append((raw, partition))

    # -- piping ----------------------------------------------------------------------------
    def pipe_raw(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
                 headers: Headers = (), partition: int = 0) -> None:
        """Append a serialized record to ``topic`` and process it to completion, then commit
        (in batch mode: keep it for the next :meth:`run_batch`)."""
        raw = self._log(topic).append(partition, timestamp, key, value, headers)
        if self.batch_mode:
            if topic in self._reader:
                self._batch.append((raw, partition))
            return
        task = self._task_by_topic.get(topic)
        if task is None:
            return
        task.process(raw)
        self._complete()

    def _complete(self) -> None:
        while True:
            while self._pending:
                raw = self._pending.popleft()
                self._task_by_topic[raw.topic].process(raw)
            for task in self._tasks.values():
                task.commit()
            if not self._pending:
                return

    def run_batch(self) -> None:
        """Batch mode: process the records piped since the last batch as the Spark runtime
        processes one micro-batch. Each sub-topology in turn (those writing a repartition topic
        before those reading it) takes its records of the batch — including what earlier
        sub-topologies wrote in this batch — in partition-group order, then commits once; the
        sub-topologies of a cycle (a foreign-key join's result joined with its left table) run
        in rounds until none writes for another (see ``engine.wiring.stage_groups``).

        >>> from streamtable import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> b.stream("in").group_by_key().count(materialized="counts").to_stream().to("out")
        >>> driver = TopologyTestDriver(b.build(), batch_mode=True)
        >>> topic = driver.create_input_topic("in")
        >>> for _ in range(3):
        ...     topic.pipe_input("k", "v", timestamp=1)
        >>> driver.run_batch()
        >>> driver.create_output_topic("out").read_key_values()  # the last change per key
        [('k', 3)]
        """
        if not self.batch_mode:
            raise RuntimeError("run_batch() is for a driver created with batch_mode=True")
        self._counts = task_counts(
            self.topology, {t: self._partitions.get(t, 1) for t in self.topology.topics
                            if not self.topology.topics[t].internal})
        topic_partitions = dict(self._partitions)
        for topic, sid in self._reader.items():
            if topic in self._wiring.internal_topics:
                topic_partitions[topic] = self._counts[sid]
        # the batch's global table updates come before every stream record of the batch, as
        # on Spark (the global stage runs first)
        groups = [(st.id,) for st in self.topology.global_subtopologies] + list(
            self._wiring.stage_groups)
        for group in groups:
            # a cycle runs in rounds: what a member writes for itself or for one before it
            # waits for the next round (see engine.wiring.stage_groups)
            round_ = 0
            while True:
                for sid in group:
                    self._run_stage(sid, round_, topic_partitions)
                if not any(self._reader[raw.topic] in group for raw, _ in self._batch):
                    break
                round_ += 1
        self.batches += 1

    def _run_stage(self, sid: int, round_: int, topic_partitions: dict[str, int]) -> None:
        """Batch mode: run each task of sub-topology ``sid`` over its records waiting now."""
        by_task: dict[int, list[RawRecord]] = defaultdict(list)
        rest: list[tuple[RawRecord, int]] = []
        for raw, task_id in self._batch:
            if self._reader[raw.topic] == sid:
                by_task[0 if sid not in self._counts else task_id].append(raw)
            else:
                rest.append((raw, task_id))
        self._batch = rest
        tasks = set(by_task)
        if (round_ == 0 and sid in self._counts
                and punctuates_on_wall_clock(self.topology, sid)):
            tasks.update(range(self._counts.get(sid, 1)))  # every task runs, as on Spark
        for task_id in sorted(tasks):
            result = run_task_batch(
                self.topology, self._wiring, sid, task_id, self.batches,
                config=self.config, persistence=self._states,
                collector=_TaskCollector(self, task_id),
                records=_in_order(by_task.get(task_id, [])),
                topic_partitions=topic_partitions, wall_clock_ms=self.wall_clock_ms,
                started_ms=self._started_ms, round_=round_)
            self._dropped.update(result.dropped)

    def create_input_topic(
        self,
        topic: str,
        key_serde: Serde | str | None = None,
        value_serde: Serde | str | None = None,
        *,
        start_timestamp: int | None = None,
        auto_advance_ms: Duration = 0,
        partitions: int = 1,
    ) -> TestInputTopic:
        """An input topic; its serdes default to the application's default serdes. With
        ``partitions``, records can be piped to a partition (``pipe_input(..., partition=1)``)."""
        self._partitions[topic] = partitions
        return TestInputTopic(
            self, topic,
            serde_from(key_serde, self.config.default_key_serde, key=True),
            serde_from(value_serde, self.config.default_value_serde),
            self.wall_clock_ms if start_timestamp is None else start_timestamp,
            to_ms(auto_advance_ms, "auto_advance_ms"),
        )

    def create_output_topic(
        self,
        topic: str,
        key_serde: Serde | str | None = None,
        value_serde: Serde | str | None = None,
    ) -> TestOutputTopic:
        """An output topic, read from its first record."""
        return TestOutputTopic(
            self, topic,
            serde_from(key_serde, self.config.default_key_serde, key=True),
            serde_from(value_serde, self.config.default_value_serde),
        )

    def topic_records(self, topic: str) -> list[RawRecord]:
        """Every raw record written to ``topic`` so far (internal topics use their full name).

        >>> from streamtable import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> b.stream("in").to("out")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_input("k", {"n": 1}, timestamp=5)
        >>> record = driver.topic_records("out")[0]
        >>> record.key, record.value, record.timestamp
        (b'"k"', b'{"n":1}', 5)
        """
        return list(self._log(topic).records)

    # -- state -----------------------------------------------------------------------------
    def get_key_value_store(self, name: str
                            ) -> ReadOnlyKeyValueStore | ReadOnlyVersionedKeyValueStore:
        """Query a store by name: ``get``, ``all``, ``range``, ``prefix_scan`` (a versioned
        store's also ``get(key, as_of=ts)``: see :meth:`get_versioned_key_value_store`).

        >>> from streamtable import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> counts = b.stream("in").group_by_key().count(materialized="counts")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_key_value_list([("a", 1), ("b", 1), ("a", 1)])
        >>> store = driver.get_key_value_store("counts")
        >>> store.get("a"), sorted(store.all())
        (2, [('a', 2), ('b', 1)])
        """
        store = self._store(name)
        spec = self.topology.stores.get(name)
        if spec is not None and spec.kind == "versioned":
            return ReadOnlyVersionedKeyValueStore(StoreVersionRows(store), name)
        return ReadOnlyKeyValueStore(store)

    def get_versioned_key_value_store(self, name: str) -> ReadOnlyVersionedKeyValueStore:
        """Query a versioned store (a versioned table's, or a processor's): ``get(key)``, the
        latest value; ``get(key, as_of=ts)``, the value at ``ts``; ``get_record`` and
        ``versions`` with validity intervals (Kafka Streams' ``getVersionedKeyValueStore``).

        >>> from streamtable import Materialized, StreamsBuilder, Stores
        >>> b = StreamsBuilder()
        >>> rates = b.table("rates", Materialized.as_(
        ...     Stores.persistent_versioned_key_value_store("rates", 60_000)))
        >>> driver = TopologyTestDriver(b.build())
        >>> topic = driver.create_input_topic("rates")
        >>> topic.pipe_input("EUR", 1.10, timestamp=1_000)
        >>> topic.pipe_input("EUR", 1.12, timestamp=5_000)
        >>> store = driver.get_versioned_key_value_store("rates")
        >>> store.get("EUR"), store.get("EUR", as_of=4_999), store.get_record("EUR", as_of=2_000)
        (1.12, 1.1, VersionedRecord(value=1.1, timestamp=1000, valid_to=5000))
        """
        return ReadOnlyVersionedKeyValueStore(
            StoreVersionRows(self._store(name, "versioned")), name)

    def get_timestamped_key_value_store(self, name: str) -> ReadOnlyKeyValueStore:
        """Like :meth:`get_key_value_store`, with ``(value, timestamp)`` values.

        >>> from streamtable import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> latest = b.table("in", materialized="latest")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_input("a", "x", timestamp=7)
        >>> driver.get_timestamped_key_value_store("latest").get("a")
        ('x', 7)
        """
        spec = self.topology.stores.get(name)
        if spec is not None and spec.kind == "versioned":
            raise TypeError(f"store {name!r} is a versioned store: query it with "
                            "get_versioned_key_value_store (get_record gives timestamps)")
        return ReadOnlyKeyValueStore(self._store(name), timestamped=True)

    def get_timestamped_key_value_store_with_headers(self, name: str) -> ReadOnlyKeyValueStore:
        """Like :meth:`get_key_value_store`, with
        :class:`~streamtable.state.timestamped.ValueTimestampHeaders` values: the value, its
        timestamp and the headers of the record that wrote it, for a DSL store with
        ``dsl.store.format=headers`` (or a processor's store built with
        ``Stores.timestamped_key_value_store_with_headers_builder``). A value stored without
        headers shows none.

        >>> from streamtable import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> counts = b.stream("in").group_by_key().count(materialized="counts")
        >>> driver = TopologyTestDriver(b.build(), {"dsl.store.format": "headers"})
        >>> driver.create_input_topic("in").pipe_input("a", "x", 7, headers={"trace-id": "t1"})
        >>> driver.get_timestamped_key_value_store_with_headers("counts").get("a")
        ValueTimestampHeaders(value=1, timestamp=7, headers=(('trace-id', b't1'),))
        """
        return ReadOnlyKeyValueStore(self._store(name), headers=True)

    def get_window_store(self, name: str) -> ReadOnlyWindowStore:
        """Query the store of a time- or sliding-windowed aggregation:
        ``fetch(key, time_from, time_to)`` gives ``(window start, value)`` pairs,
        ``fetch_all(time_from, time_to)`` ``(Windowed, value)`` pairs (see the
        windows guide).

        >>> from streamtable import Materialized, StreamsBuilder, TimeWindows
        >>> b = StreamsBuilder()
        >>> counts = (b.stream("in").group_by_key().windowed_by(TimeWindows.of(1000))
        ...           .count(Materialized.as_("per-second").with_retention(60_000)))
        >>> driver = TopologyTestDriver(b.build())
        >>> topic = driver.create_input_topic("in")
        >>> for t in (100, 200, 1100):
        ...     topic.pipe_input("a", "x", timestamp=t)
        >>> driver.get_window_store("per-second").fetch("a", 0, 1000)
        [(0, 2), (1000, 1)]
        """
        return ReadOnlyWindowStore(self._store(name, "window"))

    def get_timestamped_window_store(self, name: str) -> ReadOnlyWindowStore:
        """Like :meth:`get_window_store`, with ``(value, timestamp)`` values (the timestamp
        of a window's latest update).

        >>> from streamtable import StreamsBuilder, TimeWindows
        >>> b = StreamsBuilder()
        >>> counts = (b.stream("in").group_by_key().windowed_by(TimeWindows.of(1000))
        ...           .count("per-second"))
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_input("a", "x", timestamp=300)
        >>> driver.get_timestamped_window_store("per-second").fetch("a", 0, 0)
        [(0, (1, 300))]
        """
        return ReadOnlyWindowStore(self._store(name, "window"), timestamped=True)

    def get_session_store(self, name: str) -> ReadOnlySessionStore:
        """Query the store of a session-windowed aggregation: ``fetch(key)``,
        ``find_sessions(key, earliest_session_end, latest_session_start)``.

        >>> from streamtable import Materialized, SessionWindows, StreamsBuilder
        >>> b = StreamsBuilder()
        >>> sessions = (b.stream("in").group_by_key()
        ...             .windowed_by(SessionWindows.of_inactivity_gap(1000))
        ...             .count(Materialized.as_("sessions").with_retention(60_000)))
        >>> driver = TopologyTestDriver(b.build())
        >>> topic = driver.create_input_topic("in")
        >>> for t in (0, 500, 5000):
        ...     topic.pipe_input("a", "x", timestamp=t)
        >>> driver.get_session_store("sessions").fetch("a")
        [(Windowed(key='a', start=0, end=500), 2), (Windowed(key='a', start=5000, end=5000), 1)]
        """
        return ReadOnlySessionStore(self._store(name, "session"))

    def _store(self, name: str, kind: str | None = None) -> KeyValueStore:
        spec = self.topology.stores.get(name)
        if kind is not None and spec is not None and spec.kind != kind:
            raise TypeError(f"store {name!r} is a {spec.kind} store, not a {kind} store")
        if self.batch_mode:
            if spec is None:
                raise KeyError(f"no store named {name!r}; stores: {sorted(self.topology.stores)}")
            return TaskStoresView(name, lambda: self._states.stores(name))
        stores = self._backend.stores
        try:
            return stores[name]
        except KeyError:
            raise KeyError(f"no store named {name!r}; stores: {sorted(stores)}") from None

    @property
    def dropped_records(self) -> dict[str, int]:
        """Records dropped by Kafka Streams' rules, by reason (null keys, late records,
        skipped errors).

        >>> from streamtable import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> counts = b.stream("in").group_by_key().count()
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_input(None, "no key")
        >>> driver.dropped_records
        {'null key or value in an aggregation': 1}
        """
        total: dict[str, int] = dict(self._dropped)
        for t in self._tasks.values():
            for reason, n in t.dropped.items():
                total[reason] = total.get(reason, 0) + n
        return total

    def advance_wall_clock_time(self, ms: Duration) -> None:
        """Move the driver's mock clock forward by ``ms`` (or a ``timedelta``) and fire the
        wall-clock punctuations now due (Kafka Streams' ``advanceWallClockTime``), then process
        what they caused and commit. In batch mode the punctuations wait for the next
        :meth:`run_batch`.

        >>> from streamtable import Processor, PunctuationType, Record, StreamsBuilder
        >>> class Ticker(Processor):
        ...     def init(self, context):
        ...         context.schedule(1000, PunctuationType.WALL_CLOCK_TIME,
        ...                          lambda now: context.forward(Record("tick", now, now)))
        >>> b = StreamsBuilder()
        >>> b.stream("in").process(Ticker).to("ticks")
        >>> driver = TopologyTestDriver(b.build(), initial_wall_clock_time_ms=0)
        >>> driver.advance_wall_clock_time(2500)
        >>> driver.create_output_topic("ticks").read_key_values()
        [('tick', 2500)]
        """
        advance = to_ms(ms, "ms")
        if advance < 0:
            raise ValueError("the wall clock does not go back")
        self.wall_clock_ms += advance
        for task in self._tasks.values():
            task.wall_clock_ms = self.wall_clock_ms
        if self.batch_mode:
            return
        for task in self._tasks.values():
            task.punctuate_wall_clock()
        self._complete()

    def close(self) -> None:
        """Close every task's processors (also on leaving a ``with`` block).

        >>> from streamtable import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> b.stream("in").to("out")
        >>> with TopologyTestDriver(b.build()) as driver:
        ...     driver.create_input_topic("in").pipe_input("k", "v")
        """
        for t in self._tasks.values():
            t.close()

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _RecordModeCollector:
    """The record collector of one task of the driver's record mode: the driver's topics, with
    the origin of records of repartition topics (see ``RawRecord.origin``)."""

    __slots__ = ("_driver", "_task")

    def __init__(self, driver: TopologyTestDriver) -> None:
        self._driver = driver
        self._task: Task | None = None

    def bind(self, task: Task) -> None:
        self._task = task

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
             headers: Headers, partition: int | None) -> None:
        if topic in self._driver._wiring.internal_topics:
            cause = None if self._task is None else self._task.current_raw
            self._driver._send_routed(topic, key, value, timestamp, headers, cause)
        else:
            self._driver.send(topic, key, value, timestamp, headers, partition)


class _TaskCollector:
    """The record collector of one task of the driver's batch mode."""

    __slots__ = ("_driver", "_task_id", "_task")

    def __init__(self, driver: TopologyTestDriver, task_id: int) -> None:
        self._driver = driver
        self._task_id = task_id
        self._task: Task | None = None

    def bind(self, task: Task) -> None:
        self._task = task

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
             headers: Headers, partition: int | None) -> None:
        cause = None if self._task is None else self._task.current_raw
        self._driver._send_from_task(self._task_id, topic, key, value, timestamp, headers,
                                     partition, cause)


class _KeptStates:
    """A task-state persistence that remembers the working copy each task checked in last, so
    the driver can query the stores between batches."""

    def __init__(self, persistence: TaskStatePersistence) -> None:
        self._persistence = persistence
        self._states: dict[tuple[int, int], TaskState] = {}

    def checkout(self, subtopology: int, task_id: int, version: int) -> TaskState:
        return self._persistence.checkout(subtopology, task_id, version)

    def commit(self, state: TaskState, batch: int) -> dict[str, dict[Any, Any]]:
        return self._persistence.commit(state, batch)

    def checkin(self, state: TaskState) -> None:
        self._states[state.task] = state
        state.hand_over = False  # kept open: the driver reads it until the next batch
        self._persistence.checkin(state)

    def keeps_state(self) -> bool:
        return self._persistence.keeps_state()

    def stores(self, name: str) -> list[KeyValueStore]:
        """Store ``name`` of every task holding it, in task order."""
        return [state.stores[name] for _, state in sorted(self._states.items())
                if name in state.stores]


def _in_order(records: list[RawRecord]) -> Callable[[RecordOrdering], Iterable[RawRecord]]:
    """A task's records of a batch, as the batch host asks for them."""
    return lambda ordering: ordering.order(records)


def _source_topics(topology: Topology, wiring: Any, subtopology: int) -> list[str]:
    """The real names of the topics sub-topology ``subtopology`` reads."""
    return [t for n in topology.subtopology(subtopology).nodes
            if topology.nodes[n].kind is NodeKind.SOURCE for t in wiring.node(n).topics]


class TestInputTopic:
    """Pipes records into one topic of a driver (made by
    :meth:`TopologyTestDriver.create_input_topic`), serialized with the topic's serdes.

    >>> from streamtable import StreamsBuilder, TopologyTestDriver
    >>> b = StreamsBuilder()
    >>> b.stream("in").map_values(str.upper).to("out")
    >>> driver = TopologyTestDriver(b.build())
    >>> words = driver.create_input_topic("in", start_timestamp=0, auto_advance_ms=1000)
    >>> words.pipe_key_value_list([("a", "x"), ("b", "y")])
    >>> driver.create_output_topic("out").read_records()[-1]
    TestRecord(key='b', value='Y', timestamp=1000, headers=())
    """

    __test__ = False

    def __init__(self, driver: TopologyTestDriver, topic: str, key_serde: Serde,
                 value_serde: Serde, start_timestamp: int, auto_advance_ms: int) -> None:
        self._driver = driver
        self.topic = topic
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._time = start_timestamp
        self._advance = auto_advance_ms

    def advance_time(self, ms: Duration) -> None:
        """Move the time of the next record piped without a timestamp by ``ms`` (or a
        ``timedelta``).

        >>> from datetime import timedelta
        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.stream("in").to("out")
        >>> driver = TopologyTestDriver(b.build())
        >>> topic = driver.create_input_topic("in", start_timestamp=0)
        >>> topic.advance_time(timedelta(minutes=1))
        >>> topic.pipe_input("k", "v")
        >>> driver.create_output_topic("out").read_records()[0].timestamp
        60000
        """
        self._time += to_ms(ms, "ms")

    def pipe_input(self, key: Any = None, value: Any = None, timestamp: int | None = None,
                   headers: HeadersLike = (), partition: int = 0) -> None:
        """Pipe one record. Without a timestamp the topic's current time is used (and then
        advanced by ``auto_advance_ms``). ``headers`` are the record's Kafka headers:
        ``(name, value)`` pairs or a mapping, values as bytes, text (UTF-8) or None; the
        records the topology writes carry them on (:meth:`TestOutputTopic.read_records`).

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.stream("in").map_values(str.upper).to("out")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_input("k", "v", 5, headers={"trace-id": "t1"})
        >>> driver.create_output_topic("out").read_records()
        [TestRecord(key='k', value='V', timestamp=5, headers=(('trace-id', b't1'),))]
        """
        if timestamp is None:
            timestamp = self._time
            self._time += self._advance
        self._driver.pipe_raw(
            self.topic,
            self.key_serde.serialize(self.topic, key),
            self.value_serde.serialize(self.topic, value),
            timestamp,
            to_headers(headers),
            partition,
        )

    def pipe_key_value_list(self, pairs: Iterable[tuple[Any, Any]]) -> None:
        """Pipe ``(key, value)`` pairs, one record each, at the topic's current time.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.stream("in").to("out")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_key_value_list([("a", 1), ("b", 2)])
        >>> driver.create_output_topic("out").read_key_values()
        [('a', 1), ('b', 2)]
        """
        for k, v in pairs:
            self.pipe_input(k, v)

    def pipe_value_list(self, values: Iterable[Any]) -> None:
        """Pipe values with ``None`` keys, one record each.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.stream("in").to("out")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_value_list(["x", "y"])
        >>> driver.create_output_topic("out").read_key_values()
        [(None, 'x'), (None, 'y')]
        """
        for v in values:
            self.pipe_input(None, v)


class TestOutputTopic:
    """Reads, in order, what the topology wrote to one topic (made by
    :meth:`TopologyTestDriver.create_output_topic`); each read returns what was not read yet.

    >>> from streamtable import StreamsBuilder, TopologyTestDriver
    >>> b = StreamsBuilder()
    >>> b.stream("in").filter(lambda k, v: v > 0).to("out")
    >>> driver = TopologyTestDriver(b.build())
    >>> out = driver.create_output_topic("out")
    >>> driver.create_input_topic("in").pipe_key_value_list([("a", 1), ("b", -1), ("c", 2)])
    >>> out.get_queue_size(), out.read_values(), out.is_empty()
    (2, [1, 2], True)
    """

    __test__ = False

    def __init__(self, driver: TopologyTestDriver, topic: str, key_serde: Serde,
                 value_serde: Serde) -> None:
        self._driver = driver
        self.topic = topic
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._position = 0

    def _next_raw(self) -> list[RawRecord]:
        records = self._driver._log(self.topic).records
        out = records[self._position:]
        self._position = len(records)
        return out

    def read_records(self) -> list[TestRecord]:
        """The records not read yet, with timestamps and headers (see the class's example)."""
        return [
            TestRecord(
                self.key_serde.deserialize(self.topic, r.key),
                self.value_serde.deserialize(self.topic, r.value),
                r.timestamp,
                r.headers,
            )
            for r in self._next_raw()
        ]

    def read_key_values(self) -> list[tuple[Any, Any]]:
        """The ``(key, value)`` pairs not read yet (see
        :meth:`TestInputTopic.pipe_key_value_list`)."""
        return [(r.key, r.value) for r in self.read_records()]

    def read_values(self) -> list[Any]:
        """The values not read yet (see the class's example)."""
        return [r.value for r in self.read_records()]

    def read_key_values_to_map(self) -> dict[Any, Any]:
        """The latest value per key (a tombstone removes the key)."""
        result: dict[Any, Any] = {}
        for k, v in self.read_key_values():
            if v is None:
                result.pop(k, None)
            else:
                result[k] = v
        return result

    def is_empty(self) -> bool:
        """Whether every record written so far has been read (see the class's example)."""
        return self._position >= len(self._driver._log(self.topic).records)

    def get_queue_size(self) -> int:
        """How many records are written and not read yet (see the class's example)."""
        return len(self._driver._log(self.topic).records) - self._position
