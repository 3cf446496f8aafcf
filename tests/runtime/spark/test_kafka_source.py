"""The streamtable-kafka Spark source against a real broker and a real local Spark."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtable.kafka.broker import development_source_options
from streamtable.kafka.ranges import CLOCK
from streamtable.runtime.spark.kafka_source import (
    KAFKA_SCHEMA,
    KafkaSourceError,
    KafkaStreamReader,
    split_budget,
)

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- pure planning


def test_split_budget_examples() -> None:
    assert split_budget({"a": 1, "b": 10, "c": 10}, 9) == {"a": 1, "b": 4, "c": 4}
    assert split_budget({"a": 5, "b": 5}, 3) == {"a": 2, "b": 1}
    assert split_budget({"a": 0, "b": 7}, 100) == {"a": 0, "b": 7}
    assert split_budget({"a": 3, "b": 3, "c": 3, "d": 3}, 2) == {"a": 1, "b": 1, "c": 0, "d": 0}


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.integers(0, 20), st.integers(0, 1000), min_size=1, max_size=12),
    st.integers(0, 5000),
)
def test_split_budget_properties(available: dict[int, int], budget: int) -> None:
    share = split_budget(available, budget)
    assert set(share) == set(available)
    assert sum(share.values()) == min(budget, sum(available.values()))
    assert all(0 <= share[k] <= available[k] for k in available)
    # fair: a partition that did not get all it has got at least as much as any other - 1
    unsatisfied = [share[k] for k in available if share[k] < available[k]]
    if unsatisfied:
        assert max(share.values()) - min(unsatisfied) <= 1


def test_latest_offset_respects_read_limit_and_keeps_offsets_canonical() -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    reader = KafkaStreamReader({"bootstrap.servers": "unused:1", "topics": "t",
                                "batch.split": "count"})
    reader._target = {"t": {"0": 10, "1": 3, "10": 0}}  # as if prepared for AvailableNow
    start = {"t": {"1": 0, "0": 0, "10": 0}}
    assert reader.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 10, "1": 3, "10": 0}}
    end = reader.latestOffset(start, ReadMaxRows(5))
    assert end == {"t": {"0": 3, "1": 2, "10": 0}}
    assert list(end["t"]) == ["0", "1", "10"]
    assert reader.latestOffset(end, ReadMaxRows(5)) == {"t": {"0": 7, "1": 3, "10": 0}}
    done = {"t": {"0": 10, "1": 3, "10": 0}}
    assert reader.latestOffset(done, ReadMaxRows(5)) == done  # no more data: end == start
    parts = reader.partitions({"t": {"0": 2, "1": 3}}, {"t": {"0": 7, "1": 3, "2": 4}})
    assert [(p.topic, p.partition, p.start, p.end) for p in parts] == [
        ("t", 0, 2, 7),
        ("t", 2, 0, 4),
    ]


def _timestamps_lookup(timestamps: dict[tuple[str, int], list[int]], asked: list[int]) -> Any:
    """A stand-in for Kafka's ListOffsets by timestamp over ``timestamps`` (per partition, in
    offset order): the earliest offset at or after ``t``, and its timestamp."""

    def lookup(t: int) -> dict[tuple[str, int], tuple[int | None, int | None]]:
        asked.append(t)
        return {key: next(((o, ts) for o, ts in enumerate(series) if ts >= t), (None, None))
                for key, series in timestamps.items()}

    return lookup


def test_latest_offset_cuts_a_batch_at_one_timestamp_across_topics() -> None:
    from pyspark.sql.streaming.datasource import ReadMaxRows

    timestamps = {("bids", 0): [100 + 2 * i for i in range(100)],
                  ("bids", 1): [101 + 2 * i for i in range(100)],
                  ("persons", 0): [100 + 50 * i for i in range(10)],
                  ("side", 0): [5_000] * 4}
    asked: list[int] = []
    reader = KafkaStreamReader({"bootstrap.servers": "unused:1",
                                "topics": "bids,persons,side", "topics.read.first": "side",
                                "clock.tick.ms": "1000"})
    reader._cutter.lookups = lambda starts, ends, budget: _timestamps_lookup(
        {k: v for k, v in timestamps.items() if k in starts}, asked)
    reader._target = {"bids": {"0": 100, "1": 100}, "persons": {"0": 10}, "side": {"0": 4}}
    # the source's clock (clock.tick.ms) is not a topic: no records, never cut
    start = {"bids": {"0": 0, "1": 0}, "persons": {"0": 0}, "side": {"0": 0}, CLOCK: {"0": 7}}
    end = reader.latestOffset(start, ReadMaxRows(45))
    assert end.pop(CLOCK) == {"0": 7}
    # the side topic first (a global table's), then the 41 records before timestamp 141: the
    # bids up to 140 on both partitions, the person at 100
    assert end == {"bids": {"0": 20, "1": 20}, "persons": {"0": 1}, "side": {"0": 4}}
    assert reader._cutter.last_cut == 140
    asked.clear()
    end = reader.latestOffset(end, ReadMaxRows(40))
    # 40 records before 180: bids 140-178 and 141-177, the person at 150
    assert end == {"bids": {"0": 40, "1": 39}, "persons": {"0": 2}, "side": {"0": 4}}
    assert reader._cutter.last_cut == 179
    assert asked[0] == 140  # the search starts at the last cut
    by_count = KafkaStreamReader({"bootstrap.servers": "unused:1", "topics": "bids,persons",
                                  "batch.split": "count"})
    by_count._target = {"bids": {"0": 100, "1": 100}, "persons": {"0": 10}}
    assert by_count.latestOffset({}, ReadMaxRows(30)) == {
        "bids": {"0": 10, "1": 10}, "persons": {"0": 10}}


def test_the_next_cut_s_reads_ahead_scale_with_the_ramp_of_the_batches() -> None:
    """While a batch runs, the planner reads ahead the timestamps the next cut looks at: about
    what this batch took of each partition, four times that while batches ramp up fourfold (a
    next cut that found only a quarter of them read the rest while its batch waited)."""
    from pyspark.sql.streaming.datasource import ReadMaxRows

    timestamps = {("bids", 0): list(range(0, 200_000, 2)), ("bids", 1): list(range(1, 200_000, 2))}
    reader = KafkaStreamReader({"bootstrap.servers": "unused:1", "topics": "bids",
                                "first.batch.records": "1000"})
    reader._cutter.lookups = lambda starts, ends, budget: _timestamps_lookup(timestamps, [])
    reader._target = {"bids": {"0": 100_000, "1": 100_000}}
    ahead: list[dict[tuple[str, int], int]] = []
    reader._read_timestamps = type("Reads", (), {"prefetch": lambda self, starts, ends, records:
                                                 ahead.append(dict(records))})()
    end = reader.latestOffset({"bids": {"0": 0, "1": 0}}, ReadMaxRows(100_000))
    assert end == {"bids": {"0": 500, "1": 500}}
    end = reader.latestOffset(end, ReadMaxRows(100_000))
    assert end == {"bids": {"0": 2_500, "1": 2_500}}
    # 500 a partition, then 2,000: read ahead for batches of 4,000 (all a partition may give
    # it) and of 16,000 (8,000 a partition, a quarter more)
    assert ahead == [{("bids", 0): 4_001, ("bids", 1): 4_001},
                     {("bids", 0): 8_000 + 2_000 + 4096, ("bids", 1): 8_000 + 2_000 + 4096}]


def test_a_batch_split_other_than_timestamp_or_count_is_refused() -> None:
    with pytest.raises(KafkaSourceError, match="batch.split"):
        KafkaStreamReader({"bootstrap.servers": "unused:1", "topics": "t",
                           "batch.split": "time"})


# ----------------------------------------------------------------------------- Spark helpers


def _run_available_now(
    spark: Any,
    bootstrap: str,
    topics: str,
    checkpoint: Path,
    options: dict[str, str] | None = None,
    on_batch: Callable[[int, list[Any]], None] | None = None,
) -> list[tuple[int, list[Any]]]:
    """Run a query with Trigger.AvailableNow; return (batch_id, rows) per non-empty batch."""
    reader = (
        spark.readStream.format("streamtable-kafka")
        .option("bootstrap.servers", bootstrap)
        .option("topics", topics)
    )
    for k, v in (options or {}).items():
        reader = reader.option(k, v)
    batches: list[tuple[int, list[Any]]] = []

    def collect(df: Any, batch_id: int) -> None:
        rows = df.collect()
        if rows:
            batches.append((batch_id, rows))
        if on_batch is not None:
            on_batch(batch_id, rows)

    query = (
        reader.load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "Trigger.AvailableNow query did not stop by itself"
    assert query.exception() is None, query.exception()
    return batches


def _as_tuples(rows: list[Any]) -> list[tuple]:
    return sorted(
        (
            r.topic,
            r.partition,
            r.offset,
            r.timestamp,
            r.key,
            r.value,
            tuple((h.key, h.value) for h in r.headers),
        )
        for r in rows
    )


# ----------------------------------------------------------------------------- Spark tests


def test_reads_exactly_what_was_produced(spark, bootstrap, new_topic, produce, tmp_path) -> None:
    topic = new_topic(2)
    records = [
        (0, b"k0", b"v0", 1_700_000_000_000, [("h1", b"a"), ("h2", None)]),
        (1, b"k1", b"v1", 1_700_000_000_001, None),
        (0, b"k2", None, 1_700_000_000_002, [("trace", b"\x00\xff")]),  # tombstone
        (1, None, b"no-key", 1_700_000_000_003, []),
        (0, b"", b"", 1_700_000_000_004, [("h1", b"a"), ("h1", b"b")]),  # repeated header key
        (1, b"k5", b"x" * 1000, 1_700_000_000_005, None),
    ]
    produce(topic, records)
    batches = _run_available_now(spark, bootstrap, topic, tmp_path / "ck")
    rows = [r for _, rows in batches for r in rows]
    expected = []
    next_offset = {0: 0, 1: 0}
    for part, key, value, ts, headers in records:
        expected.append((topic, part, next_offset[part], ts, key, value, tuple(headers or ())))
        next_offset[part] += 1
    assert _as_tuples(rows) == sorted(expected)
    assert len(batches) == 1
    assert spark.createDataFrame([], KAFKA_SCHEMA).schema == KAFKA_SCHEMA


def test_resume_from_checkpoint_reads_only_new_records(
    spark, bootstrap, new_topic, produce, tmp_path
) -> None:
    topic = new_topic(2)
    produce(topic, [(i % 2, b"a%d" % i, b"first-%d" % i, 1000 + i, None) for i in range(6)])
    checkpoint = tmp_path / "ck"
    first = _run_available_now(spark, bootstrap, topic, checkpoint)
    assert sorted(r.value for _, rows in first for r in rows) == sorted(
        b"first-%d" % i for i in range(6)
    )
    produce(topic, [(i % 2, b"b%d" % i, b"second-%d" % i, 2000 + i, None) for i in range(4)])
    second = _run_available_now(spark, bootstrap, topic, checkpoint)
    rows = [r for _, rows in second for r in rows]
    assert sorted((r.partition, r.offset, r.value) for r in rows) == [
        (0, 3, b"second-0"),
        (0, 4, b"second-2"),
        (1, 3, b"second-1"),
        (1, 4, b"second-3"),
    ]
    assert min(b for b, _ in second) > max(b for b, _ in first)
    # Nothing new: a third run reads nothing.
    assert _run_available_now(spark, bootstrap, topic, checkpoint) == []


def test_available_now_stops_at_target_with_max_records_per_batch(
    spark, bootstrap, new_topic, produce, tmp_path
) -> None:
    topic = new_topic(2)
    produce(topic, [(i % 2, None, b"%03d" % i, 1000, None) for i in range(25)])
    late = [(0, None, b"late-%d" % i, 1000, None) for i in range(5)]
    produced_late = []

    def during(batch_id: int, rows: list[Any]) -> None:
        if not produced_late:  # arrives after the AvailableNow target was fixed
            produce(topic, late)
            produced_late.append(True)

    checkpoint = tmp_path / "ck"
    # the development broker's ListOffsets by timestamp is wrong: its profile reads the
    # records' timestamps to cut the batches (all at one timestamp here)
    batches = _run_available_now(
        spark, bootstrap, topic, checkpoint,
        {"max.records.per.batch": "10", **development_source_options()}, on_batch=during
    )
    assert [len(rows) for _, rows in batches] == [10, 10, 5]
    values = sorted(r.value for _, rows in batches for r in rows)
    assert values == sorted(b"%03d" % i for i in range(25))
    # records all at one timestamp: each batch takes from both partitions evenly
    for _, rows in batches[:2]:
        assert sorted(r.partition for r in rows) == [0] * 5 + [1] * 5
    # the late records are there for the next run
    again = _run_available_now(spark, bootstrap, topic, checkpoint)
    assert sorted(r.value for _, rows in again for r in rows) == sorted(v for _, _, v, _, _ in late)


def test_batches_ramp_up_from_the_first_batch_size_to_the_cap_when_asked(
    spark, bootstrap, new_topic, produce, tmp_path
) -> None:
    topic = new_topic(2)
    produce(topic, [(i % 2, None, b"%03d" % i, 1000, None) for i in range(100)])
    opts = {"max.records.per.batch": "64", "first.batch.records": "4"}
    batches = _run_available_now(spark, bootstrap, topic, tmp_path / "ck", opts)
    assert [len(rows) for _, rows in batches] == [4, 16, 64, 16]
    values = sorted(r.value for _, rows in batches for r in rows)
    assert values == sorted(b"%03d" % i for i in range(100))
    # by default no ramp: every batch may take up to the cap
    topic = new_topic(2)
    produce(topic, [(i % 2, None, b"%03d" % i, 1000, None) for i in range(100)])
    batches = _run_available_now(spark, bootstrap, topic, tmp_path / "ck2",
                                 {"max.records.per.batch": "64"})
    assert [len(rows) for _, rows in batches] == [64, 36]


def test_starting_offsets_latest_skips_existing_records(
    spark, bootstrap, new_topic, produce, tmp_path
) -> None:
    topic = new_topic(2)
    produce(topic, [(i % 2, None, b"old-%d" % i, 1000, None) for i in range(4)])
    checkpoint = tmp_path / "ck"
    opts = {"starting.offsets": "latest"}
    assert _run_available_now(spark, bootstrap, topic, checkpoint, opts) == []
    produce(topic, [(1, None, b"new", 1000, None)])
    rows = [
        r for _, rows in _run_available_now(spark, bootstrap, topic, checkpoint, opts) for r in rows
    ]
    assert [(r.partition, r.offset, r.value) for r in rows] == [(1, 2, b"new")]


def test_multiple_topics_and_group_offsets_committed(
    spark, bootstrap, new_topic, produce, tmp_path
) -> None:
    t1, t2 = new_topic(2), new_topic(1)
    produce(t1, [(i % 2, None, b"t1-%d" % i, 1000, None) for i in range(5)])
    produce(t2, [(0, None, b"t2-%d" % i, 1000, None) for i in range(2)])
    group = f"lag-{t1}"
    rows = [
        r
        for _, rows in _run_available_now(
            spark, bootstrap, f"{t1}, {t2}", tmp_path / "ck", {"group.id": group}
        )
        for r in rows
    ]
    assert sorted((r.topic, r.partition, r.offset) for r in rows) == sorted(
        [(t1, 0, o) for o in range(3)]
        + [(t1, 1, o) for o in range(2)]
        + [(t2, 0, o) for o in range(2)]
    )
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        deadline = time.monotonic() + 20
        while True:  # Spark commits the source after the batch; allow a moment
            committed = consumer.committed(
                [TopicPartition(t1, 0), TopicPartition(t1, 1), TopicPartition(t2, 0)], timeout=10
            )
            got = [(tp.topic, tp.partition, tp.offset) for tp in committed]
            if got == [(t1, 0, 3), (t1, 1, 2), (t2, 0, 2)] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        consumer.close()
    assert got == [(t1, 0, 3), (t1, 1, 2), (t2, 0, 2)]


_END_AFTER_LAST_PLAN = """
import os, sys
from pyspark.sql.streaming.datasource import ReadAllAvailable
from streamtable.runtime.spark.kafka_source import KafkaStreamReader
reader = KafkaStreamReader({"bootstrap.servers": sys.argv[1], "topics": sys.argv[2],
                            "group.id": sys.argv[3]})
