"""The development broker's end probe on a real Tansu: the true end of a partition whose newest
record batch holds several records, while a producer writes, and once a partition holds tens of
thousands of record batches."""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from streamtable.kafka.end_probe import EndProbe


def _listed(bootstrap: str, topic: str, partitions: int) -> dict[str, dict[str, int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)})
    return {topic: {str(tp.partition): f.result().offset for tp, f in futures.items()}}


def _producer(bootstrap: str, records_per_batch: int) -> Any:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 1,
                     "batch.num.messages": records_per_batch})


def _send(producer: Any, topic: str, partition: int, count: int) -> None:
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value=b"v" * 100, partition=partition)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(60) == 0


def test_the_probe_finds_the_end_the_listing_misses(bootstrap, new_topic):
    topic = new_topic(1)
    _send(_producer(bootstrap, 50), topic, 0, 1_000)
    listed = _listed(bootstrap, topic, 1)
    assert listed[topic]["0"] < 1_000  # Tansu lists the newest batch's first offset + 1
    probe = EndProbe({"bootstrap.servers": bootstrap}, group_id="end-probe-test")
    try:
        assert probe.ends(listed, 10) == {topic: {"0": 1_000}}
    finally:
        probe.close()


def test_the_probe_answers_while_a_producer_writes(bootstrap, new_topic):
    # waiting for every partition's end chased the writer: the fetch at the end found new
    # records nearly every time, and the probe gave up after its timeout
    topic = new_topic(2)
    producer = _producer(bootstrap, 5)
    stop = threading.Event()
    sent = [0]

    def write() -> None:
        while not stop.is_set():
            try:
                for p in (0, 1):
                    producer.produce(topic, value=b"v" * 100, partition=p)
            except BufferError:
                producer.poll(0.01)
                continue
            sent[0] += 2
            producer.poll(0)
            if sent[0] % 40 == 0:
                time.sleep(0.002)
        producer.flush(60)

    writer = threading.Thread(target=write)
    writer.start()
    probe = EndProbe({"bootstrap.servers": bootstrap}, group_id="end-probe-test")
    try:
        time.sleep(1.0)
        took = []
        for _ in range(5):
            listed = _listed(bootstrap, topic, 2)
            t0 = time.monotonic()
            ends = probe.ends(listed, 20)
            took.append(time.monotonic() - t0)
            for p in ("0", "1"):
                assert ends[topic][p] >= listed[topic][p]
            time.sleep(0.2)
    finally:
        stop.set()
        writer.join()
    try:
        assert max(took) < 5, took
        # once the writer stopped, the ends are exactly what it wrote
        ends = probe.ends(_listed(bootstrap, topic, 2), 20)
        assert sum(ends[topic].values()) == sent[0]
    finally:
        probe.close()


def test_the_probe_waits_longer_once_a_partition_holds_many_batches(bootstrap, new_topic):
    # Tansu lists every batch of a partition to answer a fetch; past ~20,000 batches its
    # answers to a 10 ms fetch near the end carried no records and never the end, and a probe
    # with that wait fixed timed out here
    topic = new_topic(1)
    _send(_producer(bootstrap, 10), topic, 0, 200_000)
    probe = EndProbe({"bootstrap.servers": bootstrap}, group_id="end-probe-test")
    try:
        assert probe.ends(_listed(bootstrap, topic, 1), 30) == {topic: {"0": 200_000}}
    finally:
        probe.close()
