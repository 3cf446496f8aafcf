"""produce_rows against a real broker: placement, headers, and replay without duplicates."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from streamtable.kafka.admin import TopicNotFoundError, ensure_topics
from streamtable.kafka.broker import EmbeddedBroker
from streamtable.kafka.sink import (
    HEADER_APP,
    HEADER_BATCH,
    HEADER_SEQ,
    HEADER_WRITER,
    KafkaDeliveryError,
    KafkaSinkError,
    SinkRecord,
    default_partition,
    murmur2,
    produce_rows,
)
from streamtable.partitioner import positive_hashes

SRC = Path(__file__).resolve().parents[2] / "src"


class Crash(Exception):
    """Stands in for a task dying part-way through a batch."""


def _crashing(rows: list[Any], after: int) -> Iterator[Any]:
    for i, row in enumerate(rows):
        if i == after:
            raise Crash(f"crash after {after} rows")
        yield row


def _payloads(read: dict[int, list[Any]]) -> dict[int, list[tuple]]:
    return {p: [(m.key(), m.value()) for m in msgs] for p, msgs in read.items()}


def _own(msg: Any) -> dict[str, bytes]:
    return {k: v for k, v in (msg.headers() or []) if k.startswith("streamtable.")}


# ---------------------------------------------------------------------------- partitioning


def test_murmur2_matches_kafka_java_client() -> None:
    # vectors from Apache Kafka's UtilsTest
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107
    assert murmur2(b"") == 275646681


def test_default_partition_is_the_same_when_its_hash_is_remembered() -> None:
    keys = [b"key-%d" % i for i in range(50)] + [b"", "ü".encode()]
    expected = [(murmur2(k) & 0x7FFFFFFF) % n for k in keys for n in (1, 2, 3, 7)]
    first = [default_partition(k, n) for k in keys for n in (1, 2, 3, 7)]
    again = [default_partition(k, n) for k in keys for n in (1, 2, 3, 7)]
    as_bytearray = [default_partition(bytearray(k), n) for k in keys for n in (1, 2, 3, 7)]
    assert first == again == as_bytearray == expected


def test_default_partition_matches_librdkafka_murmur2_partitioner(bootstrap, new_topic) -> None:
    topic = new_topic(5)
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2"})
    delivered: dict[bytes, int] = {}
    rng = random.Random(7)  # every length up to 300 bytes: each tail, one and many words
    keys = ([b"key-%d" % i for i in range(40)] + [b"", b"\x00\xff", "ü".encode()]
            + [rng.randbytes(n) for n in range(1, 301)])
    for key in keys:
        producer.produce(
            topic,
            key=key,
            value=b"v",
            on_delivery=lambda err, msg: delivered.__setitem__(msg.key(), msg.partition()),
        )
    assert producer.flush(10) == 0
    assert delivered == {key: default_partition(key, 5) for key in keys}


def test_hashes_of_many_keys_at_once_are_murmur2s() -> None:
    rng = random.Random(11)  # many keys of a few lengths (hashed as columns), and stragglers
    keys = ([rng.randbytes(n) for n in (0, 1, 2, 3, 4, 5, 8, 13, 22) for _ in range(40)]
            + [rng.randbytes(n) for n in range(1, 301)] + [b"key-%d" % i for i in range(500)])
    rng.shuffle(keys)
    assert positive_hashes(keys) == [murmur2(k) & 0x7FFFFFFF for k in keys]


def test_a_chunk_of_rows_lands_where_the_default_partitioner_puts_each(
    bootstrap, new_topic, read_topic
) -> None:
    topic = new_topic(3)
    rows = [{"topic": topic, "key": b"user-%d@%d" % (i % 97, i), "value": b"%d" % i}
            for i in range(3000)]
    rows[5]["key"] = None  # round-robin by position among the null keys
    rows[6]["partition"] = 2  # explicit
    produce_rows(bootstrap, rows, 0, "app")
    placed = {m.value(): m.partition() for msgs in read_topic(topic).values() for m in msgs}
    assert len(placed) == 3000
    assert placed[b"5"] == 0 and placed[b"6"] == 2
    assert all(placed[r["value"]] == default_partition(r["key"], 3)
               for r in rows if r["key"] is not None and "partition" not in r)


# ---------------------------------------------------------------------------- producing


def test_produces_records_with_placement_headers_and_timestamps(
    bootstrap, new_topic, read_topic, tmp_path
) -> None:
    topic = new_topic(3)
    rows = [
        {
            "topic": topic,
            "key": b"alpha",
            "value": b"1",
            "timestamp": 1_700_000_000_000,
            "headers": [("trace", b"t1")],
        },
        SinkRecord(topic, None, b"null-key-0"),
        SinkRecord(topic, None, b"null-key-1"),
        SinkRecord(topic, b"pinned", None, 1_700_000_000_123, [("a", None)], 2),  # tombstone
        (topic, "text-key", "text-value"),
    ]
    result = produce_rows(bootstrap, rows, 7, "app-a", commit_dir=tmp_path)
    assert (result.produced, result.skipped, result.already_done, result.scanned) == (
        5,
        0,
        False,
        False,
    )
    got = read_topic(topic)
    by_value = {m.value(): m for msgs in got.values() for m in msgs}
    assert sum(len(v) for v in got.values()) == 5

    alpha = by_value[b"1"]
    assert alpha.partition() == default_partition(b"alpha", 3)
    assert alpha.timestamp()[1] == 1_700_000_000_000
    assert alpha.headers()[0] == ("trace", b"t1")
    assert _own(alpha) == {
        HEADER_APP: b"app-a",
        HEADER_WRITER: b"0",
        HEADER_BATCH: b"7",
        HEADER_SEQ: str([m.value() for m in got[alpha.partition()]].index(b"1")).encode(),
    }
    # null keys: round robin by position among null-key records
    assert by_value[b"null-key-0"].partition() == 0
    assert by_value[b"null-key-1"].partition() == 1
    tomb = [m for m in got[2] if m.key() == b"pinned"]
    assert len(tomb) == 1 and tomb[0].value() is None
    assert tomb[0].timestamp()[1] == 1_700_000_000_123
    assert tomb[0].headers()[0] == ("a", None)
    assert by_value[b"text-value"].key() == b"text-key"
    # per-partition seq numbers are 0..n-1 in offset order
    for msgs in got.values():
        assert [int(_own(m)[HEADER_SEQ]) for m in msgs] == list(range(len(msgs)))


def test_user_headers_are_kept_and_another_writers_tags_replaced_not_repeated(
        bootstrap, new_topic, read_topic) -> None:
    """A record read from another streamtable application's output carries that app's tags:
    written again, it keeps its own headers, in order, and carries this writer's tags once."""
    topic = new_topic(1)
    upstream = [("trace", b"t1"), (HEADER_APP, b"upstream"), (HEADER_WRITER, b"3"),
                (HEADER_BATCH, b"41"), (HEADER_SEQ, b"9"), ("tenant", b"x")]
    rows = [SinkRecord(topic, b"k", b"v%d" % i, headers=upstream) for i in range(3)]
    produce_rows(bootstrap, rows, 7, "app-b")
    # a replay of the batch finds this writer's records by its tags, not the upstream ones
    result = produce_rows(bootstrap, rows, 7, "app-b")
    assert (result.produced, result.skipped) == (0, 3)
    got = read_topic(topic)[0]
    assert [m.value() for m in got] == [b"v0", b"v1", b"v2"]
    for seq, m in enumerate(got):
        assert m.headers() == [("trace", b"t1"), ("tenant", b"x"), (HEADER_APP, b"app-b"),
                               (HEADER_WRITER, b"0"), (HEADER_BATCH, b"7"),
                               (HEADER_SEQ, str(seq).encode())]


