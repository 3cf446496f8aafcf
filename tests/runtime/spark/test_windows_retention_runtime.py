"""Sliding windows with their store's retention, and suppress(until_time_limit) with a buffer that
emits early, on the Spark runtime through the real broker over several micro-batches: the output
topics and the window store equal the test driver's (record by record and in batch mode), and
app.store(...).fetch answers window queries from the serving store."""

from __future__ import annotations

import json
import random

import pytest
from tests.runtime.spark.kafka_util import new_topics, produce, read_all

from streamtable import (
    BufferConfig,
    Materialized,
    SlidingWindows,
    StreamsBuilder,
    Suppressed,
    TopologyTestDriver,
)
from streamtable.runtime.spark import StreamsApp
from streamtable.serde import JSON

pytestmark = pytest.mark.spark

DIFF, GRACE = 10_000, 3_000
USERS = [f"user{i}" for i in range(4)]


def _topology(src: str, out_sliding: str, out_final: str, out_totals: str):
    b = StreamsBuilder()
    grouped = b.stream(src).group_by_key()
    sliding = (grouped.windowed_by(SlidingWindows.of_time_difference_and_grace(DIFF, GRACE))
               .count(Materialized.as_("sliding")))
    sliding.to_stream(lambda w, v: f"{w.key}@{w.start}").to(out_sliding)
    (sliding.suppress(Suppressed.until_time_limit(
        4_000, BufferConfig.max_records_of(5).emit_early_when_full()))
     .to_stream(lambda w, v: f"{w.key}@{w.start}").to(out_final))
    (grouped.count("totals").suppress(Suppressed.until_time_limit(2_500))
     .to_stream().to(out_totals))
    return b.build()


def _driver_run(topology, src, records, times, batch_cuts=None):
    driver = TopologyTestDriver(topology, {"cache.max.bytes.buffering": 0},
                                batch_mode=batch_cuts is not None)
    topic = driver.create_input_topic(src)
    for i, ((k, v), ts) in enumerate(zip(records, times, strict=True)):
        if batch_cuts is not None and i in batch_cuts:
            driver.run_batch()
        topic.pipe_input(k, v, timestamp=ts)
    if batch_cuts is not None:
        driver.run_batch()
    return driver


def test_sliding_windows_retention_and_time_limit_on_spark_equal_the_driver(
        spark, bootstrap, tmp_path):
    src, out_sliding, out_final, out_totals = new_topics(
        bootstrap, 1, "in", "out-sliding", "out-final", "out-totals")
    outputs = (out_sliding, out_final, out_totals)
    topology = _topology(src, *outputs)
    rng = random.Random(21)
    times = []
    for i in range(1, 181):
        late = rng.random() < 0.08  # some beyond the grace period: dropped, counted
        # (a producer's timestamp 0 means "now": every time here is well past it)
        times.append(100_000 + i * 1000 - (rng.randrange(14_000, 30_000) if late
                                           else rng.randrange(0, 6_000)))
    records = [(rng.choice(USERS), "click") for _ in times]

    reference = _driver_run(topology, src, records, times)
    batched = _driver_run(topology, src, records, times, batch_cuts={7, 40, 41, 99, 150})
    expected = {}
    for out in outputs:
        expected[out] = [(r.key, r.value, r.timestamp)
                         for r in reference.create_output_topic(out).read_records()]
        assert [(r.key, r.value, r.timestamp)
                for r in batched.create_output_topic(out).read_records()] == expected[out]
    assert reference.dropped_records.get("late record for a closed window", 0) > 3

    produce(bootstrap, src, [(json.dumps(k).encode(), JSON.serialize(src, v))
                             for k, v in records], timestamps=times)
    app = StreamsApp(topology, "windows-retention", state_dir=str(tmp_path), spark=spark,
                     config={"bootstrap.servers": bootstrap, "max.records.per.batch": 50,
                             "cache.max.bytes.buffering": 0},
                     development_broker=True)
    app.run_until_caught_up(timeout=300)
    assert app.batches >= 3  # several micro-batches
    for out in outputs:
        got = [(json.loads(m.key()), None if m.value() is None else json.loads(m.value()),
                m.timestamp()[1]) for m in read_all(bootstrap, out)]
        assert got == expected[out], out
    assert len(expected[out_final]) > 20 and len(expected[out_totals]) > 20

    windows = reference.get_window_store("sliding")
    served = app.store("sliding")
    assert served.to_dict() == reference.get_key_value_store("sliding").to_dict()
    stream_time = max(times)
    # the retention (2 * DIFF + GRACE) deleted the old windows, on Spark as in the driver
    assert min(w.start for w, _ in windows.fetch_all()) > stream_time - 2 * DIFF - GRACE
    assert len(served) < len({k for k, _, _ in expected[out_sliding]})
    for user in USERS:
        assert served.fetch(user, 0, stream_time) == windows.fetch(user, 0, stream_time)
        assert served.fetch(user, stream_time - 12_000, stream_time - 5_000) == windows.fetch(
            user, stream_time - 12_000, stream_time - 5_000)
    assert served.fetch_all(stream_time - 8_000, stream_time) == windows.fetch_all(
        stream_time - 8_000, stream_time)
    assert served.fetch(USERS[0], 0, stream_time)


def test_with_caching_and_rocksdb_each_batch_equals_the_driver_in_batch_mode(spark, tmp_path):
    """With record caches (the last change per key per batch) the output depends on where
    batches end: batches cut where the driver's are give the same records, the windows found
    by key in RocksDB working copies included."""
    from tests.runtime.spark.harness import SOURCE_SCHEMA, MemoryOutput
    from tests.runtime.spark.test_fk_join_runtime import rows

    outputs = ("out-sliding", "out-final", "out-totals")
    topology = _topology("in", *outputs)
    rng = random.Random(8)
    times = [max(0, i * 700 - rng.randrange(0, 9_000)) for i in range(1, 161)]
    records = [(rng.choice(USERS), "click") for _ in times]
    cuts = [0, 45, 46, 110, 160]
    config = {"cache.max.bytes.buffering": 10**7, "default.dsl.store": "rocksDB"}
    driver = TopologyTestDriver(topology, config, batch_mode=True)
    topic = driver.create_input_topic("in")
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        for (k, v), ts in zip(records[lo:hi], times[lo:hi], strict=True):
            topic.pipe_input(k, v, timestamp=ts)
        driver.run_batch()
    expected = {o: driver.create_output_topic(o).read_key_values() for o in outputs}

    output = MemoryOutput()
    app = StreamsApp(topology, "windows-cached", state_dir=str(tmp_path), spark=spark,
                     output=output, config=config)
    app.prepare({"in": 1})
    for batch, (lo, hi) in enumerate(zip(cuts, cuts[1:], strict=False)):
        frame = [(r[0], r[1], r[2], ts, r[4], r[5], r[6]) for r, ts in zip(
            rows([("in", k, v) for k, v in records[lo:hi]], 1, lo), times[lo:hi], strict=True)]
        app.process_batch(spark.createDataFrame(frame, SOURCE_SCHEMA), batch)
    for o in outputs:
        assert [tuple(kv) for kv in output.topic(o)] == expected[o], o
    assert len(expected["out-final"]) > 20
    assert app.store("sliding").to_dict() == driver.get_key_value_store("sliding").to_dict()
