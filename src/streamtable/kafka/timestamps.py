"""Where each partition reaches a timestamp: the lookups of
:func:`~streamtable.kafka.batch_cut.cut_at_timestamp`.

* :class:`ListedTimestamps`: Kafka's ListOffsets by timestamp (what ``offsetsForTimes``
  sends), one request for every partition of a batch per lookup. What the source uses on Kafka.
* :class:`ReadTimestamps`: the records' own timestamps, read by a consumer in the planning
  process, for a broker whose ListOffsets by timestamp cannot be used: the development broker
  answers offset 0 whatever the timestamp (see :mod:`streamtable.kafka.broker`). Each record
  is read once and its timestamp kept until a batch takes it, so planning reads every record a
  second time: ~1 s of the planner's CPU per million records on the development broker, and
  24 bytes per record read ahead of the batches. Once a batch is cut, :meth:`ReadTimestamps.
  prefetch` reads on in the background what the next cut will look at, while the batch runs
  (Spark plans a batch only after the previous one ended: read in the planning, it would add
  its time to every batch of a backlog).

Keys are ``(topic, partition)``.

>>> lookup = ListedTimestamps(admin).lookup([("orders", 0), ("orders", 1)])  # doctest: +SKIP
>>> lookup(1_700_000_000_000)                                                 # doctest: +SKIP
{('orders', 0): (1812, 1700000000004), ('orders', 1): (None, None)}
"""

from __future__ import annotations

import logging
import threading
import time
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from itertools import accumulate
from typing import Any

from streamtable.kafka.batch_cut import Found, Lookup
from streamtable.kafka.client_log import with_client_log
from streamtable.kafka.ranges import QUEUED_RECORDS_MAX, KafkaSourceError, reader_config

logger = logging.getLogger(__name__)

__all__ = ["ListedTimestamps", "ReadTimestamps"]

TopicPartitionKey = tuple[str, int]