@pytest.mark.parametrize("with_commit_dir", [True, False], ids=["markers", "tail-scan-only"])
def test_replay_after_partial_produce_has_no_duplicates(
    bootstrap, new_topic, read_topic, tmp_path, with_commit_dir
) -> None:
    topic = new_topic(2)
    commit_dir = tmp_path / "sink" if with_commit_dir else None
    # an earlier, complete batch of the same writer, and another app's records in between
    produce_rows(
        bootstrap,
        [SinkRecord(topic, None, b"b4-%d" % i) for i in range(4)],
        4,
        "app",
        commit_dir=commit_dir,
    )
    produce_rows(
        bootstrap, [SinkRecord(topic, None, b"other-%d" % i) for i in range(2)], 5, "other"
    )
    rows = [SinkRecord(topic, b"k%d" % (i % 7), b"b5-%d" % i, 1000 + i) for i in range(50)]

    with pytest.raises(Crash):
        produce_rows(bootstrap, _crashing(rows, 23), 5, "app", commit_dir=commit_dir)
    partial = read_topic(topic)
    assert sum(1 for msgs in partial.values() for m in msgs if m.value().startswith(b"b5-")) == 23

    result = produce_rows(bootstrap, rows, 5, "app", commit_dir=commit_dir)
    assert result.scanned
    assert (result.produced, result.skipped) == (27, 23)

    final = read_topic(topic)
    expected: dict[int, list[bytes]] = {0: [], 1: []}
    for row in rows:
        expected[default_partition(row.key, 2)].append(row.value)
    for part in (0, 1):
        b5 = [m for m in final[part] if m.value().startswith(b"b5-")]
        assert [m.value() for m in b5] == expected[part], "each record once, in order"
        assert [int(_own(m)[HEADER_SEQ]) for m in b5] == list(range(len(b5)))
        assert [m.timestamp()[1] for m in b5] == [1000 + int(v[3:]) for v in expected[part]]

    # and replaying once more (e.g. a crash after the flush) adds nothing
    again = produce_rows(bootstrap, rows, 5, "app", commit_dir=commit_dir)
    assert again.produced == 0
    assert again.already_done is with_commit_dir
    assert _payloads(read_topic(topic)) == _payloads(final)


