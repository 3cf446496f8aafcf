"""Sources (topic -> records) and sinks (records -> topic)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtable.errors import DeserializationError, ProcessingError
from streamtable.processors.api import Change, Processor, RawRecord, Record
from streamtable.serde import Serde

TimestampExtractor = Callable[[Any, Any, int], int]
Partitioner = Callable[[str, Any, Any, int], int | None]


class SourceProcessor(Processor):
    """Decodes raw records of its topics and forwards them; the record's event time comes from
    the record timestamp or a ``timestamp_extractor(key, value, record_timestamp)``."""

    def __init__(
        self,
        key_serde: Serde | None,
        value_serde: Serde | None,
        timestamp_extractor: TimestampExtractor | None = None,
    ) -> None:
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.timestamp_extractor = timestamp_extractor
        # set for the right table of a foreign-key join, which finds rows by Kafka's partitioner
        self.check_partitioner = False
        self.carries_changes = False

    def _check_partition(self, raw: RawRecord) -> None:
        from streamtable.kafka.partitioner import default_partition

        expected = default_partition(raw.key, self.task.partitions_of(raw.topic))  # type: ignore[arg-type]
        if expected != raw.partition:
            raise ProcessingError(
                f"the key is in partition {raw.partition}, but Kafka's default partitioner "
                f"(murmur2) puts it in partition {expected}; a foreign-key join finds rows of "
                "this table by that partitioner, so produce to this topic with it (in "
                "confluent-kafka: 'partitioner': 'murmur2_random', the Java client's default)",
                topic=raw.topic, partition=raw.partition, offset=raw.offset, processor=self.name,
            )

    def process_raw(self, raw: RawRecord) -> None:
        if self.check_partitioner and raw.key is not None:
            self._check_partition(raw)
        what, serde = "key", self.key_serde
        try:
            key = serde.deserialize(raw.topic, raw.key)  # type: ignore[union-attr]
            what, serde = "value", self.value_serde
            value = serde.deserialize(raw.topic, raw.value)  # type: ignore[union-attr]
        except Exception as e:
            raise DeserializationError(
                f"cannot decode {what} with {serde!r}: {e}",
                topic=raw.topic, partition=raw.partition, offset=raw.offset, processor=self.name,
            ) from e
        if self.carries_changes:
            value = Change(value[0], value[1])
        ts = raw.timestamp
        if self.timestamp_extractor is not None:
            ts = self.timestamp_extractor(key, value, ts)
        if ts is None or ts < 0:
            raise ProcessingError(
                f"invalid timestamp {ts!r}: event time must be a non-negative number of ms",
                topic=raw.topic, partition=raw.partition, offset=raw.offset, processor=self.name,
            )
        task = self.task
        if ts > task.stream_time:
            task.stream_time = ts
        self.forward(Record(key, value, ts, raw.headers))

    def process(self, record: Record) -> None:
        self.forward(record)


class SinkProcessor(Processor):
    """Encodes records and hands them to the task's collector for ``topic``.

    A sink of an external topic writes plain values (a KTable's ``to_stream`` has already taken
    ``Change.new``); internal repartition sinks carry whole Changes.
    """

    def __init__(
        self,
        topic: str,
        key_serde: Serde | None,
        value_serde: Serde | None,
        partitioner: Partitioner | None = None,
        topic_extractor: Callable[[Any, Any], str] | None = None,
    ) -> None:
        self.topic = topic
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.partitioner = partitioner
        self.topic_extractor = topic_extractor
        self.real_topic = topic

    def process(self, record: Record) -> None:
        topic = self.real_topic
        if self.topic_extractor is not None:
            topic = self.topic_extractor(record.key, record.value)
        try:
            key = self.key_serde.serialize(topic, record.key)  # type: ignore[union-attr]
            value = record.value
            if isinstance(value, Change):
                value = (value.new, value.old) if self.carries_changes else value.new
            data = self.value_serde.serialize(topic, value)  # type: ignore[union-attr]
        except Exception as e:
            raise ProcessingError(
                f"cannot encode record for topic {topic!r}: {e}", processor=self.name
            ) from e
        partition = None
        if self.partitioner is not None:
            partition = self.partitioner(topic, record.key, record.value,
                                         self.task.partitions_of(topic))
        self.task.collector.send(topic, key, data, record.timestamp, record.headers, partition)

    carries_changes = False