class ListedTimestamps:
    """Lookups answered by Kafka's ListOffsets by timestamp (KIP-79), through an
    ``AdminClient``: the earliest offset whose timestamp is at or after ``T`` and that
    timestamp; ``(None, None)`` where no record is (or none below the last stable offset, with
    ``isolation_level`` read_committed)."""

    def __init__(self, admin: Any, isolation_level: Any = None, timeout_s: float = 30.0) -> None:
        self.admin = admin
        self.isolation_level = isolation_level
        self.timeout_s = timeout_s

    def lookup(self, partitions: Iterable[TopicPartitionKey]) -> Lookup[TopicPartitionKey]:
        """``lookup(T)`` over ``partitions``."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        keys = list(partitions)

        def at(t: int) -> dict[TopicPartitionKey, Found]:
            spec = OffsetSpec.for_timestamp(t)
            request = {TopicPartition(topic, part): spec for topic, part in keys}
            kwargs: dict[str, Any] = {"request_timeout": self.timeout_s}
            if self.isolation_level is not None:
                kwargs["isolation_level"] = self.isolation_level
            found: dict[TopicPartitionKey, Found] = {}
            for tp, future in self.admin.list_offsets(request, **kwargs).items():
                try:
                    info = future.result()
                except Exception as exc:
                    raise KafkaSourceError(
                        f"streamtable-kafka: could not look up timestamp {t} in topic "
                        f"{tp.topic!r} partition {tp.partition}: {exc}") from exc
                offset, stamp = int(info.offset), int(info.timestamp)
                found[(tp.topic, tp.partition)] = ((offset, stamp if stamp >= 0 else None)
                                                   if offset >= 0 else (None, None))
            return found

        return at


class _Read:
    """The timestamps of one partition's records from a batch's start on, as read so far:
    ``highest[i]`` is the highest of the first ``i + 1``, so the first record at or after a
    timestamp is a bisection away, in order or not."""

    def __init__(self, start: int) -> None:
        self.offsets = array("q")
        self.stamps = array("q")
        self.highest = array("q")
        self.next = start  # the next offset to read

    def restart(self, start: int) -> None:
        """Keep what was read from ``start`` on (a new batch's start)."""
        first = self.offsets[0] if self.offsets else self.next
        if not first <= start <= self.next:  # a replay from elsewhere, or skipped ahead
            self.__init__(start)  # type: ignore[misc]
            return
        drop = bisect_left(self.offsets, start)
        if not drop:
            return
        rest_highest = self.highest[drop:] if drop < len(self.highest) else array("q")
        before = self.highest[drop - 1]
        del self.offsets[:drop], self.stamps[:drop]
        if rest_highest and before > self.stamps[0]:
            # a dropped record was the highest so far: the running highest starts again
            rest_highest = array("q", accumulate(self.stamps, max))
        self.highest = rest_highest

    def add(self, messages: list[Any]) -> None:
        top = self.highest[-1] if self.highest else -1
        for msg in messages:
            kind, stamp = msg.timestamp()
            stamp = stamp if kind and stamp >= 0 else -1  # none: earlier than any
            top = stamp if stamp > top else top
            self.offsets.append(msg.offset())
            self.stamps.append(stamp)
            self.highest.append(top)


class ReadTimestamps:
    """Lookups answered from the records' timestamps, read with a consumer where the
    planning runs and kept from one batch to the next (see the module's doc).

    ``consumer_conf``: librdkafka settings (``bootstrap.servers`` and the application's
    security settings).
    """

    def __init__(self, consumer_conf: Mapping[str, Any], read_timeout_s: float = 120.0,
                 first_read: int = 4096) -> None:
        self.consumer_conf = dict(consumer_conf)
        self.read_timeout_s = read_timeout_s
        self.first_read = first_read
        self._read: dict[TopicPartitionKey, _Read] = {}
        self._consumer: Any = None
        self.records_read = 0
        # the background read of :meth:`prefetch`, and what stops it at its next chunk
        self._prefetch: threading.Thread | None = None
        self._stop_prefetch = threading.Event()
        self._prefetch_error: BaseException | None = None

    def lookup(self, starts: Mapping[TopicPartitionKey, int],
               ends: Mapping[TopicPartitionKey, int], cap: int) -> Lookup[TopicPartitionKey]:
        """``lookup(T)`` over the ranges from ``starts`` to ``ends``, reading no more than
        ``cap`` records of a partition from its start (beyond them the cut of a batch of
        ``cap - 1`` records does not look: the offset answered is then the first not read,
        without its timestamp)."""
        self._end_prefetch()
        for key in list(self._read):
            if key not in starts:
                del self._read[key]
        for key, start in starts.items():
            if key in self._read:
                self._read[key].restart(start)
            else:
                self._read[key] = _Read(start)

        def at(t: int) -> dict[TopicPartitionKey, Found]:
            while True:
                found: dict[TopicPartitionKey, Found] = {}
                wanted: dict[TopicPartitionKey, int] = {}
                for key in starts:
                    answer = self._find(key, t, ends[key], cap)
                    if answer is None:
                        wanted[key] = self._read_to(key, ends[key], cap)
                    else:
                        found[key] = answer
                if not wanted:
                    return found
                self._read_ahead(wanted)  # every partition that needs more at once

        return at

    def prefetch(self, starts: Mapping[TopicPartitionKey, int],
                 ends: Mapping[TopicPartitionKey, int],
                 records: Mapping[TopicPartitionKey, int], chunk: int = 65_536) -> None:
        """Read on in the background, from where reading stopped, up to ``records[key]``
        records past each partition's ``starts`` (the next batch's; below its end), ``chunk``
        records at a time: the next :meth:`lookup` stops the read at its next chunk and goes on
        from there. A failed read is logged at debug level by the next lookup, which reads
        what is missing again."""
        self._end_prefetch()
        stops = {}
        for key, start in starts.items():
            read = self._read.get(key)
            if (key in records and read is not None and read.offsets
                    and read.offsets[0] <= start <= read.next):
                stop = min(ends[key], start + records[key])
                if stop > read.next:
                    stops[key] = stop
        if not stops:
            return
        self._stop_prefetch.clear()

        def run() -> None:
            try:
                while stops and not self._stop_prefetch.is_set():
                    for key in list(stops):
                        step = min(stops[key], self._read[key].next + chunk)
                        if step >= stops[key]:
                            del stops[key]
                        self._read_ahead({key: step})
            except BaseException as e:  # the lookups read what is missing again
                self._prefetch_error = e

        self._prefetch = threading.Thread(target=run, name="streamtable-timestamps",
                                          daemon=True)
        self._prefetch.start()

    def _end_prefetch(self) -> None:
        """Stop the background read (at its next chunk) and wait for it."""
        thread, self._prefetch = self._prefetch, None
        if thread is not None:
            self._stop_prefetch.set()
            thread.join()
        if self._prefetch_error is not None:
            logger.debug("reading timestamps ahead failed: %s", self._prefetch_error)
            self._prefetch_error = None

    def close(self) -> None:
        """Close the consumer (a later lookup opens another)."""
        self._end_prefetch()
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()

    def _find(self, key: TopicPartitionKey, t: int, end: int, cap: int) -> Found | None:
        """What the partition's records read so far say of ``t``; None: read more first."""
        read = self._read[key]
        i = bisect_left(read.highest, t)
        if i < len(read.highest):
            offset = read.offsets[i]
            return (offset, read.stamps[i]) if offset < end else (None, None)
        if read.next >= end:
            return None, None
        if len(read.offsets) >= cap:
            return read.next, None
        return None

    def _read_to(self, key: TopicPartitionKey, end: int, cap: int) -> int:
        """Where the next read of a partition stops: steps that grow with what was read, so a
        batch of any size takes a few reads."""
        read = self._read[key]
        return min(end, read.next + min(cap - len(read.offsets),
                                        max(self.first_read, len(read.offsets))))

    def _read_ahead(self, stops: Mapping[TopicPartitionKey, int]) -> None:
        """Read each partition of ``stops`` from where its reading stopped to its stop (a
        read that fails part-way keeps what it read, and where it got to)."""
        for key, messages in self._messages({k: (self._read[k].next, stop)
                                             for k, stop in stops.items()}):
            read = self._read[key]
            read.add(messages)
            read.next = messages[-1].offset() + 1
            self.records_read += len(messages)
        for key, stop in stops.items():
            self._read[key].next = stop

    def _messages(self, ranges: Mapping[TopicPartitionKey, tuple[int, int]]
                  ) -> Iterator[tuple[TopicPartitionKey, list[Any]]]:
        """The records of each partition's ``[start, stop)`` (below the partition's end), in
        lists; one consumer for every read, so that a read costs no new connection."""
        from confluent_kafka import KafkaError, TopicPartition

        if self._consumer is None:
            from confluent_kafka import Consumer

            # the settings of the readers of the batches' ranges (see reader_config), for
            # reads of up to ~16k records; 1 ms: a partition read to its end answers at once
            conf = reader_config(self.consumer_conf, 0, QUEUED_RECORDS_MAX)
            conf["fetch.wait.max.ms"] = 1
            self._consumer = Consumer(with_client_log(conf))
        consumer = self._consumer
        positions = {key: start for key, (start, _) in ranges.items()}
        pending = {key for key, (start, stop) in ranges.items() if start < stop}
        consumer.assign([TopicPartition(t, p, positions[(t, p)]) for t, p in pending])
        last_progress = time.monotonic()
        while pending:
            # consume() waits its whole timeout unless the batch fills (as in consume_range):
            # ask for no more than the ranges still hold, or a read to a log's end waits
            wanted = min(10_000, sum(ranges[key][1] - positions[key] for key in pending))
            messages = consumer.consume(num_messages=max(1, wanted), timeout=0.1)
            kept: dict[TopicPartitionKey, list[Any]] = {}
            for msg in messages:
                key = (msg.topic(), msg.partition())
                if key not in pending:
                    continue  # fetched past its stop
                stop = ranges[key][1]
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise KafkaSourceError(
                            f"streamtable-kafka: error reading the timestamps of topic "
                            f"{key[0]!r} partition {key[1]}: {err}")
                    positions[key] = stop  # the log ends before `stop` (transaction markers)
                elif msg.offset() >= positions[key]:  # not one of an earlier assignment
                    if msg.offset() < stop:
                        kept.setdefault(key, []).append(msg)
                    positions[key] = msg.offset() + 1
                if positions[key] >= stop:
                    pending.discard(key)
                    consumer.incremental_unassign([TopicPartition(*key)])
            if kept:
                last_progress = time.monotonic()
                yield from kept.items()
            elif time.monotonic() - last_progress > self.read_timeout_s:
                key = min(pending)
                raise KafkaSourceError(
                    f"streamtable-kafka: no progress reading the timestamps of topic {key[0]!r} "
                    f"partition {key[1]} for {self.read_timeout_s:.0f}s (offsets "
                    f"{ranges[key][0]}..{ranges[key][1]}, next {positions[key]})")
