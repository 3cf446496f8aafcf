"""Sources (topic -> records) and sinks (records -> topic)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtable.errors import DeserializationError, ProcessingError
from streamtable.processors._operator import InternalProcessorContext, Operator
from streamtable.processors.api import Change, Record
from streamtable.records import RawRecord
from streamtable.serde import Serde

TimestampExtractor = Callable[[Any, Any, int], int]
ManyDecoder = Callable[[str, list[bytes | None]], list[Any]]  # (topic, data) -> objects
Partitioner = Callable[[str, Any, Any, int], int | None]


class SourceProcessor(Operator):
    """Decodes raw records of its topics and forwards them; the record's event time comes from
    the record timestamp or a ``timestamp_extractor(key, value, record_timestamp)``.

    Serdes not given here are the application's defaults (or the internal serde for repartition
    topics): the engine resolves them once into the node's wiring, read at ``init`` as Kafka
    Streams' source nodes read their default serdes from the context.
    """

    def __init__(
        self,
        key_serde: Serde | None,
        value_serde: Serde | None,
        timestamp_extractor: TimestampExtractor | None = None,
    ) -> None:
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.timestamp_extractor = timestamp_extractor

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        wiring = context.wiring(self.name)
        self._key_serde: Serde = self.key_serde or wiring.key_serde
        self._value_serde: Serde = self.value_serde or wiring.value_serde
        self._carries_changes = wiring.carries_changes
        # set for the right table of a foreign-key join, which finds rows by Kafka's partitioner
        self._check_partitioner = wiring.check_partitioner

    def run_decoders(self) -> tuple[ManyDecoder, ManyDecoder] | None:
        """The key and value deserializers (of many records at once), when decoding a record
        takes nothing but its bytes (no partition check, no timestamp extractor, no changes
        carried): a host may then decode a run of records ahead of processing them
        (:mod:`streamtable.engine.runs`).

        >>> from streamtable.serde import JSON, STRING
        >>> SourceProcessor(STRING, JSON).run_decoders() is None  # not initialised yet
        True
        """
        if (not hasattr(self, "_key_serde") or self._check_partitioner or self._carries_changes
                or self.timestamp_extractor is not None):
            return None
        return self._key_serde.deserialize_many, self._value_serde.deserialize_many

    def _check_partition(self, raw: RawRecord) -> None:
        from streamtable.partitioner import default_partition

        assert raw.key is not None
        expected = default_partition(raw.key, self.context.partitions_of(raw.topic))
        if expected != raw.partition:
            raise ProcessingError(
                f"the key is in partition {raw.partition}, but Kafka's default partitioner "
                f"(murmur2) puts it in partition {expected}; a foreign-key join (or a join with "
                "a re-keyed stream) finds this topic's records by that partitioner, so produce "
                "to this topic with it (in "
                "confluent-kafka: 'partitioner': 'murmur2_random', the Java client's default)",
                topic=raw.topic, partition=raw.partition, offset=raw.offset, processor=self.name,
            )

    def process_raw(self, raw: RawRecord) -> None:
        if self._check_partitioner and raw.key is not None:
            self._check_partition(raw)
        what, serde = "key", self._key_serde
        try:
            key = serde.deserialize(raw.topic, raw.key)
            what, serde = "value", self._value_serde
            value = serde.deserialize(raw.topic, raw.value)
        except Exception as e:
            raise DeserializationError(
                f"cannot decode {what} with {serde!r}: {e}",
                topic=raw.topic, partition=raw.partition, offset=raw.offset, processor=self.name,
            ) from e
        if self._carries_changes:
            value = Change(value[0], value[1])
        ts = raw.timestamp
        if self.timestamp_extractor is not None:
            ts = self.timestamp_extractor(key, value, ts)
        if ts is None or ts < 0:
            raise ProcessingError(
                f"invalid timestamp {ts!r}: event time must be a non-negative number of ms",
                topic=raw.topic, partition=raw.partition, offset=raw.offset, processor=self.name,
            )
        self.context.advance_stream_time(ts)
        self.forward(Record(key, value, ts, raw.headers))

    def process(self, record: Record) -> None:
        self.forward(record)


class SinkProcessor(Operator):
    """Encodes records and hands them to the task's record collector for ``topic``.

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

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        wiring = context.wiring(self.name)
        self.real_topic = wiring.topics[0]
        self._key_serde: Serde = self.key_serde or wiring.key_serde
        self._value_serde: Serde = self.value_serde or wiring.value_serde
        self._carries_changes = wiring.carries_changes
        if wiring.partition_like is not None and self.partitioner is None:
            self.partitioner = _partition_like(*wiring.partition_like)

    def process(self, record: Record) -> None:
        topic = self.real_topic
        if self.topic_extractor is not None:
            topic = self.topic_extractor(record.key, record.value)
        try:
            key = self._key_serde.serialize(topic, record.key)
            value = record.value
            if isinstance(value, Change):
                value = (value.new, value.old) if self._carries_changes else value.new
            data = self._value_serde.serialize(topic, value)
        except Exception as e:
            raise ProcessingError(
                f"cannot encode record for topic {topic!r}: {e}", processor=self.name
            ) from e
        partition = None
        if self.partitioner is not None:
            partition = self.partitioner(topic, record.key, record.value,
                                         self.context.partitions_of(topic))
        self.context.send(topic, key, data, record.timestamp, record.headers, partition)


def _partition_like(topic: str, key_serde: Serde) -> Partitioner:
    """The partition Kafka's default partitioner gives a key in ``topic`` as ``key_serde``
    writes it, taken modulo the partition count of the topic written to (which has as many)."""
    from streamtable.partitioner import default_partition

    def partition(_to: str, key: Any, _value: Any, count: int) -> int | None:
        data = None if key is None else key_serde.serialize(topic, key)
        return None if data is None else default_partition(data, count)

    return partition
