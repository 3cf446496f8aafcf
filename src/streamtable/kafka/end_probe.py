"""The development broker's true end offsets, read from Fetch responses (:class:`EndProbe`).

Tansu's ListOffsets reports the newest record batch's first offset plus one, short of the end
when that batch holds more than one record (see :mod:`streamtable.kafka.broker`); the high
watermark of a Fetch response is right. The probe fetches each partition from its listed end
and takes the high watermark of the first answer: a record (the fetch found some) or the end
of the partition (``_PARTITION_EOF``, it found none).

Two things of Tansu's shape it:

* **The first answer, not the end.** While a producer writes, a fetch at the end finds new
  records nearly every time; waiting for the end of every partition then chases the writer,
  and did for the whole ``metadata.timeout.ms`` at 10,000 records/s.
* **The wait grows with the partition.** Tansu lists every record batch of a partition to
  answer a fetch. Once that takes longer than the request's ``fetch.wait.max.ms``, its answers
  near the end carry the high watermark but no records and never the end, however often the
  fetch repeats (seen with a 10 ms wait from ~20,000 batches a partition, with 50 ms at
  ~100,000). A probe that gets no first answer within :data:`ATTEMPT_S` seconds and four waits
  starts again with a wait four times as long, up to :data:`MAX_WAIT_MS`, and keeps it:
  partitions only grow. (Under a busy CPU an answer may be slow without being empty; the
  attempt's length keeps that from growing the wait.) A wait costs time only when a fetch finds
  no record: a partition whose newest batch holds one record and nothing newer, which is every
  probe of a sparse topic written one record a batch. A ``fetch.wait.max.ms`` of the user's is
  kept as given.

>>> EndProbe({"bootstrap.servers": "127.0.0.1:9092"}, group_id="g").wait_ms
10
>>> EndProbe({"fetch.wait.max.ms": "250"}, group_id="g").wait_ms
250
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from streamtable.kafka.client_log import with_client_log
from streamtable.kafka.ranges import Offsets

log = logging.getLogger(__name__)

#: the first fetch wait: a probe answered at an idle partition's end costs ~15 ms
FIRST_WAIT_MS = 10
#: the longest wait the probe grows to
MAX_WAIT_MS = 2_560
#: how long an attempt waits for the first answers, beyond four fetch waits
ATTEMPT_S = 2.0


class EndProbeTimeout(RuntimeError):
    """No first answer from some partitions before the probe's deadline."""


class EndProbe:
    """One consumer, reused, that reads the true end offsets of partitions on Tansu.

    ``conf`` holds the client settings (``bootstrap.servers`` and the user's); the probe adds
    its own group, no commits and partition-end events.
    """

    def __init__(self, conf: Mapping[str, Any], *, group_id: str) -> None:
        self.conf = dict(conf)
        self.group_id = group_id
        self.adaptive = "fetch.wait.max.ms" not in self.conf
        self.wait_ms = int(self.conf.get("fetch.wait.max.ms", FIRST_WAIT_MS))
        self._consumer: Any = None

    def _client(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            conf = dict(self.conf)
            conf.update({"group.id": self.group_id, "enable.auto.commit": False,
                         "enable.partition.eof": True, "auto.offset.reset": "latest",
                         "fetch.wait.max.ms": self.wait_ms})
            self._consumer = Consumer(with_client_log(conf))
        return self._consumer

    def ends(self, listed: Mapping[str, Mapping[str, int]], timeout_s: float) -> Offsets:
        """The end offset of every partition of ``listed`` (topic -> partition -> the listed
        end), never below the listed one; :class:`EndProbeTimeout` after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            attempt_s = min(ATTEMPT_S + 4 * self.wait_ms / 1000, left) if self.adaptive else left
            pending, ends = self._attempt(listed, attempt_s)
            if not pending:
                return ends
            if not self.adaptive or self.wait_ms >= MAX_WAIT_MS or time.monotonic() >= deadline:
                raise EndProbeTimeout(
                    f"no fetch answer within {timeout_s:.0f} s for {sorted(pending)[:5]}")
            self.wait_ms = min(self.wait_ms * 4, MAX_WAIT_MS)
            log.info("development broker: no fetch answer for %s within %.1f s; the end "
                     "probe's fetch wait is now %d ms", sorted(pending)[:5], attempt_s,
                     self.wait_ms)
            self.close()

    def _attempt(self, listed: Mapping[str, Mapping[str, int]], seconds: float
                 ) -> tuple[set[tuple[str, int]], Offsets]:
        """The partitions with no answer within ``seconds``, and (when none) every end."""
        from confluent_kafka import KafkaError, TopicPartition

        consumer = self._client()
        tps = [TopicPartition(t, int(p), int(off)) for t, ps in listed.items()
               for p, off in ps.items()]
        consumer.assign(tps)
        pending = {(tp.topic, tp.partition) for tp in tps}
        stop = time.monotonic() + max(seconds, 0.0)
        try:
            while pending and time.monotonic() < stop:
                msg = consumer.poll(0.05)
                if msg is None:
                    continue
                err = msg.error()
                if err is None or err.code() == KafkaError._PARTITION_EOF:
                    # the high watermark came with this answer, before the record or the end
                    pending.discard((msg.topic(), msg.partition()))
            result: Offsets = {}
            if pending:
                return pending, result
            for tp in tps:
                _, high = consumer.get_watermark_offsets(tp, cached=True)
                result.setdefault(tp.topic, {})[str(tp.partition)] = max(int(high), tp.offset)
            return pending, result
        finally:
            consumer.unassign()

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()