reader.prepareForTriggerAvailableNow()
start = reader.initialOffset()
end = reader.latestOffset(start, ReadAllAvailable())
reader.latestOffset(end, ReadAllAvailable())  # nothing left: the query ends here
os._exit(0)  # as Spark may end the source's process, without stop()
"""


def test_last_group_commit_of_available_now_survives_the_process_ending(
    bootstrap, new_topic, produce
) -> None:
    import subprocess
    import sys

    topic = new_topic(2)
    produce(topic, [(i % 2, None, b"v%d" % i, 1000, None) for i in range(5)])
    group = f"end-{topic}"
    subprocess.run(
        [sys.executable, "-c", _END_AFTER_LAST_PLAN, bootstrap, topic, group],
        check=True, timeout=60,
    )
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        committed = consumer.committed(
            [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10
        )
    finally:
        consumer.close()
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, 3), (1, 2)]


def test_development_profile_is_exact_with_batching_producer(
    spark, bootstrap, new_topic, tmp_path
) -> None:
    topic = new_topic(2)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True}
    )
    for i in range(3000):
        producer.produce(topic, value=b"%05d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    batches = _run_available_now(
        spark, bootstrap, topic, tmp_path / "ck", development_source_options()
    )
    values = sorted(r.value for _, rows in batches for r in rows)
    assert values == [b"%05d" % i for i in range(3000)]


def test_missing_topic_fails_the_query_naming_it(spark, bootstrap, tmp_path) -> None:
    name = f"absent-{time.monotonic_ns()}"
    query = (
        spark.readStream.format("streamtable-kafka")
        .option("bootstrap.servers", bootstrap)
        .option("topics", name)
        .load()
        .writeStream.foreachBatch(lambda df, i: None)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception) as info:
        query.awaitTermination(60)
    assert name in str(info.value)


def _count_available_now(
    spark: Any, bootstrap: str, topic: str, checkpoint: Path
) -> tuple[int, float]:
    counts: list[int] = []
    t0 = time.monotonic()
    query = (
        spark.readStream.format("streamtable-kafka")
        .option("bootstrap.servers", bootstrap)
        .option("topics", topic)
        .options(**development_source_options())
        .load()
        .writeStream.foreachBatch(lambda df, i: counts.append(df.count()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(600)
    return sum(counts), time.monotonic() - t0


def _produce_fast(bootstrap: str, topic: str, n: int, size: int = 100) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = b"x" * size
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value=value, partition=i & 1)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


@pytest.mark.skipif(
    not os.environ.get("STREAMTABLE_KAFKA_BENCH"), reason="set STREAMTABLE_KAFKA_BENCH=1 to run"
)
def test_read_throughput_benchmark(spark, bootstrap, new_topic, tmp_path) -> None:
    """Reads 1M 100-byte records from 2 partitions into a count() through foreachBatch.

    Reports the rate of the whole query (planning, Python workers, Arrow, count) after a
    warm-up query has started Spark's Python workers.
    """
    n = int(os.environ.get("STREAMTABLE_KAFKA_BENCH_RECORDS", "1000000"))
    warm = new_topic(2)
    _produce_fast(bootstrap, warm, 1000)
    assert _count_available_now(spark, bootstrap, warm, tmp_path / "warm")[0] == 1000
    topic = new_topic(2)
    _produce_fast(bootstrap, topic, n)
    total, seconds = _count_available_now(spark, bootstrap, topic, tmp_path / "ck")
    assert total == n
    logger.warning("BENCH read+count %d records in %.1fs = %.0f rows/s", n, seconds, n / seconds)
    print(f"\nBENCH read {n} records in {seconds:.1f}s = {n / seconds:,.0f} rows/s")
