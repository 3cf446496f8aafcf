"""Producing and reading topics of the test broker."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from streamtable.kafka.admin import ensure_topics, partition_counts


def new_topics(bootstrap: str, partitions: int, *names: str) -> list[str]:
    suffix = uuid.uuid4().hex[:6]
    real = [f"{n}-{suffix}" for n in names]
    ensure_topics(bootstrap, {t: partitions for t in real})
    return real


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]],
            timestamps: list[int] | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                         "linger.ms": 5})
    for i, (k, v) in enumerate(records):
        kwargs: dict[str, Any] = {}
        if timestamps is not None:
            kwargs["timestamp"] = timestamps[i]
        producer.produce(topic, key=k, value=v, **kwargs)
    assert producer.flush(30) == 0


def read_all(bootstrap: str, topic: str, timeout: float = 30.0) -> list[Any]:
    """Every record of ``topic``, partition by partition, in offset order."""
    import time

    counts = partition_counts(bootstrap, [topic])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    out = []
    try:
        for p in range(counts[topic]):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            consumer.assign([TopicPartition(topic, p, 0)])
            records = []
            deadline = time.monotonic() + timeout
            idle = 0
            while time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    idle += 1
                    if idle >= 3 and (not records or records[-1].offset() + 1 >= high):
                        break
                    continue
                idle = 0
                if msg.error():
                    continue
                records.append(msg)
            out.extend(records)
    finally:
        consumer.close()
    return out
