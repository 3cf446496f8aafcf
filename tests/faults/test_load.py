"""Load held: 32 source partitions, a hot key with half the records, values of 1 MB through a
repartition, several micro-batches: the table equals the test driver's, the output has no
repeat."""

from __future__ import annotations

import json
import random

import pytest
from confluent_kafka import Producer
from tests.runtime.spark.kafka_util import new_topics, read_all

from streamtable import StreamsBuilder, TopologyTestDriver

pytestmark = pytest.mark.spark

PARTITIONS = 32
MB = 1_000_000


def _topology(src: str, out: str):
    builder = StreamsBuilder()
    (builder.stream(src)
     .group_by(lambda key, event: event["user"])
     .aggregate(lambda: {"events": 0, "bytes": 0},
                lambda user, event, agg: {"events": agg["events"] + 1,
                                          "bytes": agg["bytes"] + len(event["blob"])},
                materialized="per-user")
     .to_stream().to(out))
    return builder.build()


def _events(n: int) -> list[tuple[bytes, bytes]]:
    rng = random.Random(3)
    out = []
    for i in range(n):
        user = "hot" if i % 2 == 0 else f"user-{rng.randrange(200)}"
        size = MB if i % 150 == 7 else rng.randrange(10, 200)
        value = {"user": user, "blob": "x" * size}
        out.append((json.dumps(f"e{i}").encode(), json.dumps(value).encode()))
    return out


def test_32_partitions_hot_key_and_1mb_values(spark, bootstrap, tmp_path):
    from streamtable.runtime.spark import StreamsApp

    src, out = new_topics(bootstrap, PARTITIONS, "load-events", "load-per-user")
    events = _events(3000)
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                         "message.max.bytes": 4 * MB, "linger.ms": 5})
    for key, value in events:
        producer.produce(src, key=key, value=value)
    assert producer.flush(60) == 0

    topology = _topology(src, out)
    app = StreamsApp(topology, f"load-{src}", bootstrap, state_dir=tmp_path, spark=spark,
                     config={"max.records.per.batch": 1000}, development_broker=True)
    app.run_until_caught_up(timeout=600)
    assert app.batches >= 3

    driver = TopologyTestDriver(topology)
    topic = driver.create_input_topic(src)
    for key, value in events:
        topic.pipe_input(json.loads(key), json.loads(value))
    expected = dict(driver.get_key_value_store("per-user").all())
    assert expected["hot"]["events"] == 1500
    assert sum(v["bytes"] for v in expected.values()) >= 20 * MB
    assert app.store("per-user").to_dict() == expected

    per_user: dict[str, list[int]] = {}
    for msg in read_all(bootstrap, out):
        per_user.setdefault(json.loads(msg.key()), []).append(json.loads(msg.value())["events"])
    assert {u: seq[-1] for u, seq in per_user.items()} == {
        u: v["events"] for u, v in expected.items()}
    for user, seq in per_user.items():
        assert seq == sorted(set(seq)), f"{user}: an aggregate was produced twice or went back"
