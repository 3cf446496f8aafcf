"""Produce a micro-batch's output records to Kafka, exactly once per batch id.

Spark replays a micro-batch after a crash with the same batch id and the same input, and
streamtable's processing is deterministic, so a replay produces the same records in the same
per-partition order. :func:`produce_rows` uses that to make replays harmless:

* every record carries headers ``streamtable.app``, ``streamtable.writer``, ``streamtable.batch``
  and ``streamtable.seq`` (the record's index among this batch's records for its partition),
  after its own headers; own headers of those names (a record read from another streamtable
  application's output carries them) are replaced, not repeated;
* when a batch may have been (partly) produced before, the sink reads the tail of each partition
  it writes to, collects the ``seq`` numbers already there for this app, writer and batch id, and
  skips those records; nothing is duplicated and nothing is lost;
* with ``commit_dir`` (put it inside the query's checkpoint directory, so a checkpoint reset
  resets it too), a ``<batch>.started`` marker is written before the first record and a
  ``<batch>.done`` marker after a successful flush. A batch with a done marker is skipped
  without touching Kafka, and a batch without a started marker cannot have produced anything,
  so neither case reads partition tails. Without ``commit_dir`` every batch reads tails: a
  partition holding none of this writer's records is then read in full.

Records without an explicit partition are placed by Kafka's default partitioner for keyed
records (murmur2 of the key, the same as the Java client, so co-partitioning with JVM producers
holds) and round-robin by position for null keys (deterministic, which replay needs).

>>> result = produce_rows(                                            # doctest: +SKIP
...     "127.0.0.1:9092",
...     [{"topic": "out", "key": b"k", "value": b"v"}],
...     batch_id=7,
...     app_id="wordcount",
...     commit_dir="/checkpoints/wordcount/sink",
... )
>>> result.produced, result.skipped                                   # doctest: +SKIP
(1, 0)

The producer is idempotent (``enable.idempotence=true``, ``acks=all``), so retries inside one
call neither duplicate nor reorder records of a partition; it is kept and reused across calls
with the same settings (:func:`close_producers` flushes and drops them). A delivery error raises
:class:`KafkaDeliveryError` naming the topic and partition; the failed call first waits for the
records it had handed over (``flush_timeout``), so a replay in the same process finds them.
"""

from __future__ import annotations

import atexit
import datetime as _dt
import itertools
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from streamtable.errors import StreamsError
from streamtable.kafka.admin import partition_counts
from streamtable.kafka.client_log import with_client_log
from streamtable.partitioner import default_partition, murmur2, positive_hashes

logger = logging.getLogger(__name__)

__all__ = [
    "HEADER_APP",
    "HEADER_WRITER",
    "HEADER_BATCH",
    "HEADER_SEQ",
    "SinkRecord",
    "batch_started",
    "ProduceResult",
    "KafkaSinkError",
    "KafkaDeliveryError",
    "produce_rows",
    "default_partition",
    "murmur2",
    "kafka_batch_writer",
    "close_producers",
]

HEADER_APP = "streamtable.app"
HEADER_WRITER = "streamtable.writer"
HEADER_BATCH = "streamtable.batch"
HEADER_SEQ = "streamtable.seq"
_OWN_HEADERS = (HEADER_APP, HEADER_WRITER, HEADER_BATCH, HEADER_SEQ)
_OWN_SET = frozenset(_OWN_HEADERS)


class KafkaSinkError(StreamsError):
    """The sink could not produce a batch (the message names topic and partition)."""


class KafkaDeliveryError(KafkaSinkError):
    """The broker did not accept records; ``failures`` lists ``(topic, partition, error)``."""

    def __init__(self, message: str, failures: Sequence[tuple[str, int, str]] = ()) -> None:
        super().__init__(message)
        self.failures = list(failures)


class SinkRecord(NamedTuple):
    """One record to produce. ``partition=None`` lets the sink choose (see module doc).

    >>> SinkRecord("out", b"k", b"v").partition is None
    True
    """

    topic: str
    key: bytes | None
    value: bytes | None
    timestamp: int | None = None
    headers: Sequence[tuple[str, bytes | None]] | None = None
    partition: int | None = None


