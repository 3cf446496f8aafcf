"""One query's micro-batches: the Spark plan of each batch, run, and its results written.

:class:`MicroBatches` is what ``foreachBatch`` calls (through ``StreamsApp.process_batch``). A
batch from the Kafka source in ``read.mode=ranges`` runs on the query's *prepared flow*: the
stages planned once over one row per source partition, each task reading its partition's range
of the batch from the batch context (see ``dataflow.py`` and ``stage.py``); the flow is planned
again only when a topic gains partitions, and its next Datasets are planned while the driver
finishes a batch. Any other batch (records, or ranges the driver cannot tell) is planned over
its own DataFrame. The records a driver-side output writer must write and the changes of the
queryable stores are then written once per batch id, and the next batch is sized to the
workers' memory budget (see ``budget.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamtable.config import StreamsConfig
from streamtable.engine.ports import OutputWriter, ServingStore, TaskStatePersistence
from streamtable.kafka.ranges import OffsetRange, RangeReader
from streamtable.runtime.spark import dataflow, rounds
from streamtable.runtime.spark.budget import BatchSizer, is_growth_key, largest_growth
from streamtable.runtime.spark.offsets import batch_ranges
from streamtable.runtime.spark.plan import QueryPlan, StagePlan
from streamtable.runtime.spark.stage import (
    KIND_EXTERNAL,
    KIND_STORE,
    StageRunner,
    batch_context,
    batch_context_key,
)
from streamtable.serving.metrics import AppMetrics
from streamtable.storage import join, storage_at
from streamtable.topology.graph import Topology

log = logging.getLogger("streamtable.app")


class MicroBatches:
    """Runs the micro-batches of one application's query over ``plan``.

    ``blob``: the pickled topology the stages unpickle; ``spark``: gives the SparkSession;
    ``output``: gives the output writer for external topics, or None when the application
    writes to none (a ``distributed`` writer is called by the tasks, any other here once per
    batch); ``counts``: gives the Spark accumulator of the tasks' counts; ``checkpoint_dir``:
    the query's checkpoint (its offset log gives a batch's ranges); ``shared_location``: where
    each batch's wall-clock time is recorded; ``clock``: the wall clock in ms; ``fence``:
    raises when this run may no longer write (another run took over the application's lease),
    called before a batch's stages run and before its results are written.
    """

    def __init__(self, topology: Topology, plan: QueryPlan, config: StreamsConfig, *,
                 blob: bytes, task_state: TaskStatePersistence, spark: Callable[[], Any],
                 output: Callable[[], OutputWriter | None], serving: ServingStore,
                 metrics: AppMetrics, counts: Callable[[], Any], checkpoint_dir: Path,
                 shared_location: str, clock: Callable[[], int],
                 fence: Callable[[], None] = lambda: None) -> None:
        self.topology = topology
        self.plan = plan
        self.config = config
        self.blob = blob
        self.task_state = task_state
        self._spark = spark
        self._output = output
        self.serving = serving
        self.metrics = metrics
        self._counts = counts
        self.checkpoint_dir = checkpoint_dir
        self.shared_location = shared_location
        self.clock = clock
        self.fence = fence
        # set when batches come from the Kafka source, which gives one Spark partition per
        # Kafka partition: a stage reading one topic then needs no shuffle to reach its tasks
        self.source_by_partition = False
        self._flow: dataflow.Dataflow | None = None  # the prepared flow of ranges batches
        self._flow_lock = threading.Lock()
        self.last_batch_seconds = 0.0
        self._sizer: BatchSizer | None = None  # the next batch's size under the memory budget

    @property
    def initial_offsets_file(self) -> Path:
        """Where the source writes the offsets a new query starts from (see ``offsets.py``)."""
        return self.checkpoint_dir / "query-initial-offsets.json"

    @property
    def task_timeout_s(self) -> float:
        """How long a batch waits for an unreachable Kafka before it fails."""
        return int(self.config["task.timeout.ms"]) / 1000

    def process(self, df: Any, batch_id: int) -> None:
        """Run every stage over one micro-batch; ``df`` has the Kafka source's columns (topic,
        partition, offset, timestamp, key, value, headers), or one offset range per topic
        partition (topic, partition, start, end) that the stages' tasks read themselves."""
        self.fence()
        plan = self.plan
        started = time.monotonic()
        counts = self._counts()
        counts.value = Counter()
        punctuating = any(s.punctuates for s in plan.stages)
        wall_clock = self._batch_wall_clock(batch_id) if punctuating else 0
        ranges = (batch_ranges(self.checkpoint_dir / "query" / "offsets", batch_id,
                               self.initial_offsets_file) if "end" in df.columns else None)
        if plan.cyclic:
            # a cycle runs in rounds, each stage's output collected before the next round
            ranged = "end" in df.columns
            source = dataflow.range_source(df) if ranged else dataflow.record_source(df)
            table = rounds.run(self.topology, plan, source,
                               self._runner_factory(batch_id, wall_clock),
                               distributed=self.distributed_output() is not None)
        else:
            if ranges is not None:
                flow = self.prepared_flow(ranges)
                df.sparkSession.sparkContext.setLocalProperty(
                    batch_context_key(self.config.application_id),
                    batch_context(batch_id, wall_clock, ranges))
            else:
                # records, or ranges the driver cannot tell: a plan over this batch's DataFrame
                ranged = "end" in df.columns
                source = dataflow.range_source(df) if ranged else dataflow.record_source(df)
                flow = dataflow.build(self.topology, plan, source,
                                      self._runner_factory(batch_id, wall_clock),
                                      by_partition=ranged and self.source_by_partition,
                                      distributed=self.distributed_output() is not None)
                if (not ranged and sum(1 for s in plan.stages if s.external_inputs)
                        + len(flow.globals) > 1):
                    flow.cached.insert(0, source)
            table = flow.collect()
            if ranges is not None:
                flow.plan_ahead()  # the prepared flow runs again next batch
        computed = time.monotonic()
        self.fence()  # the commit: a fenced run writes no results, and Spark commits no batch
        self._write_results(batch_id, table)
        self.last_batch_seconds = time.monotonic() - started
        task_counts = Counter(counts.value)
        growth = largest_growth(task_counts)
        for key in [k for k in task_counts if is_growth_key(k)]:
            del task_counts[key]
        self.metrics.record_batch(self.last_batch_seconds, task_counts)
        self._size_next_batch(self.metrics.last_batch_records, growth)
        log.debug("batch %d: stages %.2f s, output %.2f s (%d rows)", batch_id,
                  computed - started, self.last_batch_seconds - (computed - started),
                  table.num_rows)

    @property
    def batch_limit_file(self) -> Path:
        """Where the size of the next batch is written for the source (see ``budget.py``)."""
        return self.checkpoint_dir / "query-batch-limit"

    def _size_next_batch(self, records: int, growth: int | None) -> None:
        """Size the next batch to ``worker.memory.budget.bytes`` from this one's ``records``
        and its tasks' largest memory ``growth`` (see :class:`BatchSizer`; none measured: the
        limit stays)."""
        budget = int(self.config["worker.memory.budget.bytes"])
        if not budget or growth is None or records <= 0:
            return
        cap = int(self.config["max.records.per.batch"])
        if self._sizer is None:
            self._sizer = BatchSizer(budget, cap)
        limit = self._sizer.next(records, growth)
        log.debug("the tasks of a batch of %d records grew by up to %d MB: the next batch "
                  "takes at most %d", records, growth >> 20, limit)
        if limit < cap or self.batch_limit_file.exists():
            self.batch_limit_file.write_text(str(limit))
        sized_from = self._sizer.most_per_record()
        if limit < records and sized_from is not None:
            log.info("the tasks grew by up to %d MB for %d records (budget %d MB; the most per "
                     "record of the last batches): the next batch takes at most %d",
                     sized_from[0] >> 20, sized_from[1], budget >> 20, limit)

    def prepared_flow(self, ranges: list[OffsetRange]) -> dataflow.Dataflow:
        """The query's prepared flow, planned again only when a batch has a partition it has no
        row for (a topic that gained partitions)."""
        with self._flow_lock:
            flow = self._flow
            wanted = {(t, p) for t, p, _, _ in ranges}
            if flow is None or not wanted <= flow.partitions:
                plan = self.plan
                known = {(t, p) for t in plan.source_topics + self.topology.global_topics
                         for p in range(plan.topic_partitions.get(t, 0))}
                partitions = wanted | known | (flow.partitions if flow else set())
                flow = dataflow.build(self.topology, plan,
                                      dataflow.prepared_source(self._spark(), partitions),
                                      self._runner_factory(None, 0),
                                      by_partition=self.source_by_partition,
                                      distributed=self.distributed_output() is not None)
                flow.partitions = frozenset(partitions)
                flow.plan_ahead()
                self._flow = flow
            return flow

    def prepare_in_background(self) -> None:
        """Plan the prepared flow now (on a thread of its own while the query starts): the
        first batch that needs it plans it otherwise, and reports any error."""
        if self.plan.cyclic:
            return  # its batches run in rounds (rounds.py), without a prepared flow
        try:
            self.prepared_flow([])
        except Exception as e:
            log.debug("preparing the batches' plan failed: %s", e)

    def _runner_factory(self, batch_id: int | None, wall_clock: int) -> dataflow.RunnerFactory:
        """Makes the stage runners of one batch, or (``batch_id=None``) of the prepared flow,
        whose runners read the batch from the batch context."""
        plan, topology = self.plan, self.topology

        def runner(subtopology: int, stage: StagePlan | None, streamed: bool,
                   round_: int = 0) -> StageRunner:
            # stage None: a global table's stage, which writes nothing to Kafka
            queryable = (stage.queryable_stores if stage is not None else
                         [s for s in topology.subtopology(subtopology).stores
                          if topology.stores[s].queryable])
            return StageRunner(
                self.blob, subtopology, batch_id, self.task_state, self.config.as_dict(),
                queryable, plan.topic_partitions,
                streamed=streamed, output=None if stage is None else self.distributed_output(),
                kafka=self.range_reader(),
                wall_clock_ms=wall_clock,
                metrics=None if stage is None else self._counts(), round_=round_)
        return runner

    def range_reader(self) -> RangeReader:
        """How the stages' tasks read the offset ranges of a ``read.mode=ranges`` batch."""
        return RangeReader(self.config.kafka_client_config, read_timeout_s=self.task_timeout_s)

    def distributed_output(self) -> OutputWriter | None:
        """The output writer when the tasks write their records themselves, else None."""
        output = self._output()
        return output if getattr(output, "distributed", False) else None

    def _batch_wall_clock(self, batch_id: int) -> int:
        """The wall-clock time of batch ``batch_id``: read if an earlier attempt recorded it,
        else taken from the clock and recorded before any stage runs (Spark replays only the
        last batch, so older records are dropped)."""
        storage = storage_at(join(self.shared_location, "clock"))
        name = f"{batch_id:012d}"
        if storage.exists(name):
            return int(storage.read(name))
        now = int(self.clock())
        storage.write(name, str(now).encode())
        if batch_id >= 2:
            storage.delete(f"{batch_id - 2:012d}")
        return now

    def _write_results(self, batch_id: int, table: Any) -> None:
        kinds = table.column("kind").to_pylist()
        topics = table.column("topic").to_pylist()
        keys = table.column("key").to_pylist()
        values = table.column("value").to_pylist()
        partitions = table.column("partition").to_pylist()
        external = []
        store_changes = []
        if any(k == KIND_EXTERNAL for k in kinds):
            timestamps = table.column("timestamp").to_pylist()
            headers = table.column("headers").to_pylist()
            for i, kind in enumerate(kinds):
                if kind == KIND_EXTERNAL:
                    external.append((
                        topics[i], keys[i], values[i], timestamps[i],
                        [(h["key"], h["value"]) for h in headers[i] or ()], partitions[i]))
        for i, kind in enumerate(kinds):
            if kind == KIND_STORE:
                store_changes.append((topics[i], keys[i], values[i], partitions[i]))
        if external:
            output = self._output()
            assert output is not None  # records for Kafka come only from an application with sinks
            output.write(batch_id, external)
        self.serving.apply(batch_id, store_changes)
        log.debug("batch %d: %d records out, %d store changes", batch_id, len(external),
                  len(store_changes))
