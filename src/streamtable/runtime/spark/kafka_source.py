"""A Spark streaming source that reads Kafka topics through confluent-kafka.

PySpark here has no Kafka connector (no Maven), so this is a Python Data Source (PySpark >= 4.2
``DataSourceStreamReader`` API) registered under the short name ``streamtable-kafka``.

>>> from streamtable.runtime.spark.kafka_source import register
>>> register(spark)                                                     # doctest: +SKIP
>>> df = (spark.readStream.format("streamtable-kafka")                  # doctest: +SKIP
...       .option("bootstrap.servers", "127.0.0.1:9092")
...       .option("topics", "orders,payments")
...       .option("max.records.per.batch", "100000")
...       .option("group.id", "my-app")          # offsets committed here for lag tools
...       .load())

Columns: ``topic string, partition int, offset long, timestamp long (ms since epoch, null when
the record has none), key binary, value binary (null for a tombstone),
headers array<struct<key:string, value:binary>>`` (empty when the record has none).

Options:

* ``bootstrap.servers`` (required), ``topics`` (required, comma separated).
* ``starting.offsets``: ``earliest`` (default) or ``latest``; only used when a query starts
  without a checkpoint.
* ``max.records.per.batch``: cap on records per micro-batch (``Trigger.AvailableNow`` honours it
  too, running as many batches as needed; ``Trigger.Once`` reads everything).
* ``batch.split``: how a batch that takes only part of what is there ends on each partition.
  ``timestamp`` (default): at the same record timestamp on all of them, found with Kafka's
  ListOffsets by timestamp (on the development broker, by reading the records' timestamps), so
  a sparse topic never runs ahead of a dense one in event time (see
  :mod:`streamtable.kafka.batch_cut`); ``count``: an equal share each. The cut goes by the
  records' Kafka timestamps: a source with a timestamp extractor of its own is aligned as far
  as its times follow them.
* ``topics.read.first``: topics (comma separated) whose records a batch takes before the
  others' (a global table's, which Kafka Streams restores before processing).
* ``topics.tables``: topics (comma separated) read as tables: a batch cut at a timestamp takes
  their records at that timestamp before the others' (a task processes them first at equal
  timestamps, see :mod:`streamtable.engine.ordering`).
* ``first.batch.records`` (default unset: every batch may take up to the cap; the application
  passes its memory budget's first batch for a topology with state, see ``budget.py``): after
  a start, batches ramp up from this size, four times larger each, to ``max.records.per.batch``,
  so an application that starts behind shows its first results sooner, at the cost of
  throughput while it catches up (one more batch per ramp step: at 1,000,000 records the
  default cap gave ~80k records/s from a sixteenth and ~93k without a ramp, first output ~5 s
  and ~7 s after the start).
* ``group.id``: if set, the end offsets of completed micro-batches are committed to this
  consumer group (best effort), so ``kafka-consumer-groups``-style lag tools see progress. The
  source never reads its position from the group: Spark's checkpoint is the source of truth.
* ``arrow.batch.size`` (default 10000): rows per Arrow record batch handed to Spark.
* ``read.mode``: ``records`` (default: the columns below) or ``ranges``: one row per topic
  partition with data, ``topic, partition, start, end`` (offsets ``[start, end)``), for a
  consumer of the batch that reads the records itself (see :mod:`streamtable.kafka.ranges`).
* ``read.timeout.ms`` (default 120000): a task fails, naming the partition, if it makes no
  progress for this long. ``metadata.timeout.ms`` (default 30000) bounds one driver-side
  lookup; ``task.timeout.ms`` (default 300000) is how long planning a batch keeps retrying
  while Kafka does not answer (logging what it waits for) before the query fails.
* ``kafka.<name>``: any librdkafka consumer setting (e.g. ``kafka.security.protocol``).
* ``development.broker.profile`` (``true``/``false``): see :mod:`streamtable.kafka.broker`.
* ``log.level`` (default ``WARNING``): the level of streamtable's log lines from the Python
  process Spark plans the batches in (where each batch is cut, what a slow broker is waited
  for); the application passes its own.

* ``batch.limit.file``: a file holding the most records the next batch may take, written by
  the application after each batch (its workers' memory budget); read before each batch is
  planned, under ``max.records.per.batch``.

* ``initial.offsets.file``: a path where the offsets a new query starts from (its first batch's
  start, which Spark's offset log does not hold) are written before that batch is planned.

* ``ending.offsets``: JSON ``{"topic": {"partition": offset}}``: with
  ``Trigger.AvailableNow``, read up to these offsets at most (a partition left out: nothing).

* ``clock.tick.ms``: if set, the offsets also carry a clock (``"@clock"``, not a topic) that
  moves every this many ms, so that Spark plans a micro-batch that often even when no record
  arrives (for wall-clock punctuation); not with ``Trigger.AvailableNow``.

Offsets are ``{"topic": {"partition": next_offset_to_read}}``. Partitions that appear while the
query runs are read from their beginning.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from streamtable.kafka.batch_cut import BatchCutter, split_budget
from streamtable.kafka.client_log import with_client_log
from streamtable.kafka.end_probe import EndProbe, EndProbeTimeout
from streamtable.kafka.ranges import (
    CLOCK,
    READER_GROUP_ID,
    KafkaSourceError,
    Offsets,
    offset_ranges,
)
from streamtable.logs import configure_worker_logging
from streamtable.runtime.spark.kafka_arrow import read_partition

logger = logging.getLogger(__name__)

__all__ = [
    "SOURCE_NAME",
    "KAFKA_SCHEMA",
    "KafkaDataSource",
    "KafkaStreamReader",
    "KafkaInputPartition",
    "KafkaSourceError",
    "register",
    "split_budget",
]

SOURCE_NAME = "streamtable-kafka"

KAFKA_SCHEMA = StructType(
    [
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", LongType(), True),
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField(
            "headers",
            ArrayType(
                StructType(
                    [
                        StructField("key", StringType(), True),
                        StructField("value", BinaryType(), True),
                    ]
                ),
                True,
            ),
            True,
        ),
    ]
)


# ``read.mode=ranges``: the micro-batch holds the offset ranges, not the records
RANGES_SCHEMA = StructType(
    [
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("start", LongType(), True),
        StructField("end", LongType(), True),
    ]
)


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _canonical(offsets: Mapping[str, Mapping[str, int]]) -> Offsets:
    """Offsets with topics sorted by name and partitions by number (stable JSON for Spark)."""
    return {
        topic: {str(p): int(offsets[topic][p]) for p in sorted(offsets[topic], key=int)}
        for topic in sorted(offsets)
    }


class KafkaInputPartition(InputPartition):
    """Records ``[start, end)`` of one topic partition: one Spark task."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"KafkaInputPartition({self.topic}[{self.partition}] {self.start}..{self.end})"