@dataclass
class ProduceResult:
    """What :func:`produce_rows` did for one batch."""

    batch_id: int
    produced: int = 0
    skipped: int = 0
    #: True when the batch was skipped entirely because its done marker exists.
    already_done: bool = False
    #: True when partition tails were read to find records of an earlier attempt.
    scanned: bool = False
    #: records produced by this call, per (topic, partition)
    per_partition: dict[tuple[str, int], int] = field(default_factory=dict)



def _to_bytes(value: Any, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"{what} must be bytes, str or None, got {type(value).__name__}")


def _to_timestamp_ms(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        return int(value.timestamp() * 1000)
    return int(value)


def _to_headers(value: Any) -> list[tuple[str, bytes | None]]:
    if not value:
        return []
    items: Iterable[Any] = value.items() if isinstance(value, Mapping) else value
    out: list[tuple[str, bytes | None]] = []
    for item in items:
        if hasattr(item, "asDict"):
            item = item.asDict()
        if isinstance(item, Mapping):
            k, v = item["key"], item.get("value")
        else:
            k, v = item
        out.append((str(k), _to_bytes(v, f"header {k!r}")))
    return out


def _as_record(row: Any) -> SinkRecord:
    if isinstance(row, SinkRecord):
        return row
    if not isinstance(row, dict) and hasattr(row, "asDict"):
        row = row.asDict()
    if isinstance(row, (dict, Mapping)):
        if "topic" not in row:
            raise KafkaSinkError(f"sink row has no 'topic': {row!r}")
        return SinkRecord(
            row["topic"],
            row.get("key"),
            row.get("value"),
            row.get("timestamp"),
            row.get("headers"),
            row.get("partition"),
        )
    if isinstance(row, tuple) and 3 <= len(row) <= 6:
        return SinkRecord(*row)
    raise KafkaSinkError(
        f"sink row must be a mapping, a Row or a (topic, key, value, ...) tuple, got {row!r}"
    )


# records of a chunk read and hashed together (see :func:`_fielded`)
_FIELD_CHUNK = 4096

_Fields = tuple[str, bytes | None, bytes | None, int | None, Any, int | None, int | None]


def _fielded(rows: Iterable[Any]) -> Iterator[_Fields]:
    """``rows`` as ``(topic, key, value, timestamp ms, headers, partition, key hash)`` tuples,
    a chunk of a list at a time: the keys of a chunk that the default partitioner places are
    hashed in one call (:func:`~streamtable.partitioner.positive_hashes`, vectorised); ``key
    hash`` is None for a record with a partition or without a key. Other iterables are read one
    row at a time, as they come (a generator's rows may still be in the making)."""
    it = iter(rows)
    size = _FIELD_CHUNK if isinstance(rows, list) else 1
    while chunk := list(itertools.islice(it, size)):
        fields = [_fields_of(row) for row in chunk]
        placed = [f[1] for f in fields if f[1] is not None and f[5] is None]
        hashes = iter(positive_hashes(placed))  # type: ignore[arg-type]
        for topic, key, value, ts, headers, partition in fields:
            yield (topic, key, value, ts, headers, partition,
                   next(hashes) if key is not None and partition is None else None)


def _fields_of(row: Any) -> tuple[str, bytes | None, bytes | None, int | None, Any, int | None]:
    if type(row) is tuple and len(row) == 6:  # the runtime's own rows (OutputRecord)
        _topic, key, value, ts, _headers, _partition = row
        if ((key is None or type(key) is bytes) and (value is None or type(value) is bytes)
                and type(ts) is int):
            return row  # type: ignore[no-any-return]
    if type(row) is dict:  # read without a SinkRecord in between
        if "topic" not in row:
            raise KafkaSinkError(f"sink row has no 'topic': {row!r}")
        get = row.get
        return (row["topic"], _to_bytes(get("key"), "key"), _to_bytes(get("value"), "value"),
                _to_timestamp_ms(get("timestamp")), get("headers"), get("partition"))
    rec = _as_record(row)
    return (rec.topic, _to_bytes(rec.key, "key"), _to_bytes(rec.value, "value"),
            _to_timestamp_ms(rec.timestamp), rec.headers, rec.partition)


# ------------------------------------------------------------------------------ commit markers


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "_"


def batch_started(commit_dir: str | os.PathLike[str], app_id: str, writer_id: str,
                  batch_id: int) -> bool:
    """Whether writer ``writer_id`` of ``app_id`` started producing batch ``batch_id`` (its
    ``started`` marker under ``commit_dir``): some of the batch's output may be in Kafka."""
    return _Markers(commit_dir, app_id, writer_id).exists(batch_id, "started")


class _Markers:
    """``<commit_dir>/<app>/<writer>/<batch>.{started,done}``, written atomically on the
    commit directory's :class:`~streamtable.storage.base.DurableStorage` (a local directory
    or a URL every writer can reach)."""

    def __init__(self, commit_dir: str | os.PathLike[str], app_id: str, writer_id: str) -> None:
        from streamtable.storage import storage_at

        self.storage = storage_at(os.fspath(commit_dir))
        self.dir = f"{_safe_name(app_id)}/{_safe_name(writer_id)}"

    def name(self, batch_id: int, kind: str) -> str:
        return f"{self.dir}/{batch_id:020d}.{kind}"

    def exists(self, batch_id: int, kind: str) -> bool:
        return self.storage.exists(self.name(batch_id, kind))

    def write(self, batch_id: int, kind: str, payload: Mapping[str, Any]) -> None:
        self.storage.write(self.name(batch_id, kind),
                           json.dumps(payload, sort_keys=True).encode("utf-8"))

    def delete(self, batch_id: int, kind: str) -> None:
        self.storage.delete(self.name(batch_id, kind))

    def prune(self, below_batch: int) -> None:
        """Delete markers of batches ``< below_batch``."""
        for entry in self.storage.list(self.dir):
            stem = entry.split(".", 1)[0]
            if stem.isdigit() and int(stem) < below_batch:
                self.storage.delete(f"{self.dir}/{entry}")


# ------------------------------------------------------------------------------ tail scan


class _TailScanner:
    """Finds the ``seq`` numbers of this app/writer/batch already at the tail of a partition."""

    def __init__(
        self,
        bootstrap_servers: str,
        client_config: Mapping[str, Any],
        app_id: str,
        writer_id: str,
        batch_id: int,
        chunk: int,
        timeout: float,
    ) -> None:
        conf: dict[str, Any] = dict(client_config)
        conf.update(
            {
                "bootstrap.servers": bootstrap_servers,
                "group.id": "streamtable-sink-tail-scan",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_uncommitted",
            }
        )
        conf.setdefault("fetch.wait.max.ms", 10)  # a setting of the user's wins (see kafka_source)
        self.consumer = Consumer(with_client_log(conf))
        self.app = app_id.encode("utf-8")
        self.writer = writer_id.encode("utf-8")
        self.batch = str(batch_id).encode("ascii")
        self.chunk = max(1, chunk)
        self.timeout = timeout

    def close(self) -> None:
        self.consumer.close()

    def _read(
        self, topic: str, partition: int, begin: int, upper: int | None
    ) -> list[tuple[bytes, int]]:
        """This app/writer's records in ``[begin, upper)`` (``upper=None``: to the end)."""
        found: list[tuple[bytes, int]] = []
        if upper is not None and begin >= upper:
            return found
        self.consumer.assign([TopicPartition(topic, partition, begin)])
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                if time.monotonic() > deadline:
                    raise KafkaSinkError(
                        f"timed out reading the tail of topic {topic!r} partition {partition} "
                        f"from offset {begin}"
                    )
                messages: list[Any] = self.consumer.consume(num_messages=10000, timeout=0.02)
                for msg in messages:
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            return found
                        raise KafkaSinkError(
                            f"error reading the tail of topic {topic!r} "
                            f"partition {partition}: {err}"
                        )
                    off = msg.offset()
                    if upper is not None and off >= upper:
                        return found
                    hdrs = msg.headers()
                    if hdrs:
                        tags = {k: v for k, v in hdrs if k in _OWN_HEADERS}
                        if (
                            tags.get(HEADER_APP) == self.app
                            and tags.get(HEADER_WRITER) == self.writer
                        ):
                            batch = tags.get(HEADER_BATCH) or b""
                            seq = int(tags.get(HEADER_SEQ) or -1) if batch == self.batch else -1
                            found.append((batch, seq))
                    if upper is not None and off >= upper - 1:
                        return found
        finally:
            self.consumer.unassign()

    def present_seqs(self, topic: str, partition: int) -> set[int]:
        """Seq numbers of this batch already in ``topic[partition]``.

        Reads backwards in growing chunks until it passes a record of this writer from another
        batch, the batch's ``seq`` 0, or the start of the log.
        """
        low, high = self.consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=self.timeout
        )
        ours: list[tuple[bytes, int]] = []
        upper: int | None = None  # first chunk reads to the real end, whatever ListOffsets says
        end = high
        size = self.chunk
        while True:
            begin = max(low, end - size)
            ours = self._read(topic, partition, begin, upper) + ours
            seqs: set[int] = set()
            complete = begin <= low
            for batch, seq in reversed(ours):
                if batch != self.batch:
                    complete = True
                    break
                seqs.add(seq)
                if seq == 0:
                    complete = True
                    break
            if complete:
                return seqs
            upper = end = begin
            size *= 2


