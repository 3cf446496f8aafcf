"""Micro-batches of a backlog end at the same timestamp on every partition: a dense and a
sparse topic joined and windowed with a small grace period give, batch after small batch, the
test driver's result (which sees every record in timestamp order), and no record is late."""

from __future__ import annotations

import json

import pytest
from tests.runtime.spark.kafka_util import new_topics, produce, read_all

from streamtable import JoinWindows, StreamsBuilder, TimeWindows, TopologyTestDriver
from streamtable.partitioner import default_partition
from streamtable.runtime.spark import StreamsApp
from streamtable.serde import JSON

pytestmark = pytest.mark.spark

PARTITIONS = 2


def topology(n: dict[str, str]):
    b = StreamsBuilder()
    dense, sparse = b.stream(n["dense"]), b.stream(n["sparse"])
    dense.join(sparse, lambda d, s: f"{d}+{s}",
               JoinWindows.of_time_difference_and_grace(100, 10)).to(n["joined"])
    (dense.merge(sparse).group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(100, 10)).count()
     .to_stream(lambda w, v: f"{w.key}@{w.start}").to(n["counts"]))
    return b.build()


def events() -> list[tuple[str, int, str, int]]:
    """(topic, key, value, timestamp): 300 dense records 10 ms apart, 30 sparse ones 100 ms
    apart (never at a dense record's timestamp, so the order across topics is the timestamps')."""
    dense = [("dense", i % 4, f"d{i}", 1000 + 10 * i) for i in range(300)]
    sparse = [("sparse", j % 4, f"s{j}", 1005 + 100 * j) for j in range(30)]
    return sorted(dense + sparse, key=lambda e: e[3])


def test_small_batches_of_a_dense_and_a_sparse_topic_give_the_drivers_result(
        spark, bootstrap, tmp_path):
    logical = ("dense", "sparse", "joined", "counts")
    names = dict(zip(logical, new_topics(bootstrap, PARTITIONS, *logical), strict=True))
    evs = events()
    driver = TopologyTestDriver(topology(names))
    inputs = {t: driver.create_input_topic(names[t], partitions=PARTITIONS)
              for t in ("dense", "sparse")}
    for topic, key, value, ts in evs:
        inputs[topic].pipe_input(key, value, timestamp=ts,
                                 partition=default_partition(json.dumps(key).encode(),
                                                             PARTITIONS))
    expected = {t: sorted(repr((r.key, r.value, r.timestamp))
                          for r in driver.create_output_topic(names[t]).read_records())
                for t in ("joined", "counts")}
    for topic in ("dense", "sparse"):
        rs = [(json.dumps(k).encode(), JSON.serialize(names[topic], v), ts)
              for t, k, v, ts in evs if t == topic]
        produce(bootstrap, names[topic], [(k, v) for k, v, _ in rs],
                timestamps=[ts for _, _, ts in rs])

    app = StreamsApp(topology(names), "time-aligned", state_dir=str(tmp_path), spark=spark,
                     config={"bootstrap.servers": bootstrap, "max.records.per.batch": 40,
                             "cache.max.bytes.buffering": 0},
                     development_broker=True)
    app.run_until_caught_up(timeout=300)

    assert app.batches >= len(evs) // 40
    got = {t: sorted(repr((json.loads(m.key()), json.loads(m.value()), m.timestamp()[1]))
                     for m in read_all(bootstrap, names[t]))
           for t in ("joined", "counts")}
    assert len(expected["joined"]) > 100 and len(expected["counts"]) > 300
    assert got == expected
