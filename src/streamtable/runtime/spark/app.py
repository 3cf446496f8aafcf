"""StreamsApp: a topology running as one Spark Structured Streaming query.

Each micro-batch runs every sub-topology as a stage: the stage's records are routed to their
task (the source partition, or the hash of the key for repartitioned records), each task runs the
shared processors over its records and commits its state (see ``state.py``), and the records for
Kafka and the changes of queryable stores are written once per batch id.
"""

from __future__ import annotations

import functools
import logging
import secrets
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark import cloudpickle

from streamtable.config import StreamsConfig
from streamtable.engine.ports import (
    OutputWriter,
    QueryableStore,
    ServingStore,
    TaskStatePersistence,
)
from streamtable.errors import ApplicationFailedError
from streamtable.kafka.output import KafkaOutput
from streamtable.runtime.spark.placement import check_shared_location
from streamtable.runtime.spark.plan import QueryPlan, plan_query, routing_labels
from streamtable.runtime.spark.progress import (
    _APPS,
    CountsParam,
    ensure_progress_listener,
    remove_progress_listener,
)
from streamtable.runtime.spark.stage import (
    KIND_EXTERNAL,
    KIND_INTERNAL,
    KIND_STORE,
    OUTPUT_DDL,
    RECORD_FIELDS,
    StageRunner,
)
from streamtable.runtime.spark.state import FileTaskStatePersistence
from streamtable.serving import configured_serving_store
from streamtable.serving.metrics import AppMetrics
from streamtable.storage import join
from streamtable.topology.graph import Topology

log = logging.getLogger("streamtable.app")


RECORD_COLUMNS = [name for name, _ in RECORD_FIELDS]

__all__ = ["ApplicationFailedError", "KafkaOutput", "StreamsApp"]