# ------------------------------------------------------------------------------ produce


# Idempotent producers are expensive to start (librdkafka waits up to ~1s for a producer id),
# so one producer per configuration is kept for the life of the process and reused by every
# batch. A producer that saw a failure is discarded.
_PRODUCERS: dict[tuple[tuple[str, str], ...], Producer] = {}
_PRODUCERS_LOCK = threading.Lock()


def _producer_key(conf: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), repr(v)) for k, v in conf.items()))


def _get_producer(conf: Mapping[str, Any]) -> Producer:
    key = _producer_key(conf)
    with _PRODUCERS_LOCK:
        producer = _PRODUCERS.get(key)
        if producer is None:
            producer = Producer(with_client_log(conf))
            _PRODUCERS[key] = producer
        return producer


def _discard_producer(conf: Mapping[str, Any], producer: Producer) -> None:
    key = _producer_key(conf)
    with _PRODUCERS_LOCK:
        if _PRODUCERS.get(key) is producer:
            del _PRODUCERS[key]
    _close_producer(producer, 0.0)


def _close_producer(producer: Producer, timeout: float) -> None:
    """Flush for up to ``timeout`` seconds, drop whatever is left, and close."""
    try:
        if producer.flush(timeout) > 0:
            producer.purge(in_queue=True, in_flight=True)
            producer.poll(0)
        producer.close()
    except Exception:
        pass


