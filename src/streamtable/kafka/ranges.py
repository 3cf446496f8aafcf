"""Reading one offset range of one Kafka partition, where the records are needed.

The Spark source plans micro-batches as offset ranges (``[start, end)`` per topic partition).
Either its own read tasks turn a range into Arrow rows for Spark (``read.mode=records``), or it
hands Spark only the ranges (``read.mode=ranges``) and the stage that processes a partition
reads the range itself with a :class:`RangeReader`: the records then go from the consumer
straight into the task, never through Arrow, the JVM and a second Python process. Which records
a batch holds is the same either way (the range is in Spark's checkpoint), so a replayed batch
reads exactly what its first attempt read.

>>> reader = RangeReader({"bootstrap.servers": "localhost:9092"})
>>> for run in reader.read("orders", 0, 100, 200):                # doctest: +SKIP
...     print(len(run), run.offsets[0])
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, cast

from streamtable.kafka.client_log import with_client_log
from streamtable.records import RecordRun

logger = logging.getLogger(__name__)

# Consumer group id librdkafka insists on for a consumer that only uses assign() and never
# commits (tasks and end-offset probes).
READER_GROUP_ID = "streamtable-kafka-reader"

#: offsets of partitions, ``{"topic": {"partition": offset}}``: how the Kafka source keeps them
Offsets = dict[str, dict[str, int]]

# (topic, partition, start, end): offsets [start, end) of one topic partition
OffsetRange = tuple[str, int, int, int]

# Not a valid topic name: the entry of a source's offsets that carries its clock
# (``clock.tick.ms``), so that Spark plans batches with no records for wall-clock punctuation.
CLOCK = "@clock"


def offset_ranges(start: Mapping[str, Mapping[str, int]],
                  end: Mapping[str, Mapping[str, int]]) -> list[OffsetRange]:
    """The ranges of a micro-batch from its start and end offsets (``{"topic": {"partition":
    next offset}}``), in topic and partition order, leaving out partitions with no records and
    the source's clock; a partition missing from ``start`` (new since) is read from offset 0.

    >>> offset_ranges({"t": {"0": 5, "1": 7}}, {"t": {"0": 9, "1": 7}, "u": {"0": 2}})
    [('t', 0, 5, 9), ('u', 0, 0, 2)]
    """
    result = []
    for topic in sorted(end):
        if topic == CLOCK:
            continue
        for part in sorted(end[topic], key=int):
            begin = int(start.get(topic, {}).get(part, 0))
            stop = int(end[topic][part])
            if stop > begin:
                result.append((topic, int(part), begin, stop))
    return result


class KafkaSourceError(RuntimeError):
    """The Kafka source could not do its work (the message names topic and partition)."""


QUEUED_RECORDS_MAX = 16_384


def reader_config(consumer_conf: dict[str, Any], start: int, end: int) -> dict[str, Any]:
    """The settings of a consumer that reads ``[start, end)`` of one assigned partition."""
    conf = dict(consumer_conf)
    conf.setdefault("group.id", READER_GROUP_ID)
    conf.update(
        {
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    conf.setdefault("fetch.wait.max.ms", 100)
    conf.setdefault("fetch.queue.backoff.ms", 10)
    conf.setdefault("fetch.error.backoff.ms", 10)
    # librdkafka fetches until this many records are queued. Each queued record is an
    # allocation of its own, beyond what queued.max.messages.kbytes counts: a reader that
    # queued up to 262k records held ~70-90 MB more than one that queues 16k, and read no
    # faster (~500k records/s either way, measured; a task processes ~100k/s). Capped by the
    # range size so a small range does not prefetch far beyond its end (a power of 4, so that
    # a consumer kept for the next range, see _take_consumer, serves ranges of about the same
    # size).
    wanted = 1024
    while wanted < min(QUEUED_RECORDS_MAX, end - start):
        wanted *= 4
    conf.setdefault("queued.min.messages", wanted)
    conf.setdefault("max.partition.fetch.bytes", 8 * 1024 * 1024)
    # librdkafka's prefetch queue may hold this much (default 64 MB): two fetches ahead is
    # enough to keep a task busy, and the rest is memory a Python worker never gives back
    conf.setdefault("queued.max.messages.kbytes", 16 * 1024)
    return conf


# Readers kept for the next range: one per setting in each process (a Spark Python worker runs
# one task at a time). Making a consumer, connecting it and closing it cost ~50 ms per range,
# paid by every task of every micro-batch. One not used again for IDLE_S is closed (its
# connections would outlive an application that stopped, and a broker that went away).
_IDLE: dict[tuple[tuple[str, str], ...], tuple[Any, float]] = {}  # key -> (consumer, since)
_IDLE_LOCK = threading.Lock()
IDLE_S = 30.0
_sweeper: threading.Thread | None = None


def _sweep() -> None:
    while True:
        time.sleep(IDLE_S / 3)
        now = time.monotonic()
        with _IDLE_LOCK:
            old = [k for k, (_, since) in _IDLE.items() if now - since > IDLE_S]
            expired = [_IDLE.pop(k)[0] for k in old]
        for consumer in expired:
            consumer.close()


def _idle_key(conf: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in conf.items()))


def _take_consumer(conf: dict[str, Any]) -> Any:
    from confluent_kafka import Consumer

    with _IDLE_LOCK:
        kept = _IDLE.pop(_idle_key(conf), None)
    return kept[0] if kept is not None else Consumer(with_client_log(conf))


def _give_back(conf: dict[str, Any], consumer: Any) -> None:
    """Keep a consumer that read its range to the end for the next range; close any other."""
    try:
        consumer.unassign()
    except Exception:
        consumer.close()
        return
    global _sweeper
    key = _idle_key(conf)
    with _IDLE_LOCK:
        old = _IDLE.pop(key, None)
        _IDLE[key] = (consumer, time.monotonic())
        if _sweeper is None:
            _sweeper = threading.Thread(target=_sweep, name="streamtable-idle-readers",
                                        daemon=True)
            _sweeper.start()
    if old is not None:
        old[0].close()


def consume_range(
    consumer_conf: dict[str, Any],
    topic: str,
    partition: int,
    start: int,
    end: int,
    chunk: int = 10_000,
    read_timeout_s: float = 120.0,
) -> Iterator[list[Any]]:
    """Yield the messages of ``topic[partition]`` with offsets in ``[start, end)``, in offset
    order, in lists of up to ``chunk``; a partition that makes no progress for
    ``read_timeout_s`` fails naming it."""
    from confluent_kafka import KafkaError, Message, TopicPartition

    conf = reader_config(consumer_conf, start, end)
    consumer = _take_consumer(conf)
    where = f"topic {topic!r} partition {partition}"
    finished = False
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        done = start >= end
        last_offset = start - 1
        last_progress = time.monotonic()
        said = 0  # "waiting" lines logged since the last progress
        eof_code = KafkaError._PARTITION_EOF
        last_wanted = end - 1
        while not done:
            out: list[Any] = []
            while not done and len(out) < chunk:
                # consume() waits its whole timeout unless the batch fills: ask for no more
                # than the range still holds, and keep the timeout short
                position = out[-1].offset() + 1 if out else last_offset + 1
                wanted = max(1, min(chunk - len(out), end - position))
                messages: list[Any] = consumer.consume(num_messages=wanted, timeout=0.05)
                if messages:
                    last_progress = time.monotonic()
                    said = 0
                else:
                    idle = time.monotonic() - last_progress
                    if idle > read_timeout_s:
                        raise KafkaSourceError(
                            f"streamtable-kafka: no progress reading {where} for "
                            f"{read_timeout_s:.0f}s (wanted offsets {start}..{end}, last read "
                            f"{out[-1].offset() if out else last_offset})"
                        )
                    if idle > 10 * (said + 1):
                        said += 1
                        logger.warning(
                            "waiting for Kafka to read %s (offsets %d..%d): nothing for %.0f s; "
                            "retrying for up to %.0f s", where, start, end, idle,
                            read_timeout_s - idle)
                if (messages and not any(map(Message.error, messages))
                        and (tail := messages[-1].offset()) < end):
                    out.extend(messages)  # records only, all in the range (the usual case)
                    done = tail >= last_wanted
                    continue
                for msg in messages:
                    err = msg.error()
                    if err is not None:
                        if err.code() == eof_code:
                            # End of the log: nothing more can come below `end` (transaction
                            # markers or compaction can leave the last offsets without a record).
                            if msg.offset() is not None and msg.offset() >= end:
                                done = True
                                break
                            continue
                        raise KafkaSourceError(f"streamtable-kafka: error reading {where}: {err}")
                    off = msg.offset()
                    if off >= end:
                        done = True
                        break
                    out.append(msg)
                    if off >= last_wanted:
                        done = True
                        break
            if out:
                last_offset = out[-1].offset()
                yield out
        finished = True
    finally:
        if finished:
            _give_back(conf, consumer)
        else:  # an error, or the reader stopped early: nothing of its state is kept
            consumer.close()


class RangeReader:
    """Reads offset ranges as :class:`RecordRun` columns, in the process that processes them.

    ``consumer_conf``: librdkafka settings (``bootstrap.servers`` and any ``security.*``,
    ``sasl.*``, ``ssl.*`` the application uses). Picklable: Spark ships it to executors.
    """

    def __init__(self, consumer_conf: dict[str, Any], read_timeout_s: float = 120.0,
                 chunk: int = 10_000) -> None:
        self.consumer_conf = dict(consumer_conf)
        self.read_timeout_s = read_timeout_s
        self.chunk = chunk

    def read(self, topic: str, partition: int, start: int, end: int) -> Iterator[RecordRun]:
        """The records of ``topic[partition]`` in ``[start, end)``, in offset order."""
        from confluent_kafka import Message

        for messages in consume_range(self.consumer_conf, topic, partition, start, end,
                                      self.chunk, self.read_timeout_s):
            # a record without a timestamp (None) fails in its source node, naming it
            timestamps = [stamp if kind and stamp >= 0 else None
                          for kind, stamp in map(Message.timestamp, messages)]
            headers = [tuple(h) if (h := msg.headers()) else () for msg in messages]
            offsets = cast(list[int], list(map(Message.offset, messages)))  # records have one
            yield RecordRun(topic, partition, offsets, timestamps,
                            list(map(Message.key, messages)), list(map(Message.value, messages)),
                            headers)
