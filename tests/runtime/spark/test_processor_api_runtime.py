"""A user's Processor with a store and both punctuation types on Spark: batch by batch (with
no-data batches and replays) equal to the test driver's batch mode, and as a streaming query on
the real broker, where wall-clock punctuations keep coming while no record arrives."""

from __future__ import annotations

import json
import sys
import time

import pytest
from pyspark import cloudpickle
from tests.runtime.spark.harness import SOURCE_SCHEMA, MemoryOutput
from tests.runtime.spark.kafka_util import new_topics, produce, read_all

from streamtable import Processor, PunctuationType, Record, Stores, StreamsBuilder
from streamtable import TopologyTestDriver as Driver
from streamtable.runtime.spark import StreamsApp
from streamtable.serde import JSON

pytestmark = pytest.mark.spark

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Spark's workers cannot import it


class Tracker(Processor):
    """Sums values per key; every 10 s of stream time forwards each key's total, every second
    of wall-clock time the number of keys."""

    def init(self, context):
        self.context = context
        self.totals = context.get_state_store("totals")
        context.schedule(10_000, PunctuationType.STREAM_TIME, self.on_stream_time)
        context.schedule(1_000, PunctuationType.WALL_CLOCK_TIME, self.on_wall_clock)

    def process(self, record):
        self.totals.put(record.key, (self.totals.get(record.key) or 0) + record.value)

    def on_stream_time(self, now):
        for key, total in self.totals.all():
            self.context.forward(Record(key, f"stream@{now}:{total}", now))

    def on_wall_clock(self, now):
        self.context.forward(Record("wall", f"wall@{now}:{len(self.totals)}", now))


def build(source="in", out="out"):
    b = StreamsBuilder()
    b.add_state_store(Stores.key_value_store_builder(
        Stores.persistent_key_value_store("totals")).with_queryable())
    emitted = b.stream(source).process(Tracker, "totals", named="tracker")
    emitted.to(out)
    emitted.group_by_key().count("emitted")  # a later stage fed by the punctuations
    return b.build()


def frame(spark, records, first_offset):
    rows = [("in", 0, first_offset + i, ts, json.dumps(k).encode(), JSON.serialize("in", v),
             None) for i, (k, v, ts) in enumerate(records)]
    return spark.createDataFrame(rows, SOURCE_SCHEMA)


def test_processor_api_on_spark_equals_the_driver_with_no_data_batches_and_replays(spark,
                                                                                   tmp_path):
    topology = build()
    start = 1_000_000
    # (records, wall-clock time of the batch); empty batches are no-data batches
    batches = [
        ([(f"k{i % 3}", i, 1000 * i) for i in range(12)], start),
        ([], start + 1500),
        ([(f"k{i % 4}", 1, 1000 * i + 500) for i in range(12, 30)], start + 2200),
        ([], start + 3000),
        ([], start + 3100),
        ([("k9", 5, 45_000)], start + 7000),
    ]
    driver = Driver(topology, {"application.id": "procapi"}, initial_wall_clock_time_ms=start,
                    batch_mode=True)
    topic = driver.create_input_topic("in")
    out = driver.create_output_topic("out")
    expected = []
    for records, now in batches:
        for k, v, ts in records:
            topic.pipe_input(k, v, timestamp=ts)
        driver.advance_wall_clock_time(now - driver.wall_clock_ms)
        driver.run_batch()
        expected.append(out.read_key_values())
    assert sum(1 for b in expected for k, _ in b if k == "wall") == 4  # at 1.5, 2.2, 3, 7 s
    assert sum(1 for k, _ in expected[5] if k != "wall") == 5  # stream time 45 s: 5 totals
    assert expected[1] and expected[3] and not expected[4]

    times = iter([now for _, now in batches])
    calls = []

    def clock():
        calls.append(1)
        return next(times)

    output = MemoryOutput()
    app = StreamsApp(topology, "procapi", state_dir=str(tmp_path), spark=spark, output=output,
                     clock=clock)
    app.prepare({"in": 1})
    offset = 0
    frames = []
    for b, (records, _) in enumerate(batches):
        frames.append(frame(spark, records, offset))
        offset += len(records)
        app.process_batch(frames[b], b)
        if b in (2, 3):  # a crash after the batch: Spark replays it, with the recorded time
            app.process_batch(frames[b], b)
    assert len(calls) == len(batches)  # replays read the batch's time, they do not take one
    got = [[(JSON.deserialize("out", r["key"]), JSON.deserialize("out", r["value"]))
            for r in output.batches.get(b, []) if r["topic"] == "out"]
           for b in range(len(batches))]
    assert got == expected
    for store in ("totals", "emitted"):
        assert app.store(store).to_dict() == driver.get_key_value_store(store).to_dict(), store


def test_wall_clock_punctuation_runs_in_batches_without_records_on_the_broker(spark, bootstrap,
                                                                             tmp_path):
    src, out = new_topics(bootstrap, 1, "in", "out")
    topology = build(src, out)
    records = [(f"k{i % 3}", i, 1_000_000 + 1000 * i) for i in range(25)]  # 0 = "now" in Kafka
    produce(bootstrap, src, [(json.dumps(k).encode(), json.dumps(v).encode())
                             for k, v, _ in records], timestamps=[ts for _, _, ts in records])
    driver = Driver(topology, {"application.id": "procapi-broker"})
    topic = driver.create_input_topic(src)
    for k, v, ts in records:
        topic.pipe_input(k, v, timestamp=ts)
    expected_stream = [kv for kv in driver.create_output_topic(out).read_key_values()
                       if kv[0] != "wall"]

    def emitted() -> list[tuple[str, int, int, int]]:
        return [(json.loads(m.key()), json.loads(m.value()), m.timestamp()[1],
                 int(dict(m.headers())["streamtable.batch"]))
                for m in read_all(bootstrap, out)]

    def walls_after_data(found: list[tuple[str, int, int, int]]) -> int:
        last_data = max(batch for k, _, _, batch in found if k != "wall")
        return sum(1 for k, _, _, batch in found if k == "wall" and batch > last_data)

    app = StreamsApp(topology, config={"application.id": f"procapi-{src}",
                                       "bootstrap.servers": bootstrap,
                                       "commit.interval.ms": 500},
                     state_dir=tmp_path, spark=spark, development_broker=True)
    app.start()
    try:
        deadline = time.monotonic() + 120
        while app.store("totals").to_dict() != driver.get_key_value_store("totals").to_dict():
            assert time.monotonic() < deadline, "the records were not processed"
            time.sleep(0.5)
        # no record arrives: the query must still run batches, and punctuate in them (the
        # wall-clock interval is 1 s; how many batches that takes depends on the machine)
        while walls_after_data(found := emitted()) < 4:
            assert time.monotonic() < deadline + 60, ("no punctuation in batches without "
                                                      f"records: {found}")
            time.sleep(1)
    finally:
        app.stop()
    emitted_records = emitted()
    assert [(k, v) for k, v, _, _ in emitted_records if k != "wall"] == expected_stream
    walls = [(ts, batch) for k, _, ts, batch in emitted_records if k == "wall"]
    assert len(walls) >= 4, walls
    assert [ts for ts, _ in walls] == sorted({ts for ts, _ in walls}), walls
    # punctuations of batches after the last one that brought records
    assert walls_after_data(emitted_records) >= 4, walls
    assert app.store("totals").to_dict() == driver.get_key_value_store("totals").to_dict()