def close_producers(timeout: float = 30.0) -> None:
    """Flush and forget the producers :func:`produce_rows` keeps for reuse."""
    with _PRODUCERS_LOCK:
        producers = list(_PRODUCERS.values())
        _PRODUCERS.clear()
    for producer in producers:
        _close_producer(producer, timeout)


atexit.register(close_producers, 10.0)


def _default_producer_config() -> dict[str, Any]:
    return {
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "max.in.flight.requests.per.connection": 5,
        # the sink counts what it hands over and learns of failures from their reports: a
        # report per delivered record cost ~0.45 us of Python each (measured)
        "delivery.report.only.error": True,
    }


def _producer_conf(bootstrap_servers: str, client_config: Mapping[str, Any] | None,
                   producer_config: Mapping[str, Any] | None) -> dict[str, Any]:
    conf = dict(client_config or {})
    conf.update(_default_producer_config())
    conf.update(producer_config or {})
    conf["bootstrap.servers"] = bootstrap_servers
    return conf


def warm_up_producer(bootstrap_servers: str, producer_config: Mapping[str, Any] | None = None,
                     timeout: float = 10.0,
                     client_config: Mapping[str, Any] | None = None) -> None:
    """Create the producer :func:`produce_rows` will use with these settings and let it connect
    (the first connection of an idempotent producer takes about a second), so that the first
    batch's records go out at once."""
    conf = _producer_conf(bootstrap_servers, client_config, producer_config)
    producer = _get_producer(conf)
    producer.list_topics(timeout=timeout)
    producer.flush(timeout)