class KafkaDataSource(DataSource):
    """Spark data source ``streamtable-kafka`` (streaming reads only).

    >>> spark.dataSource.register(KafkaDataSource)                      # doctest: +SKIP
    >>> spark.readStream.format("streamtable-kafka").option(
    ...     "bootstrap.servers", "127.0.0.1:9092").option("topics", "t").load()  # doctest: +SKIP
    """

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        if str(self.options.get("read.mode", "records")).lower() == "ranges":
            return RANGES_SCHEMA
        return KAFKA_SCHEMA

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        # Spark plans the batches in a Python process of its own: its lines (a broker that
        # does not answer, where a batch is cut) read like the application's, from the level
        # the application logs at ("log.level", the driver's)
        configure_worker_logging(self.options.get("log.level"))
        return KafkaStreamReader(self.options, schema)


def register(spark: Any) -> None:
    """Register :class:`KafkaDataSource` with ``spark`` (a SparkSession)."""
    spark.dataSource.register(KafkaDataSource)


def _topic_list(opts: Mapping[str, str], key: str) -> list[str]:
    """The topics of a comma-separated option (none when it is unset)."""
    return [t.strip() for t in opts.get(key, "").split(",") if t.strip()]


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches from Kafka offsets (driver) and reads partitions (executors).

    Driver-side Kafka clients are created lazily, so the copies of this object that Spark
    ships to executors open nothing but the consumer of the partition they read.
    """

    def __init__(self, options: Mapping[str, str], schema: StructType | None = None) -> None:
        opts = {str(k).lower(): str(v) for k, v in dict(options).items()}
        self.bootstrap_servers = opts.get("bootstrap.servers") or opts.get(
            "kafka.bootstrap.servers"
        )
        if not self.bootstrap_servers:
            raise KafkaSourceError("streamtable-kafka: option 'bootstrap.servers' is required")
        self.topics = _topic_list(opts, "topics")
        if not self.topics:
            raise KafkaSourceError("streamtable-kafka: option 'topics' is required")
        self.starting_offsets = opts.get("starting.offsets", "earliest").strip().lower()
        # Trigger.AvailableNow stops here: {"topic": {"partition": offset}}, partitions left
        # out read nothing (an upgrade's backfill, up to where the application is)
        self.ending_offsets: dict[str, dict[str, int]] | None = (
            json.loads(opts["ending.offsets"]) if opts.get("ending.offsets") else None)
        if self.starting_offsets not in ("earliest", "latest"):
            raise KafkaSourceError(
                f"streamtable-kafka: starting.offsets must be 'earliest' or 'latest', "
                f"got {self.starting_offsets!r}"
            )
        # where initialOffset() records the offsets a new query starts from (see the option)
        self.initial_offsets_file = opts.get("initial.offsets.file") or None
        self.batch_limit_file = opts.get("batch.limit.file") or None
        max_records = opts.get("max.records.per.batch")
        self.max_records_per_batch = int(max_records) if max_records else None
        if self.max_records_per_batch is not None and self.max_records_per_batch < 1:
            raise KafkaSourceError("streamtable-kafka: max.records.per.batch must be >= 1")
        first = opts.get("first.batch.records")
        self.first_batch_records = int(first) if first else 0  # 0: no ramp
        self._planned_batches = 0
        split = opts.get("batch.split", "timestamp").strip().lower()
        if split not in ("timestamp", "count"):
            raise KafkaSourceError(
                f"streamtable-kafka: batch.split must be 'timestamp' or 'count', got {split!r}")
        self._cutter = BatchCutter(self._timestamp_lookup, split,
                                   _topic_list(opts, "topics.read.first"),
                                   _topic_list(opts, "topics.tables"))
        self._read_timestamps: Any = None  # development broker: see _timestamp_lookup
        tick = opts.get("clock.tick.ms")
        self.clock_tick_ms = int(tick) if tick else None
        self.group_id = opts.get("group.id") or opts.get("kafka.group.id")
        self.arrow_batch_size = int(opts.get("arrow.batch.size", "10000"))
        self.read_mode = opts.get("read.mode", "records").strip().lower()
        if self.read_mode not in ("records", "ranges"):
            raise KafkaSourceError(
                "streamtable-kafka: read.mode must be 'records' or 'ranges', "
                f"got {self.read_mode!r}"
            )
        self.read_timeout_s = int(opts.get("read.timeout.ms", "120000")) / 1000.0
        self.metadata_timeout_s = int(opts.get("metadata.timeout.ms", "30000")) / 1000.0
        self.task_timeout_s = int(opts.get("task.timeout.ms", "300000")) / 1000.0
        self.development_profile = _truthy(opts.get("development.broker.profile", "false"))
        self.kafka_conf: dict[str, str] = {
            k[len("kafka.") :]: v
            for k, v in opts.items()
            if k.startswith("kafka.") and k not in ("kafka.bootstrap.servers", "kafka.group.id")
        }
        self.schema = schema if schema is not None else KAFKA_SCHEMA
        self._target: Offsets | None = None  # Trigger.AvailableNow end
        self._admin: Any = None
        self._probe: Any = None
        self._committer: Any = None
        self._last_group_commit: Offsets | None = None
        self._commits_in_flight = 0
        self._reported: Offsets | None = None  # ends read by latestOffset, for its report

    # ---------------------------------------------------------------- driver-side clients

    def _client_conf(self) -> dict[str, Any]:
        conf: dict[str, Any] = dict(self.kafka_conf)
        conf["bootstrap.servers"] = self.bootstrap_servers
        return conf

    def _admin_client(self) -> Any:
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            admin_conf = {
                k: v
                for k, v in self._client_conf().items()
                if not k.startswith(("fetch.", "isolation.", "auto.", "enable.", "max.partition"))
            }
            self._admin = AdminClient(with_client_log(admin_conf))
        return self._admin

    def _partitions_of_topics(self) -> dict[str, list[int]]:
        metadata = self._admin_client().list_topics(timeout=self.metadata_timeout_s)
        found: dict[str, list[int]] = {}
        for topic in self.topics:
            meta = metadata.topics.get(topic)
            if meta is None or not meta.partitions:
                raise KafkaSourceError(
                    f"streamtable-kafka: topic {topic!r} does not exist on {self.bootstrap_servers}"
                )
            found[topic] = sorted(meta.partitions)
        return found

    def _list_offsets(self, partitions: dict[str, list[int]], latest: bool) -> Offsets:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        spec = OffsetSpec.latest() if latest else OffsetSpec.earliest()
        request = {TopicPartition(t, p): spec for t, ps in partitions.items() for p in ps}
        if not request:
            return {}
        futures = self._admin_client().list_offsets(
            request, isolation_level=self._isolation_level(),
            request_timeout=self.metadata_timeout_s
        )
        result: Offsets = {}
        for tp, future in futures.items():
            try:
                info = future.result()
            except Exception as exc:
                raise KafkaSourceError(
                    f"streamtable-kafka: could not list offsets of topic {tp.topic!r} "
                    f"partition {tp.partition}: {exc}"
                ) from exc
            result.setdefault(tp.topic, {})[str(tp.partition)] = int(info.offset)
        return _canonical(result)

    def _end_offsets(self) -> Offsets:
        partitions = self._partitions_of_topics()
        ends = self._list_offsets(partitions, latest=True)
        if self.development_profile:
            ends = self._probe_end_offsets_via_fetch(ends)
        return ends

    def _probe_end_offsets_via_fetch(self, listed: Offsets) -> Offsets:
        """Development broker profile: true end offsets from Fetch responses' high watermarks
        (Tansu's ListOffsets under-reports them; see :mod:`streamtable.kafka.end_probe`)."""
        if self._probe is None:
            self._probe = EndProbe(self._client_conf(), group_id=READER_GROUP_ID)
        try:
            return _canonical(self._probe.ends(listed, self.metadata_timeout_s))
        except EndProbeTimeout as e:
            raise KafkaSourceError(f"streamtable-kafka: end offset probe timed out: {e}") from e

    # ------------------------------------------------------------------ planning (driver)

    def initialOffset(self) -> dict:
        partitions = self._partitions_of_topics()
        if self.starting_offsets == "latest":
            offsets = self._end_offsets()
        else:
            offsets = self._list_offsets(partitions, latest=False)
        logger.info("streamtable-kafka initial offsets (%s): %s", self.starting_offsets, offsets)
        if self.initial_offsets_file:
            from pathlib import Path

            from streamtable.storage import storage_at

            path = Path(self.initial_offsets_file)
            storage_at(str(path.parent)).write(path.name, json.dumps(offsets).encode())
        return offsets

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_records_per_batch is not None:
            return ReadMaxRows(self.max_records_per_batch)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._end_offsets()
        if self.ending_offsets is not None:
            cap = self.ending_offsets
            self._target = _canonical({
                t: {p: min(int(end), int(cap.get(t, {}).get(p, 0))) for p, end in ps.items()}
                for t, ps in self._target.items()})
        logger.info("streamtable-kafka Trigger.AvailableNow target offsets: %s", self._target)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        # Spark plans a batch only after the previous one (which ended at `start`) completed,
        # but calls commit() for it only when it plans the *next* batch. Committing `start`
        # here keeps the consumer group's lag current, including after the last batch.
        self._commit_to_group(start)
        ends = self._target if self._target is not None else self._waiting_for_kafka(
            "plan the next batch", self._end_offsets)
        self._reported = ends
        merged: dict[str, dict[str, int]] = {t: dict(ps) for t, ps in start.items()}
        available: dict[tuple[str, str], int] = {}
        for topic, parts in ends.items():
            for part, end in parts.items():
                begin = int(start.get(topic, {}).get(part, 0))
                merged.setdefault(topic, {})[part] = max(begin, int(end))
                available[(topic, part)] = max(0, int(end) - begin)
        if isinstance(limit, ReadMaxRows):
            cap = min(int(limit.max_rows), self._batch_limit() or int(limit.max_rows))

            def batch_size(batch: int) -> int:  # the batch-th after a start, as it ramps up
                if self.first_batch_records > 0:
                    return min(cap, self.first_batch_records * 4 ** batch)
                return cap

            budget = batch_size(self._planned_batches)
            next_budget = batch_size(self._planned_batches + 1)
            if sum(available.values()) > budget:
                begins = {(t, int(p)): int(start.get(t, {}).get(p, 0)) for t, p in available}
                share = self._cutter.share(
                    begins, {(t, int(p)): n for (t, p), n in available.items()}, budget)
                for (topic, number), take in share.items():
                    merged[topic][str(number)] = begins[(topic, number)] + take
                if self._read_timestamps is not None:
                    # the next cut's reads, while this batch runs: about what this one took of
                    # each partition, scaled to the next batch's budget while batches ramp up
                    # (the cut reads any more it needs itself)
                    ahead = {k: take * next_budget // max(1, budget) for k, take in share.items()}
                    self._read_timestamps.prefetch(
                        {k: begins[k] + take for k, take in share.items()},
                        {(t, int(p)): int(ends[t][p]) for t, p in available},
                        {k: min(next_budget + 1, n + n // 4 + 4096) for k, n in ahead.items()})
        if any(available.values()):
            self._planned_batches = min(self._planned_batches + 1, 16)
        elif self._target is not None:
            # Trigger.AvailableNow is done: Spark may end this process right after, so the
            # last commit must reach the group now, not when the next batch is planned
            self._settle_group_commits()
        if self.clock_tick_ms and self._target is None:
            tick = self.clock_tick_ms
            before = int(start.get(CLOCK, {}).get("0", 0))
            merged[CLOCK] = {"0": max(before, int(time.time() * 1000) // tick * tick)}
        return _canonical(merged)

    def _timestamp_lookup(self, starts: Mapping[tuple[str, int], int],
                          ends: Mapping[tuple[str, int], int], budget: int) -> Any:
        """Kafka's ListOffsets by timestamp; on the development broker, which answers it
        wrongly, the records' timestamps read (see :mod:`streamtable.kafka.timestamps`)."""
        from streamtable.kafka.timestamps import ListedTimestamps, ReadTimestamps

        if self.development_profile:
            if self._read_timestamps is None:
                self._read_timestamps = ReadTimestamps(self._client_conf(), self.read_timeout_s)
            return self._read_timestamps.lookup(starts, ends, budget + 1)
        return ListedTimestamps(self._admin_client(), self._isolation_level(),
                                self.metadata_timeout_s).lookup(starts)

    def _isolation_level(self) -> Any:
        from confluent_kafka import IsolationLevel

        return (IsolationLevel.READ_UNCOMMITTED
                if self.kafka_conf.get("isolation.level", "read_committed") == "read_uncommitted"
                else IsolationLevel.READ_COMMITTED)

    def _batch_limit(self) -> int | None:
        """The next batch's size as the application last wrote it (its memory budget)."""
        if not self.batch_limit_file:
            return None
        try:
            with open(self.batch_limit_file) as f:
                return max(1, int(f.read()))
        except (OSError, ValueError):
            return None

    def _waiting_for_kafka(self, what: str, call: Callable[[], Offsets]) -> Offsets:
        """``call()``, retried while Kafka does not answer, for up to ``task.timeout.ms``."""
        deadline = time.monotonic() + self.task_timeout_s
        delay = 0.5
        while True:
            try:
                return call()
            except Exception as e:
                left = deadline - time.monotonic()
                if left <= delay:
                    raise KafkaSourceError(
                        f"streamtable-kafka: Kafka at {self.bootstrap_servers} did not answer "
                        f"for {self.task_timeout_s:.0f} s (task.timeout.ms) while trying to "
                        f"{what}: {e}") from e
                logger.warning("waiting for Kafka at %s to %s (%s); retrying for up to %.0f s",
                               self.bootstrap_servers, what, e, left)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def reportLatestOffset(self) -> dict | None:
        # Spark asks right after latestOffset: the ends it just read are as fresh (asking Kafka
        # again cost a round trip per micro-batch)
        ends = self._reported
        if ends is not None:
            self._reported = None
            return ends
        try:
            return self._end_offsets()
        except Exception:  # reporting only
            return None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return [KafkaInputPartition(*r) for r in offset_ranges(start, end)]

    def commit(self, end: dict) -> None:
        self._commit_to_group(end)

    def _commit_to_group(self, offsets: Mapping[str, Mapping[str, int]]) -> None:
        """Best effort: record ``offsets`` as the position of consumer group ``group.id``."""
        if not self.group_id or not offsets:
            return
        canonical = _canonical(offsets)
        if canonical == self._last_group_commit:
            return
        try:
            from confluent_kafka import Consumer, TopicPartition

            if self._committer is None:
                conf = self._client_conf()
                conf.update({
                    "group.id": self.group_id,
                    "enable.auto.commit": False,
                    "on_commit": self._committed,
                })
                self._committer = Consumer(with_client_log(conf))
            tps = [
                TopicPartition(topic, int(part), int(off))
                for topic, parts in canonical.items() if topic != CLOCK
                for part, off in parts.items()
            ]
            if tps:
                # not waited for: planning the next batch does not hang on lag reporting
                self._committer.commit(offsets=tps, asynchronous=True)
                self._commits_in_flight += 1
                self._committer.poll(0)  # serves the replies of earlier commits
            self._last_group_commit = canonical
        except Exception as exc:  # never fail the query over lag reporting
            logger.warning(
                "streamtable-kafka: could not commit offsets to group %r: %s", self.group_id, exc
            )

    def _committed(self, err: Any, partitions: Any) -> None:
        self._commits_in_flight = max(0, self._commits_in_flight - 1)
        if err is not None:
            logger.warning(
                "streamtable-kafka: could not commit offsets to group %r: %s", self.group_id, err
            )

    def _settle_group_commits(self, timeout_s: float = 5.0) -> None:
        """Wait (at most ``timeout_s``) until the group has answered every commit sent."""
        deadline = time.monotonic() + timeout_s
        while self._committer is not None and self._commits_in_flight > 0:
            left = deadline - time.monotonic()
            if left <= 0:
                logger.warning(
                    "streamtable-kafka: group %r did not confirm %d offset commit(s) in %.0f s",
                    self.group_id, self._commits_in_flight, timeout_s,
                )
                return
            self._committer.poll(min(left, 0.1))

    def stop(self) -> None:
        self._settle_group_commits()
        if self._read_timestamps is not None:
            self._read_timestamps.close()
            self._read_timestamps = None
        for name in ("_probe", "_committer"):
            client = getattr(self, name)
            setattr(self, name, None)
            if client is not None:
                try:
                    client.close()
                except Exception:
                    pass
        self._admin = None

    # ---------------------------------------------------------------- reading (executors)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, KafkaInputPartition), partition
        if self.read_mode == "ranges":
            return iter([(partition.topic, partition.partition, partition.start, partition.end)])
        return read_partition(
            consumer_conf=self._client_conf(),
            topic=partition.topic,
            partition=partition.partition,
            start=partition.start,
            end=partition.end,
            schema=self.schema,
            arrow_batch_size=self.arrow_batch_size,
            read_timeout_s=self.read_timeout_s,
        )