def test_replay_after_kill_minus_nine_mid_batch(bootstrap, new_topic, read_topic, tmp_path) -> None:
    """A producer process killed with SIGKILL part-way; the replay completes the batch."""
    topic = new_topic(2)
    commit_dir = tmp_path / "sink"
    n = 20000
    script = textwrap.dedent(
        f"""
        import sys, time
        from streamtable.kafka.sink import SinkRecord, produce_rows
        def rows():
            for i in range({n}):
                if i == {n // 3}:
                    print("half", flush=True)
                    time.sleep(60)  # killed here, with the first third handed to the producer
                yield SinkRecord({topic!r}, b"%d" % i, b"v%d" % i)
        produce_rows({bootstrap!r}, rows(), 3, "killed-app", commit_dir={str(commit_dir)!r})
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"half"
        time.sleep(1.0)  # let the producer's background thread deliver some
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    before = sum(len(v) for v in read_topic(topic).values())
    assert 0 < before <= n // 3

    rows = [SinkRecord(topic, b"%d" % i, b"v%d" % i) for i in range(n)]
    result = produce_rows(bootstrap, rows, 3, "killed-app", commit_dir=commit_dir)
    assert result.scanned and result.skipped == before and result.produced == n - before
    final = read_topic(topic)
    values = sorted(m.value() for msgs in final.values() for m in msgs)
    assert values == sorted(b"v%d" % i for i in range(n))


def test_done_marker_skips_the_batch_without_reading_kafka(
    bootstrap, new_topic, read_topic, tmp_path
) -> None:
    topic = new_topic(1)
    rows = [SinkRecord(topic, None, b"x%d" % i) for i in range(3)]
    first = produce_rows(bootstrap, rows, 0, "app", commit_dir=tmp_path)
    assert first.produced == 3
    markers = sorted(p.name for p in (tmp_path / "app" / "0").iterdir())
    assert markers == [f"{0:020d}.done"]
    # The broker is not even asked: a bogus bootstrap address works on the fast path.
    skipped = produce_rows("127.0.0.1:1", rows, 0, "app", commit_dir=tmp_path)
    assert skipped.already_done and skipped.produced == 0 and skipped.skipped == 0
    assert [m.value() for m in read_topic(topic)[0]] == [b"x0", b"x1", b"x2"]
    # a new batch id produces again, and old markers are pruned (every tenth batch)
    produce_rows(bootstrap, rows[:1], 9, "app", commit_dir=tmp_path, keep_markers=1)
    assert len(list((tmp_path / "app" / "0").iterdir())) == 2
    produce_rows(bootstrap, rows[:1], 10, "app", commit_dir=tmp_path, keep_markers=1)
    assert sorted(p.name for p in (tmp_path / "app" / "0").iterdir()) == [f"{10:020d}.done"]


def test_writers_and_apps_are_kept_apart(bootstrap, new_topic, read_topic) -> None:
    topic = new_topic(1)
    rows = [SinkRecord(topic, None, b"r%d" % i) for i in range(3)]
    produce_rows(bootstrap, rows, 0, "app", writer_id="w1")
    # same batch id, other writer / other app: nothing of theirs counts as already produced
    assert produce_rows(bootstrap, rows, 0, "app", writer_id="w2").produced == 3
    assert produce_rows(bootstrap, rows, 0, "app2", writer_id="w1").produced == 3
    # the same writer again: all skipped (found by reading the tail)
    again = produce_rows(bootstrap, rows, 0, "app", writer_id="w1")
    assert (again.produced, again.skipped) == (0, 3)
    assert len(read_topic(topic)[0]) == 9


def test_tail_scan_reads_back_past_other_writers(bootstrap, new_topic, read_topic) -> None:
    topic = new_topic(1)
    rows = [SinkRecord(topic, None, b"mine-%d" % i) for i in range(5)]
    with pytest.raises(Crash):
        produce_rows(bootstrap, _crashing(rows, 2), 9, "app")
    # another producer appends a lot after the crash, more than one scan chunk
    produce_rows(bootstrap, [SinkRecord(topic, None, b"noise")] * 120, 0, "noise")
    result = produce_rows(bootstrap, rows, 9, "app", tail_scan_chunk=16)
    assert (result.produced, result.skipped) == (3, 2)
    values = [m.value() for m in read_topic(topic)[0]]
    assert [v for v in values if v.startswith(b"mine")] == [b"mine-%d" % i for i in range(5)]


def test_bad_targets_are_named(bootstrap, new_topic) -> None:
    topic = new_topic(2)
    with pytest.raises(KafkaSinkError, match=rf"topic '{topic}' partition 5 does not exist"):
        produce_rows(bootstrap, [SinkRecord(topic, None, b"v", partition=5)], 0, "app")
    missing = f"missing-{time.monotonic_ns()}"
    with pytest.raises(TopicNotFoundError, match=missing):
        produce_rows(bootstrap, [SinkRecord(missing, None, b"v")], 0, "app")


def test_delivery_failure_raises_naming_topic_and_partition(tmp_path) -> None:
    with EmbeddedBroker() as private:
        ensure_topics(private.bootstrap_servers, {"doomed": 2})

        def rows() -> Iterator[SinkRecord]:
            yield SinkRecord("doomed", None, b"first", partition=1)
            private.stop()  # the broker goes away mid-batch
            yield SinkRecord("doomed", None, b"second", partition=1)

        with pytest.raises(KafkaDeliveryError) as info:
            produce_rows(
                private.bootstrap_servers,
                rows(),
                0,
                "app",
                commit_dir=tmp_path,
                producer_config={"message.timeout.ms": 1500, "linger.ms": 100},
                flush_timeout=20,
            )
    assert "topic 'doomed' partition 1" in str(info.value)
    assert info.value.failures and info.value.failures[0][:2] == ("doomed", 1)
    # no done marker: a replay must not skip this batch
    assert not list((tmp_path / "app" / "0").glob("*.done"))


def test_spark_pipeline_source_to_sink_exactly_once(
    spark, bootstrap, new_topic, produce, read_topic, tmp_path
) -> None:
    """streamtable-kafka source -> transform -> kafka_batch_writer, with a batch replayed."""
    from pyspark.sql import functions as F

    from streamtable.kafka.sink import kafka_batch_writer

    src, dst = new_topic(2), new_topic(2)
    produce(src, [(i % 2, b"k%d" % i, b"v%d" % i, 1000 + i, None) for i in range(8)])
    writer = kafka_batch_writer(bootstrap, "pipeline", commit_dir=str(tmp_path / "sink"))
    calls: list[int] = []

    def write(df: Any, batch_id: int) -> None:
        calls.append(batch_id)
        writer(df, batch_id)
        writer(df, batch_id)  # a replay of the same batch id produces nothing more

    query = (
        spark.readStream.format("streamtable-kafka")
        .option("bootstrap.servers", bootstrap)
        .option("topics", src)
        .load()
        .select(
            F.lit(dst).alias("topic"),
            F.col("key"),
            F.upper(F.col("value").cast("string")).cast("binary").alias("value"),
            F.col("timestamp"),
        )
        .writeStream.foreachBatch(write)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    out = read_topic(dst)
    got = sorted((m.key(), m.value(), m.timestamp()[1]) for msgs in out.values() for m in msgs)
    assert got == sorted((b"k%d" % i, b"V%d" % i, 1000 + i) for i in range(8))
    for msgs in out.values():
        for m in msgs:
            assert m.partition() == default_partition(m.key(), 2)