def _flush_waiting(producer: Producer, timeout: float, bootstrap_servers: str) -> int:
    """``producer.flush(timeout)``, saying every ten seconds that it waits for Kafka; returns
    the records still undelivered."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        remaining = int(producer.flush(max(0.0, min(10.0, left))))
        if not remaining or left <= 10.0:
            return remaining
        logger.warning("waiting for Kafka at %s to take %d record(s); retrying for up to %.0f s",
                       bootstrap_servers, remaining, left - 10.0)


def produce_rows(
    bootstrap_servers: str,
    rows: Iterable[Any],
    batch_id: int,
    app_id: str,
    *,
    commit_dir: str | os.PathLike[str] | None = None,
    writer_id: str = "0",
    producer_config: Mapping[str, Any] | None = None,
    client_config: Mapping[str, Any] | None = None,
    flush_timeout: float = 120.0,
    tail_scan_chunk: int = 1000,
    keep_markers: int = 100,
) -> ProduceResult:
    """Produce ``rows`` as batch ``batch_id`` of ``app_id``, skipping what a crashed attempt of
    the same batch already produced.

    ``rows`` are :class:`SinkRecord`, mappings or Spark Rows with ``topic``, ``key``, ``value``
    and optionally ``timestamp`` (ms or datetime), ``headers`` (list of (key, value) pairs or of
    {key, value} structs) and ``partition``. Target topics must exist. ``writer_id`` separates
    concurrent writers of the same batch (e.g. one per Spark partition); each must replay its
    own rows. ``producer_config`` overrides librdkafka producer settings, ``client_config``
    applies to every client (security settings, ...). Markers of the last ``keep_markers``
    batches are kept (pruned every tenth batch) (``0`` keeps all).

    >>> produce_rows("127.0.0.1:9092", [SinkRecord("out", b"k", b"v")], 0, "app")  # doctest: +SKIP
    ProduceResult(batch_id=0, produced=1, skipped=0, ...)
    """
    batch_id = int(batch_id)
    result = ProduceResult(batch_id)
    client_conf = dict(client_config or {})
    markers = _Markers(commit_dir, app_id, writer_id) if commit_dir is not None else None
    if markers is not None and markers.exists(batch_id, "done"):
        logger.info(
            "sink: batch %d of %r/%r already produced; skipping", batch_id, app_id, writer_id
        )
        result.already_done = True
        return result
    need_scan = markers is None or markers.exists(batch_id, "started")
    if markers is not None and not need_scan:
        markers.write(
            batch_id, "started", {"batch": batch_id, "started_ms": int(time.time() * 1000)}
        )
    result.scanned = need_scan

    conf = _producer_conf(bootstrap_servers, client_conf, producer_config)
    producer = _get_producer(conf)
    scanner: _TailScanner | None = None
    failures: list[tuple[str, int, str]] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            failures.append((msg.topic(), msg.partition(), str(err)))

    counts: dict[str, int] = {}
    next_seq: dict[tuple[str, int], int] = {}
    null_key_index: dict[str, int] = {}
    present: dict[tuple[str, int], set[int]] = {}
    app_b = app_id.encode("utf-8")
    writer_b = writer_id.encode("utf-8")
    batch_b = str(batch_id).encode("ascii")
    ok = False
    own_headers = [(HEADER_APP, app_b), (HEADER_WRITER, writer_b), (HEADER_BATCH, batch_b)]
    produce = producer.produce
    try:
        i = -1
        for topic, key, value, ts, user_headers, partition, hashed in _fielded(rows):
            i += 1
            if topic not in counts:
                counts.update(
                    partition_counts(bootstrap_servers, [topic], client=producer)
                )
            n = counts[topic]
            if partition is not None:
                part = int(partition)
                if not 0 <= part < n:
                    raise KafkaSinkError(
                        f"topic {topic!r} partition {part} does not exist (topic has {n})"
                    )
            elif hashed is not None:
                part = hashed % n
            else:
                idx = null_key_index.get(topic, 0)
                null_key_index[topic] = idx + 1
                part = idx % n
            tp = (topic, part)
            seq = next_seq.get(tp, 0)
            next_seq[tp] = seq + 1
            if need_scan:
                if tp not in present:
                    if scanner is None:
                        scanner = _TailScanner(
                            bootstrap_servers,
                            client_conf,
                            app_id,
                            writer_id,
                            batch_id,
                            tail_scan_chunk,
                            timeout=max(30.0, flush_timeout),
                        )
                    present[tp] = scanner.present_seqs(topic, part)
                    if present[tp]:
                        logger.info(
                            "sink: batch %d replay: %d records already in topic %r partition %d",
                            batch_id,
                            len(present[tp]),
                            topic,
                            part,
                        )
                if seq in present[tp]:
                    result.skipped += 1
                    continue
            # a record read from another streamtable application's output carries that
            # writer's tags: ours replace them, so each record has one of each (the tail scan
            # reads the last)
            headers: list[Any] = ([h for h in _to_headers(user_headers) if h[0] not in _OWN_SET]
                                  if user_headers else [])
            headers += own_headers
            headers.append((HEADER_SEQ, b"%d" % seq))
            while True:
                try:
                    if ts is None:
                        produce(topic, value, key, part, on_delivery, headers=headers)
                    else:
                        produce(topic, value, key, part, on_delivery, timestamp=ts,
                                headers=headers)
                    break
                except BufferError:
                    producer.poll(0.05)
                except KafkaException as exc:
                    raise KafkaDeliveryError(
                        f"could not produce to topic {topic!r} partition {part}: {exc}",
                        [(topic, part, str(exc))],
                    ) from exc
            result.produced += 1
            result.per_partition[tp] = result.per_partition.get(tp, 0) + 1
            if not i & 255:  # serve delivery reports now and then, not for every record
                producer.poll(0)
                if failures:
                    break
        for tp, seqs in present.items():
            if seqs and max(seqs) >= next_seq.get(tp, 0):
                logger.warning(
                    "sink: batch %d replay has %d records for topic %r partition %d, but an "
                    "earlier attempt produced seq %d there: is processing deterministic?",
                    batch_id,
                    next_seq.get(tp, 0),
                    tp[0],
                    tp[1],
                    max(seqs),
                )
        remaining = _flush_waiting(producer, flush_timeout, bootstrap_servers)
        if failures:
            topic, part, err = failures[0]
            raise KafkaDeliveryError(
                f"{len(failures)} record(s) of batch {batch_id} not delivered; first: "
                f"topic {topic!r} partition {part}: {err}",
                failures,
            )
        if remaining:
            pending = sorted(result.per_partition)[:5]
            raise KafkaDeliveryError(
                f"{remaining} record(s) of batch {batch_id} still undelivered after "
                f"{flush_timeout}s (writing to {pending})",
                [(t, p, "flush timeout") for t, p in pending],
            )
        ok = True
    finally:
        if not ok:
            # Deliver what was already handed to the producer, so nothing of this attempt is
            # still in flight when a replay reads the partition tails; then start afresh.
            try:
                producer.flush(flush_timeout if not failures else min(flush_timeout, 10.0))
            except Exception:
                pass
            _discard_producer(conf, producer)
        if scanner is not None:
            scanner.close()
    if markers is not None:
        markers.write(
            batch_id,
            "done",
            {
                "batch": batch_id,
                "produced": result.produced,
                "skipped": result.skipped,
                "partitions": {f"{t}/{p}": c for (t, p), c in sorted(result.per_partition.items())},
            },
        )
        markers.delete(batch_id, "started")
        if keep_markers > 0 and batch_id % 10 == 0:
            markers.prune(batch_id - keep_markers + 1)
    logger.info(
        "sink: batch %d of %r/%r: produced %d, skipped %d",
        batch_id,
        app_id,
        writer_id,
        result.produced,
        result.skipped,
    )
    return result


def kafka_batch_writer(
    bootstrap_servers: str,
    app_id: str,
    *,
    commit_dir: str | os.PathLike[str] | None = None,
    producer_config: Mapping[str, Any] | None = None,
    client_config: Mapping[str, Any] | None = None,
) -> Callable[[Any, int], ProduceResult]:
    """A ``foreachBatch`` function producing a DataFrame's rows with :func:`produce_rows`.

    The DataFrame needs columns ``topic``, ``key``, ``value`` and may have ``timestamp``,
    ``headers`` and ``partition``. Rows are streamed to the driver in partition order
    (``toLocalIterator``), which is deterministic for a deterministic plan.

    >>> query = df.writeStream.foreachBatch(                            # doctest: +SKIP
    ...     kafka_batch_writer("127.0.0.1:9092", "app", commit_dir=ckpt + "/sink")).start()
    """

    def write(batch_df: Any, batch_id: int) -> ProduceResult:
        def rows() -> Iterator[Any]:  # lazy: a batch already produced computes nothing
            yield from batch_df.toLocalIterator()

        return produce_rows(
            bootstrap_servers,
            rows(),
            batch_id,
            app_id,
            commit_dir=commit_dir,
            producer_config=producer_config,
            client_config=client_config,
        )

    return write