class StreamsApp:
    """Runs a topology on Spark.

    >>> app = StreamsApp(topology, application_id="us-share-holders",      # doctest: +SKIP
    ...                  bootstrap_servers="localhost:9092", state_dir=".streamtable")
    >>> app.start()                                                        # doctest: +SKIP
    >>> app.store("us-share-holders").get("client1")                       # doctest: +SKIP
    {1, 3}
    >>> app.stop()                                                         # doctest: +SKIP

    Settings use Kafka Streams' keys: ``application.id``, ``bootstrap.servers``,
    ``commit.interval.ms`` (the trigger interval), ``cache.max.bytes.buffering`` (0: forward every
    change; otherwise the last change per key per batch), ``default.key.serde`` ...; and
    ``max.records.per.batch`` caps a micro-batch (the throughput/latency dial).

    Where things live: ``state.dir`` is this machine's directory (the query's checkpoint, the
    embedded serving store); ``state.location`` (default: ``state.dir``) is where tasks keep
    their durable state and the sink its batch markers, and must be reachable from every
    executor: a directory on one machine or a shared mount, or a URL (``s3://bucket/prefix``,
    ``gs://``, ``hdfs://``; see ``streamtable.storage``). On a cluster, a location the executors
    cannot all see fails at start. ``serving.url`` puts the serving store in PostgreSQL.

    The engine's ports can be given: ``output`` (an ``OutputWriter``; default: Kafka, written
    by each task on its executor), ``serving`` (a ``ServingStore``) and ``task_state`` (a
    ``TaskStatePersistence``; default: files under ``state.location``).

    Watching it: ``metrics`` (an :class:`~streamtable.serving.metrics.AppMetrics`: records in
    and out per topic, dropped, dead-lettered, lag, batch time), ``health()``, and, when this
    app starts Spark's JVM, Spark's log in ``log_file`` (``<state.dir>/<application.id>/
    streamtable.log``; on the console too with ``verbose``).
    """

    def __init__(
        self,
        topology: Topology,
        application_id: str | None = None,
        bootstrap_servers: str | None = None,
        state_dir: str | Path | None = None,
        config: Mapping[str, Any] | None = None,
        *,
        master: str | None = None,
        spark: Any = None,
        output: OutputWriter | None = None,
        serving: ServingStore | None = None,
        task_state: TaskStatePersistence | None = None,
        development_broker: bool = False,
        verbose: bool = False,
    ) -> None:
        settings = dict(config or {})
        if application_id:
            settings["application.id"] = application_id
        if bootstrap_servers:
            settings["bootstrap.servers"] = bootstrap_servers
        if state_dir is not None:
            settings["state.dir"] = str(state_dir)
        self.config = StreamsConfig(settings)
        self.topology = topology
        self.application_id = self.config.application_id
        self.app_dir = Path(self.config["state.dir"]) / self.application_id
        self.checkpoint_dir = self.app_dir / "checkpoint"
        self._task_state = task_state
        self.serving: ServingStore = serving or configured_serving_store(self.config)
        self.master = master
        self._spark = spark
        self._output = output
        self.development_broker = development_broker
        self.verbose = verbose
        # where Spark's JVM logs, when this app started it (see ``spark``)
        self.log_file: Path | None = None
        self._query: Any = None
        self._failure: Any = None  # the error the last query died of
        self._warm_up: Any = None
        self._run: str | None = None  # the run id, read from the checkpoint once
        self._plan: QueryPlan | None = None
        self._blob = cloudpickle.dumps(topology)
        self.last_batch_seconds = 0.0
        self.batches = 0
        self.metrics = AppMetrics(self.application_id)
        self._counts: Any = None  # the tasks' counts: a Spark accumulator (see metrics)
        # set when batches come from the Kafka source, which gives one Spark partition per
        # Kafka partition: a stage reading one topic then needs no shuffle to reach its tasks
        self._source_by_partition = False

    # -- setup -----------------------------------------------------------------------------
    @property
    def shared_location(self) -> str:
        """Where this run of the application keeps what every executor must reach (task state,
        the sink's batch markers): ``<state.location>/<application.id>/run-<id>``. The run id
        lives in the query's checkpoint, so resetting the checkpoint starts from nothing."""
        location = self.config.get("state.location") or str(Path(self.config["state.dir"])
                                                             .resolve())
        return join(location, self.application_id, f"run-{self._run_id()}")

    def _run_id(self) -> str:
        if self._run is None:
            path = self.checkpoint_dir / "run-id"
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                new = secrets.token_hex(6)
                tmp = path.with_name(f".run-id.{new}")
                tmp.write_text(new)
                tmp.replace(path)
            self._run = path.read_text().strip()
        return self._run

    @property
    def task_state(self) -> TaskStatePersistence:
        if self._task_state is None:
            local = None
            if self.config.rocksdb_stores:
                # this machine's disk, at the same absolute path on every executor
                local = str((self.app_dir / "local" / f"run-{self._run_id()}").resolve())
            self._task_state = FileTaskStatePersistence(join(self.shared_location, "tasks"),
                                                        local_dir=local)
        return self._task_state

    @property
    def spark(self) -> Any:
        if self._spark is None:
            from pyspark import SparkContext

            from streamtable.logs import LOG_FILE_NAME
            from streamtable.runtime.spark.session import spark_session

            # a JVM started here logs to the application's directory; a running one logs
            # where it was told to already
            log_file = (None if SparkContext._active_spark_context is not None
                        else (self.app_dir / LOG_FILE_NAME).resolve())
            self._spark = spark_session(self.master, f"streamtable-{self.application_id}",
                                        log_file=log_file, verbose=self.verbose)
            self.log_file = log_file
        return self._spark

    def prepare(self, source_partitions: Mapping[str, int] | None = None) -> QueryPlan:
        """Plan the query: task counts from the source topics' partition counts (read from
        Kafka unless given), routing labels, and the topics the application needs."""
        if source_partitions is None:
            source_partitions = self._setup_topics()
        plan = plan_query(self.topology, self.application_id, source_partitions,
                          self.config.get("num.partitions"),
                          dead_letters=bool(self.config.dead_letter_topic))
        for stage in plan.stages:
            if stage.partitions not in plan.labels:
                plan.labels[stage.partitions] = routing_labels(stage.partitions)
        self._plan = plan
        return plan

    def _setup_topics(self) -> dict[str, int]:
        from streamtable.kafka.admin import check_reachable, ensure_topics, partition_counts

        bootstrap = self.config["bootstrap.servers"]
        check_reachable(bootstrap)
        counts = partition_counts(bootstrap, self.topology.source_topics)
        p = max(counts.values()) if counts else 1
        outputs = {t: p for t in self.topology.sink_topics}
        dlq = self.config.dead_letter_topic
        if dlq:
            outputs[dlq] = p
        if outputs:
            ensure_topics(bootstrap, outputs)
        return counts

    def _output_writer(self) -> OutputWriter:
        if self._output is None:
            self._output = KafkaOutput(
                self.config["bootstrap.servers"], self.application_id,
                join(self.shared_location, "sink"),
            )
        return self._output

    # -- one micro-batch -------------------------------------------------------------------
    def process_batch(self, df: Any, batch_id: int) -> None:
        """Run every stage over one micro-batch (``foreachBatch``); ``df`` has the Kafka
        source's columns: topic, partition, offset, timestamp, key, value, headers."""
        from pyspark.sql import functions as F

        plan = self._plan or self.prepare()
        started = time.monotonic()
        counts = self._task_counts()
        counts.value = Counter()
        external_readers = sum(1 for s in plan.stages if s.external_inputs)
        distributed = self._distributed_output()
        source = df.select(*RECORD_COLUMNS)
        cached = []
        if external_readers > 1:
            source = source.persist()
            cached.append(source)
        outputs: dict[int, Any] = {}
        results = []
        for stage in plan.stages:
            parts = []
            if stage.external_inputs:
                parts.append(source.where(F.col("topic").isin(stage.external_inputs))
                             .withColumn("_route", F.col("partition")))
            for up in stage.upstream:
                parts.append(
                    outputs[up]
                    .where((F.col("kind") == KIND_INTERNAL)
                           & F.col("topic").isin(stage.internal_inputs))
                    .withColumn("_route", F.coalesce(
                        F.col("route"), F.expr(f"pmod(hash(key), {stage.partitions})")))
                    .select(*RECORD_COLUMNS, "_route")
                )
            stage_input = functools.reduce(lambda a, b: a.unionByName(b), parts)
            streamed = (self._source_by_partition and len(parts) == 1 and not stage.upstream
                        and len(stage.external_inputs) == 1)
            if streamed:
                # each Spark partition of the Kafka source is one Kafka partition in offset
                # order: one task, whose records can be processed as they arrive
                routed = stage_input.select(*RECORD_COLUMNS, "_route")
            else:
                labels = F.array(*[F.lit(x).cast("long") for x in plan.labels[stage.partitions]])
                routed = (stage_input
                          .withColumn("_label", F.element_at(labels, F.col("_route") + 1))
                          .repartition(stage.partitions, "_label")
                          .select(*RECORD_COLUMNS, "_route"))
            runner = StageRunner(
                self._blob, stage.subtopology, batch_id, self.task_state,
                self.config.as_dict(), stage.queryable_stores, plan.topic_partitions,
                streamed=streamed, output=distributed, metrics=counts,
            )
            out = routed.mapInArrow(runner, OUTPUT_DDL)
            # A stage read both by a later stage and by the driver is kept, so that it runs once
            # (running it twice would be correct, from the same state, but twice the work). A
            # stage read only by later stages runs as part of theirs.
            collect = stage.has_results or not stage.consumed_later
            if stage.consumed_later and collect:
                out = out.persist()
                cached.append(out)
            outputs[stage.subtopology] = out
            if collect:
                # with a distributed writer the tasks wrote their records themselves: only
                # the changes of queryable stores come to the driver
                results.append(out.where(F.col("kind") == KIND_STORE) if distributed
                               else out.where(F.col("kind") != KIND_INTERNAL))
        try:
            table = functools.reduce(lambda a, b: a.unionByName(b), results).toArrow()
            computed = time.monotonic()
            self._write_results(batch_id, table)
        finally:
            for c in cached:
                c.unpersist()
        self.last_batch_seconds = time.monotonic() - started
        self.metrics.record_batch(self.last_batch_seconds, counts.value)
        log.debug("batch %d: stages %.2f s, output %.2f s (%d rows)", batch_id,
                 computed - started, self.last_batch_seconds - (computed - started),
                 table.num_rows)
        self.batches += 1

    def _task_counts(self) -> Any:
        if self._counts is None:
            self._counts = self.spark.sparkContext.accumulator(Counter(), CountsParam())
        return self._counts

    def health(self) -> tuple[bool, dict[str, Any]]:
        """``(healthy, details)``: running, or why not (the failure's paragraph).

        >>> app.health()                                            # doctest: +SKIP
        (True, {'status': 'running', 'application_id': 'word-count', 'batches': 12, ...})
        """
        details: dict[str, Any] = {"application_id": self.application_id,
                                   "batches": self.metrics.batches,
                                   "lag": self.metrics.total_lag}
        try:
            self.raise_if_failed()
        except ApplicationFailedError as e:
            return False, {"status": "failed", "error": str(e), **details}
        if self.is_running:
            return True, {"status": "running", **details}
        return False, {"status": "stopped", **details}

    def state_entries(self) -> dict[str, int]:
        """Entries per queryable store, as served."""
        return {name: len(self.serving.view(name)) for name, spec in
                sorted(self.topology.stores.items()) if spec.queryable}

    def _on_progress(self, progress: Any) -> None:
        """Spark's report of a finished batch: the lag per partition, from the source's latest
        offsets and the batch's end offsets."""
        import json

        lag: dict[tuple[str, int], int] = {}
        for source in progress.sources or ():
            try:
                latest = json.loads(source.latestOffset or "null") or {}
                end = json.loads(source.endOffset or "null") or {}
            except (TypeError, ValueError):
                continue
            for topic, partitions in latest.items():
                for partition, offset in partitions.items():
                    done = end.get(topic, {}).get(partition, 0)
                    lag[(topic, int(partition))] = max(0, int(offset) - int(done))
        self.metrics.record_lag(lag)

    def _distributed_output(self) -> OutputWriter | None:
        """The output writer when the tasks write their records themselves (see
        ``OutputWriter``), else None (none needed, or one the driver calls)."""
        if not (self.topology.sink_topics or self.config.dead_letter_topic):
            return None
        output = self._output_writer()
        return output if getattr(output, "distributed", False) else None

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
                    external.append({
                        "topic": topics[i], "key": keys[i], "value": values[i],
                        "timestamp": timestamps[i], "partition": partitions[i],
                        "headers": [(h["key"], h["value"]) for h in headers[i] or ()],
                    })
        for i, kind in enumerate(kinds):
            if kind == KIND_STORE:
                store_changes.append((topics[i], keys[i], values[i], partitions[i]))
        if external:
            self._output_writer().write(batch_id, external)
        self.serving.apply(batch_id, store_changes)
        log.debug("batch %d: %d records out, %d store changes", batch_id, len(external),
                  len(store_changes))

    # -- the streaming query ---------------------------------------------------------------
    def start(self, *, available_now: bool = False) -> StreamsApp:
        """Start the query (in the background). With ``available_now`` it processes what the
        source topics hold now, in batches, and stops."""
        from streamtable.kafka.source import register

        spark = self.spark
        plan = self.prepare()
        self._warm_up = _warm_up_python_workers(
            spark, max(s.partitions for s in plan.stages), self._distributed_output())
        register(spark)
        reader = (spark.readStream.format("streamtable-kafka")
                  .option("bootstrap.servers", self.config["bootstrap.servers"])
                  .option("topics", ",".join(plan.source_topics))
                  .option("group.id", self.application_id))
        max_records = self.config.get("max.records.per.batch")
        if max_records:
            reader = reader.option("max.records.per.batch", str(max_records))
        first = self.config.get("first.batch.records")
        if first is not None:
            reader = reader.option("first.batch.records", str(first))
        if self.development_broker:
            from streamtable.kafka.broker import development_source_options

            for k, v in development_source_options().items():
                reader = reader.option(k, v)
        writer = (reader.load().writeStream
                  .queryName(self.application_id)
                  .option("checkpointLocation", str(self.checkpoint_dir / "query"))
                  .foreachBatch(self.process_batch))
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:
            interval = int(self.config["commit.interval.ms"])
            if interval > 0:
                writer = writer.trigger(processingTime=f"{interval} milliseconds")
        ensure_progress_listener(spark)
        _APPS[self.application_id] = self
        check_shared_location(spark, self.shared_location)
        self._source_by_partition = True
        self._failure = None
        self._query = writer.start()
        log.info("started %s on %s: %d stages, tasks %s", self.application_id,
                 spark.sparkContext.master, len(plan.stages),
                 [s.partitions for s in plan.stages])
        return self

    def run_until_caught_up(self, timeout: float | None = None) -> None:
        """Process everything the source topics hold now, then stop."""
        self.start(available_now=True)
        try:
            self.await_termination(timeout)
        finally:
            if not self.is_running:
                self.stop()

    def process_all_available(self) -> None:
        """Block until every record available now has been processed."""
        self._query.processAllAvailable()

    def await_termination(self, timeout: float | None = None) -> bool:
        if timeout is None:
            self._query.awaitTermination()
            return True
        return bool(self._query.awaitTermination(timeout))

    @property
    def is_running(self) -> bool:
        return self._query is not None and self._query.isActive

    def stop(self) -> None:
        """Stop the query; a later ``start()`` resumes from the checkpoint."""
        if self._warm_up is not None:
            self._warm_up.join(30)  # a job still running when the JVM stops would fail noisily
            self._warm_up = None
        if self._query is not None:
            self._query.stop()
            self._failure = self._query.exception()
            self._query = None
            if _APPS.get(self.application_id) is self:
                del _APPS[self.application_id]
            if self._spark is not None and not self._spark.streams.active:
                # no query left to report on: a Python listener still registered when the
                # JVM shuts down would be called after Python's side is gone
                remove_progress_listener(self._spark)

    def store(self, name: str) -> QueryableStore:
        """Query a materialized store (``get``, ``all``, ``range``, ``prefix_scan``). Raises
        :class:`ApplicationFailedError` once the query has died: a dead application must not
        look like an empty one."""
        self.raise_if_failed()
        spec = self.topology.stores.get(name)
        if spec is None or not spec.queryable:
            queryable = sorted(s for s, v in self.topology.stores.items() if v.queryable)
            raise KeyError(f"no queryable store named {name!r}; queryable stores: {queryable}")
        return self.serving.view(name)

    def raise_if_failed(self) -> None:
        """Raise :class:`ApplicationFailedError` if the query died of an error."""
        query = self._query
        error = self._failure if query is None or query.isActive else query.exception()
        if error is not None:
            raise ApplicationFailedError(self.application_id, str(error), self.log_file)

    def __enter__(self) -> StreamsApp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _WarmWorkers:
    """The task of the warm-up job: the stage code imported and, when tasks write output
    themselves, the worker's producer connected."""

    def __init__(self, output: Any) -> None:
        self.output = output

    def __call__(self, batches: Any) -> Any:
        import streamtable.runtime.spark.stage  # noqa: F401  (what the first batch needs)

        if self.output is not None and hasattr(self.output, "warm_up"):
            self.output.warm_up()
        yield from batches


def _warm_up_python_workers(spark: Any, workers: int, output: Any) -> Any:
    """Start Spark's Python workers in the background while the query starts, so the first
    batch finds them running (a job of ``workers`` tiny tasks; ``output``: a distributed
    output writer to connect there); returns the thread."""
    import threading

    def warm() -> None:
        try:
            (spark.range(0, workers, numPartitions=workers)
             .mapInArrow(_WarmWorkers(output), "id long").collect())
        except Exception as e:  # the first batch starts them anyway and reports any error
            log.debug("warming up the Python workers failed: %s", e)

    thread = threading.Thread(target=warm, name="streamtable-warm-up", daemon=True)
    thread.start()
    return thread
