"""Run a topology through the test driver and through the Spark runtime, batch by batch."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from streamtable import TopologyTestDriver
from streamtable.partitioner import default_partition
from streamtable.records import OutputRecord
from streamtable.runtime.spark import StreamsApp
from streamtable.runtime.spark.stage import RECORD_DDL
from streamtable.serde import JSON

SOURCE_SCHEMA = RECORD_DDL


OUTPUT_FIELDS = ("topic", "key", "value", "timestamp", "headers", "partition")


class MemoryOutput:
    """Collects what the runtime would produce to Kafka, per batch (a replay replaces)."""

    def __init__(self) -> None:
        self.batches: dict[int, list[dict[str, Any]]] = {}

    def write(self, batch_id: int, records: list[OutputRecord]) -> None:
        """Keeps each record as a dict of its fields: topic, key, value, timestamp, headers,
        partition."""
        self.batches[batch_id] = [dict(zip(OUTPUT_FIELDS, r, strict=True)) for r in records]

    def topic(self, name: str) -> list[tuple[Any, Any]]:
        out = []
        for b in sorted(self.batches):
            for r in self.batches[b]:
                if r["topic"] == name:
                    out.append((JSON.deserialize(name, r["key"]),
                                JSON.deserialize(name, r["value"])))
        return out


def run_driver(topology, records, outputs, cache: bool):
    driver = TopologyTestDriver(
        topology, {"cache.max.bytes.buffering": 10_000_000 if cache else 0}
    )
    topic = driver.create_input_topic("in")
    for i, (k, v) in enumerate(records):
        topic.pipe_input(k, v, timestamp=1000 + i)
    result = {o: driver.create_output_topic(o).read_key_values() for o in outputs}
    return driver, result


def source_rows(records, partitions: int, start: int = 0, topic: str = "in"):
    """Rows as the Kafka source gives them: keys placed by Kafka's default partitioner."""
    offsets: dict[int, int] = defaultdict(int)
    rows = []
    for i, (k, v) in enumerate(records):
        key = json.dumps(k).encode()
        p = default_partition(key, partitions)
        rows.append((topic, p, offsets[p] + start * 1000, 1000 + start + i, key,
                     None if v is None else JSON.serialize(topic, v), None))
        offsets[p] += 1
    return rows


def run_spark(spark, topology, records, cuts, partitions, cache, state_dir, app_id,
              dsl_store="in_memory"):
    output = MemoryOutput()
    app = StreamsApp(topology, app_id, state_dir=state_dir, spark=spark, output=output,
                     config={"cache.max.bytes.buffering": 10_000_000 if cache else 0,
                             "default.dsl.store": dsl_store})
    app.prepare({"in": partitions})
    bounds = [0, *cuts, len(records)]
    for batch, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
        rows = source_rows(records[lo:hi], partitions, start=lo)
        app.process_batch(spark.createDataFrame(rows, SOURCE_SCHEMA), batch)
    return app, output


def last_per_key(pairs):
    result: dict[Any, Any] = {}
    for k, v in pairs:
        if v is None:
            result.pop(k, None)
        else:
            result[k] = v
    return result


def per_key(pairs):
    result: dict[Any, list[Any]] = defaultdict(list)
    for k, v in pairs:
        result[k].append(v)
    return dict(result)


def place(key: Any, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a JSON key."""
    return default_partition(json.dumps(key).encode(), partitions)


def run_driver_batches(topology, topics, batches, partitions: int, cache: bool):
    """The test driver in batch mode over ``batches`` of ``(topic, key, value, timestamp)``,
    each record in its key's partition, one micro-batch per batch: the Spark runtime's order."""
    driver = TopologyTestDriver(
        topology, {"cache.max.bytes.buffering": 10_000_000 if cache else 0}, batch_mode=True)
    inputs = {t: driver.create_input_topic(t, partitions=partitions) for t in topics}
    for batch in batches:
        for topic, k, v, ts in batch:
            inputs[topic].pipe_input(k, v, timestamp=ts, partition=place(k, partitions))
        driver.run_batch()
    return driver


def run_spark_batches(spark, topology, topics, batches, partitions: int, cache: bool,
                      state_dir: str, app_id: str, dsl_store: str = "in_memory",
                      replay: int | None = None):
    """The Spark runtime over the same batches (batch ``replay`` run twice, as Spark replays an
    unfinished batch after a crash)."""
    output = MemoryOutput()
    app = StreamsApp(topology, app_id, state_dir=state_dir, spark=spark, output=output,
                     config={"cache.max.bytes.buffering": 10_000_000 if cache else 0,
                             "default.dsl.store": dsl_store})
    app.prepare(dict.fromkeys(topics, partitions))
    offsets: dict[tuple[str, int], int] = defaultdict(int)
    for batch_id, batch in enumerate(batches):
        rows = []
        for topic, k, v, ts in batch:
            p = place(k, partitions)
            rows.append((topic, p, offsets[topic, p], ts, json.dumps(k).encode(),
                         None if v is None else JSON.serialize(topic, v), None))
            offsets[topic, p] += 1
        frame = spark.createDataFrame(rows, SOURCE_SCHEMA)
        app.process_batch(frame, batch_id)
        if batch_id == replay:
            app.process_batch(frame, batch_id)
    return app, output
