"""GlobalKTable and the KStream-GlobalKTable join reproduce Kafka Streams' own expectations
(KStreamGlobalKTableJoinTest, KStreamGlobalKTableLeftJoinTest): the same inputs, output records
and timestamps; caching on and off; record by record and in batch mode."""

from __future__ import annotations

import pytest

from streamtable import StreamsBuilder, TopologyTestDriver


def tostring(a, b):
    return f"{'null' if a is None else a}+{'null' if b is None else b}"


def key_mapper(key, value):
    """The stream value optionally names the table key after a comma."""
    tokens = value.split(",")
    return tokens[1] if len(tokens) > 1 else None


def build(left):
    b = StreamsBuilder()
    table = b.global_table("global-topic", materialized="global-store")
    stream = b.stream("stream-topic")
    (stream.left_join if left else stream.join)(table, key_mapper, tostring).to("out")
    return b.build()


class Harness:
    def __init__(self, left, how, cache):
        config = {"cache.max.bytes.buffering": 10_000_000 if cache else 0}
        self.batch = how == "batch"
        self.driver = TopologyTestDriver(build(left), config, batch_mode=self.batch)
        self.stream = self.driver.create_input_topic("stream-topic", start_timestamp=0,
                                                     auto_advance_ms=1)
        self.table = self.driver.create_input_topic("global-topic", start_timestamp=0)
        self.out = self.driver.create_output_topic("out")

    def stream_push(self, count, prefix, fk=True, null_key=False):
        for i in range(count):
            value = f"{prefix}{i}" + (f",FKey{i}" if fk else "")
            self.stream.pipe_input(None if null_key and i == 0 else i, value)
        return self._read()

    def table_push(self, count, prefix):
        for i in range(count):
            self.table.pipe_input(f"FKey{i}", None if prefix is None else f"{prefix}{i}")
        return self._read()

    def _read(self):
        if self.batch:
            self.driver.run_batch()
        return [(r.key, r.value, r.timestamp) for r in self.out.read_records()]


RUNS = [("record", True), ("record", False), ("batch", True), ("batch", False)]


@pytest.mark.parametrize(("how", "cache"), RUNS)
def test_inner_join_does_not_join_on_global_table_updates(how, cache):
    h = Harness(False, how, cache)
    assert h.stream_push(2, "X") == []
    assert h.table_push(2, "Y") == []
    assert h.stream_push(4, "X") == [(0, "X0,FKey0+Y0", 2), (1, "X1,FKey1+Y1", 3)]
    assert h.table_push(4, "YY") == []
    assert h.stream_push(4, "X") == [(0, "X0,FKey0+YY0", 6), (1, "X1,FKey1+YY1", 7),
                                     (2, "X2,FKey2+YY2", 8), (3, "X3,FKey3+YY3", 9)]
    assert h.table_push(4, "YYY") == []
    assert h.driver.get_key_value_store("global-store").get("FKey3") == "YYY3"


@pytest.mark.parametrize(("how", "cache"), RUNS)
def test_inner_join_clears_rows_on_null_values_and_skips_null_mapped_keys(how, cache):
    h = Harness(False, how, cache)
    assert h.table_push(4, "Y") == []
    assert h.stream_push(4, "X") == [(i, f"X{i},FKey{i}+Y{i}", i) for i in range(4)]
    assert h.table_push(2, None) == []
    assert h.stream_push(4, "XX") == [(2, "XX2,FKey2+Y2", 6), (3, "XX3,FKey3+Y3", 7)]
    assert h.stream_push(4, "XXX", fk=False) == []
    assert h.driver.dropped_records  # the null table keys the mapper gave, counted


@pytest.mark.parametrize(("how", "cache"), RUNS)
def test_inner_join_with_a_null_stream_key(how, cache):
    h = Harness(False, how, cache)
    h.table_push(2, "Y")
    assert h.stream_push(4, "X", null_key=True) == [(None, "X0,FKey0+Y0", 0),
                                                    (1, "X1,FKey1+Y1", 1)]


@pytest.mark.parametrize(("how", "cache"), RUNS)
def test_left_join_joins_missing_rows_with_none(how, cache):
    # KStreamGlobalKTableLeftJoinTest.shouldClearGlobalTableEntryOnNullValueUpdates
    h = Harness(True, how, cache)
    assert h.table_push(4, "Y") == []
    assert h.stream_push(4, "X") == [(i, f"X{i},FKey{i}+Y{i}", i) for i in range(4)]
    assert h.table_push(2, None) == []
    assert h.stream_push(4, "XX") == [(0, "XX0,FKey0+null", 4), (1, "XX1,FKey1+null", 5),
                                      (2, "XX2,FKey2+Y2", 6), (3, "XX3,FKey3+Y3", 7)]
    assert h.stream_push(2, "XXX", fk=False) == [(0, "XXX0+null", 8), (1, "XXX1+null", 9)]


def test_every_partition_of_the_global_topic_is_seen_and_applied_before_the_batch():
    driver = TopologyTestDriver(build(False), batch_mode=True)
    table = driver.create_input_topic("global-topic", partitions=3)
    stream = driver.create_input_topic("stream-topic", partitions=2)
    # the stream record comes first, at an earlier time: the batch's global updates still
    # apply before it (as on Spark)
    stream.pipe_input(0, "x,FKey2", timestamp=1, partition=1)
    for p in range(3):
        table.pipe_input(f"FKey{p}", f"Y{p}", timestamp=5, partition=p)
    driver.run_batch()
    out = driver.create_output_topic("out").read_records()
    assert [(r.key, r.value, r.timestamp) for r in out] == [(0, "x,FKey2+Y2", 1)]
    assert driver.get_key_value_store("global-store").to_dict() == {
        "FKey0": "Y0", "FKey1": "Y1", "FKey2": "Y2"}


def test_the_global_topic_is_not_a_partitioned_source():
    topology = build(False)
    assert topology.global_topics == ["global-topic"]
    assert topology.source_topics == ["stream-topic"]
    assert [st.source_topics for st in topology.subtopologies] == [["stream-topic"]]
    text = topology.describe()
    assert "   Sub-topology: 1 for global store (will not generate tasks)\n" in text
    assert "(stores: [global-store])" in text
    assert "changelog: global-store" not in text  # the topic is the table's changelog
