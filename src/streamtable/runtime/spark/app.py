"""StreamsApp: a topology running as one Spark Structured Streaming query.

Each micro-batch runs every sub-topology as a stage (``batches.py`` plans and runs it): the
stage's records are routed to their task (the source partition, or the hash of the key for
repartitioned records), each task runs the shared processors over its records through the batch
host and commits its state (see ``engine/batch.py`` and ``state/persistence.py``), and the
records for Kafka and the changes of queryable stores are written once per batch id. The app
itself keeps the query's lifecycle, its plan, settings, metrics and the serving store.

Global tables (``StreamsBuilder.global_table``): the query reads a global table's topic like any
other, but no stage takes it as partitioned input. Each micro-batch first runs one task over all
of the batch's records of that topic (every partition), which updates the global store and
commits it as task state (sub-topology = the global one, task 0), exactly once per batch id like
every task. Only then do the stages run, and each task that joins the table checks out the global
store as of this batch (read only). So a batch's global updates are visible to all of the
batch's stream records, whatever their timestamps; a replayed batch recomputes the same global
state from the previous batch's and sees the same table. Kafka Streams differs: it restores a
global table in full before processing starts, then a global thread applies updates as they
arrive, not synchronized with the stream tasks (a stream record may see an update a little
earlier or later than its timestamp suggests); here the synchronization point is the micro-batch.
The test driver in batch mode follows the same rule.

Wall-clock punctuation (the Processor API): a stage holding a user's processor runs every one of
its tasks in every micro-batch (a heartbeat row per task joins its input), and the query makes a
micro-batch at least every ``commit.interval.ms`` even when no record arrives (the source then
reports a new position of a clock it keeps beside the topics' offsets; Spark runs a batch only
for a new position). Each batch's wall-clock time is recorded under the batch id before its
stages run, so a replayed batch punctuates at the same time as its first attempt.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from streamtable.config import StreamsConfig, spark_config
from streamtable.engine.ports import (
    OutputWriter,
    QueryableStore,
    ServingStore,
    TaskStatePersistence,
)
from streamtable.errors import ApplicationFailedError, LeaseLostError, StoreNotReadyError
from streamtable.kafka.output import KafkaOutput
from streamtable.runtime.spark import shipping
from streamtable.runtime.spark.batches import MicroBatches
from streamtable.runtime.spark.budget import first_batch_records
from streamtable.runtime.spark.placement import check_shared_location
from streamtable.runtime.spark.plan import QueryPlan, plan_query, routing_labels
from streamtable.runtime.spark.process.startup import (
    fast_checkpoint_files,
    planning_begins,
    planning_ends,
    release_idle_planners_soon,
    warm_up_python_workers,
)
from streamtable.runtime.spark.progress import (
    CountsParam,
    listen_to_progress,
    partition_lag,
    stop_listening,
)
from streamtable.serving import configured_serving_store
from streamtable.serving.metrics import AppMetrics
from streamtable.state.persistence import FileTaskStatePersistence
from streamtable.storage import join, storage_at
from streamtable.storage.lease import Lease
from streamtable.topology.graph import Topology

log = logging.getLogger("streamtable.app")


__all__ = ["ApplicationFailedError", "KafkaOutput", "StoreNotReadyError", "StreamsApp"]


def application_location(config: StreamsConfig) -> str:
    """``<state.location>/<application.id>`` (``state.dir`` when no ``state.location`` is
    set): where an application's lease and the state of each of its runs live.

    >>> application_location(StreamsConfig({"application.id": "shop",
    ...                                     "state.location": "s3://bucket/state"}))
    's3://bucket/state/shop'
    """
    location = config.get("state.location") or str(Path(config["state.dir"]).resolve())
    return join(location, config.application_id)


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
    change; otherwise the last change per key per batch, or earlier when the cache is full),
    ``default.key.serde`` ...; and
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
        clock: Callable[[], int] | None = None,
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
        if spark is not None and (ignored := spark_config(self.config)):
            log.warning("the spark.* settings (%s) are for a SparkSession the application "
                        "starts: the one it was given keeps its own", ", ".join(sorted(ignored)))
        self._output = output
        self.development_broker = development_broker
        self.verbose = verbose
        # where Spark's JVM logs, when this app started it (see ``spark``)
        self.log_file: Path | None = None
        self._query: Any = None
        self._failure: Any = None  # the error the last query died of
        self._ready = False  # a micro-batch's results have been served (see is_ready)
        self._warm_up: Any = None
        self._run: str | None = None  # the run id, read from the checkpoint once
        self._plan: QueryPlan | None = None
        self._batches: MicroBatches | None = None  # runs the micro-batches of the plan
        self._blob = shipping.dumps(topology)
        self.last_batch_seconds = 0.0
        self.batches = 0
        # wall-clock time in ms for punctuations (a test may pass its own clock)
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.metrics = AppMetrics(self.application_id)
        self._counts: Any = None  # the tasks' counts: a Spark accumulator (see metrics)
        self._lease: Lease | None = None  # held while the query runs (one writer at a time)
        self._fenced: LeaseLostError | None = None  # set when another run took over
        # the application file, as errors name it (the CLI sets it)
        self.app_file = "app.py"
        # where the source stops (an upgrade's backfill: where the application is)
        self.end_offsets: dict[str, dict[str, int]] | None = None

    # -- setup -----------------------------------------------------------------------------
    @property
    def application_location(self) -> str:
        """``<state.location>/<application.id>``: the application's durable storage, which
        holds its lease and each run's state."""
        return application_location(self.config)

    @property
    def shared_location(self) -> str:
        """Where this run of the application keeps what every executor must reach (task state,
        the sink's batch markers): ``<state.location>/<application.id>/run-<id>``. The run id
        lives in the query's checkpoint, so resetting the checkpoint starts from nothing."""
        return join(self.application_location, f"run-{self._run_id()}")

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

    def switch_run(self, run: str) -> None:
        """Make ``run`` the application's run (an upgrade's state, written under it): one
        atomic write of the run id in the query's checkpoint."""
        path = self.checkpoint_dir / "run-id"
        tmp = path.with_name(f".run-id.{run}")
        tmp.write_text(run)
        tmp.replace(path)
        self._run = run
        self._task_state = None
        self._output = None
        self._batches = None

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
            from streamtable.runtime.spark.process.session import spark_session

            # a JVM started here logs to the application's directory; a running one logs
            # where it was told to already
            log_file = (None if SparkContext._active_spark_context is not None
                        else (self.app_dir / LOG_FILE_NAME).resolve())
            self._spark = spark_session(self.master, f"streamtable-{self.application_id}",
                                        spark_config(self.config), log_file=log_file,
                                        verbose=self.verbose)
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
        self._batches = None
        return plan

    def _setup_topics(self) -> dict[str, int]:
        from streamtable.kafka.admin import (
            admin_client,
            check_reachable,
            ensure_topics,
            partition_counts,
        )

        bootstrap = self.config["bootstrap.servers"]
        client = self.config.kafka_client_config
        admin = admin_client(bootstrap, client)  # settings librdkafka refuses: said first
        check_reachable(bootstrap)
        counts = partition_counts(bootstrap, self.topology.source_topics, client=admin)
        p = max(counts.values()) if counts else 1
        outputs = {t: p for t in self.topology.sink_topics}
        dlq = self.config.dead_letter_topic
        if dlq:
            outputs[dlq] = p
        if outputs:
            ensure_topics(bootstrap, outputs, client_config=client)
        return counts

    def _output_writer(self) -> OutputWriter:
        if self._output is None:
            self._output = KafkaOutput(
                self.config["bootstrap.servers"], self.application_id,
                join(self.shared_location, "sink"), flush_timeout_s=self._task_timeout_s,
                client_config=self.config.kafka_client_config,
            )
        return self._output

    # -- one micro-batch -------------------------------------------------------------------
    def _micro_batches(self) -> MicroBatches:
        """The runner of this query's micro-batches (made again when the plan changes)."""
        if self._batches is None:
            plan = self._plan or self.prepare()
            self._batches = MicroBatches(
                self.topology, plan, self.config, blob=self._blob, task_state=self.task_state,
                spark=lambda: self.spark, output=self._writer, serving=self.serving,
                metrics=self.metrics, counts=self._task_counts,
                checkpoint_dir=self.checkpoint_dir, shared_location=self.shared_location,
                clock=self.clock, fence=self._check_lease)
        return self._batches

    def process_batch(self, df: Any, batch_id: int) -> None:
        """Run every stage over one micro-batch (``foreachBatch``; see
        :class:`~streamtable.runtime.spark.batches.MicroBatches`)."""
        batches = self._micro_batches()
        if planning_ends(self):  # the query's first batch: its planner workers idle now
            release_idle_planners_soon(self.spark)
        batches.process(df, batch_id)
        self.last_batch_seconds = batches.last_batch_seconds
        self.batches += 1

    def _writer(self) -> OutputWriter | None:
        """The output writer, or None for an application that writes to no topic."""
        if not (self.topology.sink_topics or self.config.dead_letter_topic):
            return None
        return self._output_writer()

    @property
    def _task_timeout_s(self) -> float:
        """How long a batch waits for an unreachable Kafka before it fails."""
        return int(self.config["task.timeout.ms"]) / 1000

    def _task_counts(self) -> Any:
        if self._counts is None:
            self._counts = self.spark.sparkContext.accumulator(Counter(), CountsParam())
        return self._counts

    def health(self) -> tuple[bool, dict[str, Any]]:
        """``(healthy, details)``: running, or why not (the failure's paragraph).

        >>> app.health()                                            # doctest: +SKIP
        (True, {'status': 'running', 'application_id': 'word-count', 'batches': 12, ...})

        ``ready`` in the details says whether the stores hold state yet (:attr:`is_ready`).
        """
        details: dict[str, Any] = {"application_id": self.application_id,
                                   "batches": self.metrics.batches,
                                   "lag": self.metrics.total_lag,
                                   "ready": self.is_ready}
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

    def _on_progress(self, progress: Any) -> int | None:
        """Spark's report of a finished batch (the query's progress callback): the lag per
        partition into the metrics; returns the total, for the report's log line."""
        self.metrics.record_lag(partition_lag(progress))
        return self.metrics.total_lag

    # -- the streaming query ---------------------------------------------------------------
    def source_options(self, plan: QueryPlan) -> dict[str, str]:
        """The options of the ``streamtable-kafka`` source reading ``plan``'s topics, the Kafka
        client settings (:func:`~streamtable.config.kafka_client_config`) as ``kafka.<key>``:
        Spark shows options in plans with the values of secret keys redacted
        (``spark.redaction.regex``)."""
        options = {"bootstrap.servers": str(self.config["bootstrap.servers"]),
                   "topics": ",".join(plan.source_topics + self.topology.global_topics),
                   "group.id": self.application_id,
                   # the stages read their partitions' records themselves
                   "read.mode": "ranges",
                   "task.timeout.ms": str(self.config["task.timeout.ms"]),
                   # the start of a new query's first batch, for its ranges (see offsets.py)
                   "initial.offsets.file": str(self._micro_batches().initial_offsets_file),
                   # the next batch's size under the workers' memory budget (see budget.py)
                   "batch.limit.file": str(self._micro_batches().batch_limit_file),
                   # the source's planning logs from the level this process logs at
                   "log.level": logging.getLevelName(
                       logging.getLogger("streamtable").getEffectiveLevel())}
        for key, value in self.config.kafka_client_config.items():
            if key != "bootstrap.servers":
                options[f"kafka.{key}"] = str(value)
        max_records = self.config.get("max.records.per.batch")
        if max_records:
            options["max.records.per.batch"] = str(max_records)
        if self.end_offsets is not None:
            import json

            options["ending.offsets"] = json.dumps(self.end_offsets)
        first = self.config.get("first.batch.records")
        if first is None and self.topology.stores:
            # sized for the memory budget until a batch is measured (stateless tasks stream
            # their records: their memory does not grow with the batch)
            first = first_batch_records(int(self.config["worker.memory.budget.bytes"]))
        if first is not None:
            options["first.batch.records"] = str(first)
        options["batch.split"] = str(self.config["batch.split"])
        if self.topology.global_topics:
            # Kafka Streams restores a global table before processing: its records first
            options["topics.read.first"] = ",".join(self.topology.global_topics)
        if self.topology.table_topics:
            # at a batch's cut a table's records go first, as they do in a task at equal times
            options["topics.tables"] = ",".join(self.topology.table_topics)
        if any(s.punctuates for s in plan.stages):
            # batches without records too, for wall-clock punctuation (see the module's doc)
            options["clock.tick.ms"] = str(int(self.config["commit.interval.ms"]) or 1000)
        if self.development_broker:
            from streamtable.kafka.broker import development_source_options

            options.update(development_source_options())
        return options

    # -- one writer at a time ---------------------------------------------------------------
    def hold_lease(self, take_over: bool = False) -> None:
        """Hold the application's lease (``start`` does, if not held yet; see
        :mod:`streamtable.storage.lease`): raises
        :class:`~streamtable.errors.LeaseHeldError` naming the run that holds it, unless
        ``take_over``, which fences that run and returns once it has stopped.

        >>> app.hold_lease()                                       # doctest: +SKIP
        """
        if self._lease is None:
            self._lease = Lease(storage_at(self.application_location), self.application_id,
                                timeout_ms=int(self.config["lease.timeout.ms"]))
        if self._lease.held is None:
            self._lease.acquire(take_over=take_over)
            self._fenced = None
            self._lease.keep(self._on_lease_lost)

    def _check_lease(self) -> None:
        """The fence of every commit: raises :class:`LeaseLostError` once another run has
        taken the lease."""
        if self._lease is not None:
            self._lease.check()

    def _on_lease_lost(self, error: LeaseLostError) -> None:
        """Another run took the lease (seen by the heartbeat): stop the query now, whatever
        batch it is in, then say so to the run taking over."""
        self._fenced = error
        query = self._query
        if query is not None:
            try:
                query.stop()
            except Exception as e:
                log.warning("stopping the fenced query: %s", e)
        if self._lease is not None:
            self._lease.release()

    def _release_lease(self) -> None:
        if self._lease is not None and self._lease.held is not None:
            self._lease.release()

    def start(self, *, available_now: bool = False, take_over: bool = False) -> StreamsApp:
        """Start the query (in the background). With ``available_now`` it processes what the
        source topics hold now, in batches, and stops.

        Only one run of an application writes at a time: the start is refused
        (:class:`~streamtable.errors.LeaseHeldError`, naming the running one) while another
        run holds the application's lease; ``take_over`` fences that run instead and goes on
        once it has stopped (see :mod:`streamtable.storage.lease`)."""
        self.hold_lease(take_over)
        try:
            # state written for another topology: kept, built, dropped or refused per store
            from streamtable.runtime.spark.upgrade import upgrade

            plan = self.prepare()  # once per start: the upgrade and the query use it
            upgrade(self)
            self._start_query(plan, available_now)
        except BaseException:
            planning_ends(self)
            self._release_lease()
            raise
        return self

    def _start_query(self, plan: QueryPlan, available_now: bool) -> None:
        from streamtable.runtime.spark.kafka_source import register

        spark = self.spark
        batches = self._micro_batches()
        planning_begins(self)  # from the source's load() on, until the first batch runs
        self._warm_up = warm_up_python_workers(
            spark, max(s.partitions for s in plan.stages),
            batches.distributed_output())
        register(spark)
        reader = spark.readStream.format("streamtable-kafka")
        for key, value in self.source_options(plan).items():
            reader = reader.option(key, value)
        interval = int(self.config["commit.interval.ms"])
        stream = (reader.load().writeStream
                  .queryName(self.application_id)
                  .option("checkpointLocation", str(self.checkpoint_dir / "query"))
                  .foreachBatch(self.process_batch))
        if available_now:
            stream = stream.trigger(availableNow=True)
        else:
            if interval > 0:
                stream = stream.trigger(processingTime=f"{interval} milliseconds")
        fast_checkpoint_files(spark)
        listen_to_progress(spark, self.application_id, self._on_progress)
        check_shared_location(spark, self.shared_location)
        batches.source_by_partition = True
        self._failure = None
        self._query = stream.start()
        # the batches' plan, made while the query starts (py4j calls: ~0.3 s on a cold JVM)
        threading.Thread(target=batches.prepare_in_background, daemon=True,
                         name="streamtable-plan").start()
        log.info("started %s on %s: %d stages, tasks %s", self.application_id,
                 spark.sparkContext.master, len(plan.stages),
                 [s.partitions for s in plan.stages])

    def run_until_caught_up(self, timeout: float | None = None) -> None:
        """Process everything the source topics hold now, then stop.

        Raises :class:`ApplicationFailedError` when the query dies: one paragraph naming the
        input record, the operator and the user's code, with Spark's exception (and its whole
        trace) as ``__cause__``.

        >>> try:                                                        # doctest: +SKIP
        ...     app.run_until_caught_up(timeout=300)
        ... except ApplicationFailedError as e:
        ...     print(e.topic, e.partition, e.offset, e)
        """
        self.start(available_now=True)
        try:
            self.await_termination(timeout)
        finally:
            if not self.is_running:
                self.stop()

    def process_all_available(self) -> None:
        """Block until every record available now has been processed; raises
        :class:`ApplicationFailedError` when the query dies."""
        with self._failures():
            self._query.processAllAvailable()

    def await_termination(self, timeout: float | None = None) -> bool:
        """Block until the query stops (True) or ``timeout`` seconds pass (False); raises
        :class:`ApplicationFailedError` when the query dies."""
        with self._failures():
            if timeout is None:
                self._query.awaitTermination()
                return True
            return bool(self._query.awaitTermination(timeout))

    @contextlib.contextmanager
    def _failures(self) -> Iterator[None]:
        """Spark's error of a dead query, raised as the one paragraph users read (the CLI
        prints the same), with Spark's exception chained as ``__cause__``."""
        from pyspark.errors import StreamingQueryException

        try:
            yield
        except StreamingQueryException as e:
            raise self._failed(e) from e

    def _failed(self, error: BaseException) -> ApplicationFailedError:
        return ApplicationFailedError(self.application_id, str(error), self.log_file)

    @property
    def is_ready(self) -> bool:
        """Whether the stores hold state: a micro-batch's results have been served (in this
        run, or kept by the serving store from an earlier one)."""
        if not self._ready:  # once served, a batch stays served
            self._ready = self.serving.last_batch() >= 0
        return self._ready

    def wait_until_ready(self, timeout: float | None = None, poll: float = 0.1) -> StreamsApp:
        """Block until the stores hold state (:attr:`is_ready`): before then, after
        ``start()``, every key of ``app.store(...)`` reads as absent.

        Raises :class:`ApplicationFailedError` if the query dies first, ``TimeoutError`` after
        ``timeout`` seconds, and ``RuntimeError`` when the query is not running.

        >>> app.start().wait_until_ready(timeout=120)                   # doctest: +SKIP
        >>> app.store("counts-store").get("kafka")                      # doctest: +SKIP
        3
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_ready:
            self.raise_if_failed()
            if not self.is_running:
                raise RuntimeError(f"{self.application_id} is not running: start() it first")
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"{self.application_id} has not finished its first "
                                   f"micro-batch after {timeout} s")
            time.sleep(poll)
        return self

    @property
    def is_running(self) -> bool:
        """Whether the query is running."""
        return self._query is not None and self._query.isActive

    def stop(self) -> None:
        """Stop the query; a later ``start()`` resumes from the checkpoint."""
        if self._warm_up is not None:
            self._warm_up.join(30)  # a job still running when the JVM stops would fail noisily
            self._warm_up = None
        planning_ends(self)
        if self._query is not None:
            self._query.stop()
            self._failure = self._query.exception()
            self._query = None
            if self._spark is not None:
                stop_listening(self._spark, self.application_id, self._on_progress)
        self._release_lease()

    def store(self, name: str) -> QueryableStore:
        """Query a materialized store (``get``, ``all``, ``range``, ``prefix_scan``; a window
        store also ``fetch(key, time_from, time_to)`` and ``fetch_all``, a session store
        ``fetch(key)`` and ``find_sessions``). Raises
        :class:`ApplicationFailedError` once the query has died: a dead application must not
        look like an empty one.

        Until the first micro-batch is served (:attr:`is_ready`) the store holds no state and
        every key reads as absent: :meth:`wait_until_ready` waits for it (the HTTP API answers
        503 "no state yet" until then). A view taken before then, e.g. at start, reads the state
        once it is there.

        >>> app.start().wait_until_ready(timeout=120)                   # doctest: +SKIP
        >>> app.store("counts-store").get("kafka")                      # doctest: +SKIP
        3
        """
        self.raise_if_failed()
        spec = self.topology.stores.get(name)
        if spec is None or not spec.queryable:
            queryable = sorted(s for s, v in self.topology.stores.items() if v.queryable)
            raise KeyError(f"no queryable store named {name!r}; queryable stores: {queryable}")
        return self.serving.view(name, spec.kind)

    def ready_store(self, name: str) -> QueryableStore:
        """:meth:`store`, raising :class:`StoreNotReadyError` while the query runs but has
        not served its first micro-batch: for readers (the HTTP API) that must not answer
        "no such key" when there is no state yet."""
        view = self.store(name)
        if self.is_running and not self.is_ready:
            raise StoreNotReadyError(self.application_id, name)
        return view

    def raise_if_failed(self) -> None:
        """Raise :class:`ApplicationFailedError` if the query died of an error."""
        if self._fenced is not None:
            raise ApplicationFailedError(
                self.application_id, f"streamtable.errors.LeaseLostError: {self._fenced}",
                self.log_file)
        query = self._query
        error = self._failure if query is None or query.isActive else query.exception()
        if error is not None:
            raise self._failed(error) from error

    def __enter__(self) -> StreamsApp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
