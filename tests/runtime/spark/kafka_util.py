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


def read_partitions(bootstrap: str, topic: str, partitions: int | None = None,
                    timeout: float = 30.0, fetch_wait_ms: int = 10) -> dict[int, list[Any]]:
    """Every record of ``topic`` per partition, in offset order, read to the end of the log
    (``fetch_wait_ms``: a broker's fetch wait; Tansu on S3 needs more than the default)."""
    import time

    from confluent_kafka import KafkaError

    if partitions is None:
        partitions = partition_counts(bootstrap, [topic])[topic]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "fetch.wait.max.ms": fetch_wait_ms})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[Any]] = {p: [] for p in range(partitions)}
        eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(eof) < partitions:
            assert time.monotonic() < deadline, f"timed out reading {topic}"
            for msg in consumer.consume(1000, 0.02):
                if msg.error():
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    eof.add(msg.partition())
                else:
                    out[msg.partition()].append(msg)
        return out
    finally:
        consumer.close()


def read_all(bootstrap: str, topic: str, timeout: float = 30.0) -> list[Any]:
    """Every record of ``topic``, partition by partition, in offset order (to the log end)."""
    per_partition = read_partitions(bootstrap, topic, timeout=timeout)
    return [m for p in sorted(per_partition) for m in per_partition[p]]
