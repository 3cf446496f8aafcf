"""Versioned tables (KIP-889, KIP-914) on the test driver, record by record and in batch mode,
against Kafka Streams' own tests: ``KTableAggregateTest`` (``testAggOfVersionedStore``,
``testCountOfVersionedStore``), ``TableTableJoinIntegrationTest`` and
``StreamTableJoinIntegrationTest`` (their ``...WithVersionedStores`` cases, on
``AbstractJoinIntegrationTest``'s input), ``KTableKTableForeignKeyJoinIntegrationTest``
(``shouldIgnoreOutOfOrderRecordsIffVersioned``) and ``KTableFilterTest``
(``shouldNotSkipNullIfVersionedUpstream``)."""

from __future__ import annotations

from typing import Any

import pytest

from streamtable import Materialized, Stores, StreamsBuilder, TopologyTestDriver
from streamtable.errors import TopologyError
from streamtable.state.versioned import VersionedRecord
from streamtable.windowing import Suppressed

FIVE_MINUTES = 300_000


def versioned(name: str, retention: int = FIVE_MINUTES) -> Materialized:
    return Materialized.as_(Stores.persistent_versioned_key_value_store(name, retention))


class Run:
    """A driver that, in batch mode, runs a micro-batch after every record piped: the outputs
    of both modes are then the same, record for record."""

    def __init__(self, topology: Any, batch_mode: bool, cache: bool = False) -> None:
        config = {"cache.max.bytes.buffering": 10_000_000 if cache else 0}
        self.driver = TopologyTestDriver(topology, config, batch_mode=batch_mode)
        self.batch_mode = batch_mode
        self.topics: dict[str, Any] = {}
        self.outputs: dict[str, Any] = {}

    def pipe(self, topic: str, key: Any, value: Any, timestamp: int) -> None:
        if topic not in self.topics:
            self.topics[topic] = self.driver.create_input_topic(topic)
        self.topics[topic].pipe_input(key, value, timestamp=timestamp)
        if self.batch_mode:
            self.driver.run_batch()

    def out(self, topic: str) -> list[tuple[Any, Any, int]]:
        """What ``topic`` received since the last call."""
        if topic not in self.outputs:
            self.outputs[topic] = self.driver.create_output_topic(topic)
        return [(r.key, r.value, r.timestamp) for r in self.outputs[topic].read_records()]


MODES = pytest.mark.parametrize("batch_mode", [False, True], ids=["record", "batch"])


@MODES
def test_source_keeps_history_and_forwards_out_of_order_updates_marked(batch_mode):
    """Every update is stored and forwarded (no cache); one older than the key's latest is
    kept in the history, and a store query as of any time sees the version valid then."""
    b = StreamsBuilder()
    b.table("rates", versioned("rates", 10_000)).to_stream().to("changes")
    run = Run(b.build(), batch_mode, cache=True)
    run.pipe("rates", "EUR", 1.10, 1_000)
    run.pipe("rates", "EUR", 1.12, 5_000)
    run.pipe("rates", "EUR", 1.11, 3_000)  # out of order
    run.pipe("rates", "EUR", None, 4_000)  # an out-of-order tombstone
    assert run.out("changes") == [("EUR", 1.10, 1_000), ("EUR", 1.12, 5_000),
                                  ("EUR", 1.11, 3_000), ("EUR", None, 4_000)]
    store = run.driver.get_versioned_key_value_store("rates")
    assert store.get("EUR") == 1.12
    assert [store.get("EUR", as_of=t) for t in (999, 1_000, 3_500, 4_000, 4_999, 9_999)] == [
        None, 1.10, 1.11, None, None, 1.12]
    assert store.get_record("EUR", as_of=3_000) == VersionedRecord(1.11, 3_000, 4_000)
    assert store.versions("EUR") == [VersionedRecord(1.10, 1_000, 3_000),
                                     VersionedRecord(1.11, 3_000, 4_000),
                                     VersionedRecord(1.12, 5_000, None)]
    assert run.driver.get_key_value_store("rates").to_dict() == {"EUR": 1.12}


@MODES
def test_updates_older_than_the_history_retention_are_dropped_and_counted(batch_mode):
    b = StreamsBuilder()
    b.table("rates", versioned("rates", 1_000)).to_stream().to("changes")
    run = Run(b.build(), batch_mode)
    run.pipe("rates", "EUR", 1, 5_000)
    run.pipe("rates", "USD", 2, 4_000)  # within the retention
    run.pipe("rates", "EUR", 0, 3_999)  # older than 5_000 - 1_000: refused
    assert run.out("changes") == [("EUR", 1, 5_000), ("USD", 2, 4_000)]
    assert run.driver.dropped_records == {
        "put older than the versioned store's history retention": 1}
    store = run.driver.get_versioned_key_value_store("rates")
    assert store.get("EUR", as_of=3_999) is None
    assert store.get("EUR", as_of=4_500) is None  # older than the retention: latest only
    assert store.get("EUR", as_of=5_000) == 1


@MODES
def test_agg_of_versioned_store(batch_mode):
    """``KTableAggregateTest.testAggOfVersionedStore``: out-of-order records do not change the
    aggregate."""
    b = StreamsBuilder()

    def select(key: str, value: str) -> Any:
        if key == "null":
            return (None, value)
        if key == "NULL":
            return None
        return (value, value)

    (b.table("topic1", versioned("versioned"))
     .group_by(select)
     .aggregate(lambda: "0", lambda k, v, agg: f"{agg}+{v}", lambda k, v, agg: f"{agg}-{v}",
                materialized="topic1-Canonized")
     .to_stream().to("out"))
    run = Run(b.build(), batch_mode)
    for key, value, ts in [("A", "1", 10), ("A", None, 15), ("A", "1", 12), ("B", "2", 20),
                           ("null", "3", 25), ("B", "4", 23), ("NULL", "5", 24),
                           ("B", "7", 22)]:
        run.pipe("topic1", key, value, ts)
    assert run.out("out") == [("1", "0+1", 10), ("1", "0+1-1", 15), ("2", "0+2", 20),
                              ("2", "0+2-2", 23), ("4", "0+4", 23)]


@MODES
def test_count_of_versioned_store(batch_mode):
    """``KTableAggregateTest.testCountOfVersionedStore``."""
    b = StreamsBuilder()
    (b.table("count-test-input", versioned("versioned"))
     .group_by(lambda k, v: (v, v)).count().to_stream().to("out"))
    run = Run(b.build(), batch_mode)
    for key, value, ts in [("A", "green", 10), ("B", "green", 9), ("A", "blue", 12),
                           ("A", "blue", 11), ("C", "yellow", 15), ("D", "green", 11)]:
        run.pipe("count-test-input", key, value, ts)
    assert [(k, v) for k, v, _ in run.out("out")] == [
        ("green", 1), ("green", 2), ("green", 1), ("blue", 1), ("yellow", 1), ("green", 2)]


# AbstractJoinIntegrationTest's input: (topic, value, timestamp), one key
JOIN_INPUT = [("left", None, 1), ("right", None, 2), ("left", "A", 3), ("right", "a", 4),
              ("left", "B", 5), ("right", "b", 6), ("left", None, 7), ("right", None, 8),
              ("left", "C", 9), ("right", "c", 10), ("right", None, 11), ("left", None, 12),
              ("right", None, 13),
              ("right", "d", 7),  # out of order, with a tombstone as the latest
              ("left", "D", 6), ("left", None, 2), ("right", None, 3), ("right", "e", 14),
              ("left", "E", 15),
              ("left", None, 10),  # out of order, with a value as the latest
              ("right", None, 9), ("left", "F", 4), ("right", "f", 3)]

# the expected output after each input record (None: none; a value: "L-R" or a tombstone)
NONE = object()
TABLE_JOIN_EXPECTED = {
    "inner": {3: ("A-a", 4), 4: ("B-a", 5), 5: ("B-b", 6), 6: (None, 7), 9: ("C-c", 10),
              10: (None, 11), 18: ("E-e", 15)},
    "left": {2: ("A-null", 3), 3: ("A-a", 4), 4: ("B-a", 5), 5: ("B-b", 6), 6: (None, 7),
             8: ("C-null", 9), 9: ("C-c", 10), 10: ("C-null", 11), 11: (None, 12),
             18: ("E-e", 15)},
    "outer": {2: ("A-null", 3), 3: ("A-a", 4), 4: ("B-a", 5), 5: ("B-b", 6),
              6: ("null-b", 7), 7: (None, 8), 8: ("C-null", 9), 9: ("C-c", 10),
              10: ("C-null", 11), 11: (None, 12), 17: ("null-e", 14), 18: ("E-e", 15)},
}


def _joiner(left: Any, right: Any) -> str:
    return f"{'null' if left is None else left}-{'null' if right is None else right}"


@MODES
@pytest.mark.parametrize("cache", [False, True])
@pytest.mark.parametrize("mode", ["inner", "left", "outer"])
def test_table_table_join_with_versioned_stores(mode, cache, batch_mode):
    """``TableTableJoinIntegrationTest.test{Inner,Left,Outer}WithVersionedStores``: versioned
    stores have no cache, so the results are the same with caching on and off."""
    b = StreamsBuilder()
    left = b.table("left", versioned("left"))
    right = b.table("right", versioned("right"))
    join = {"inner": left.join, "left": left.left_join, "outer": left.outer_join}[mode]
    join(right, _joiner, materialized=Materialized.as_("joined").with_caching_disabled()
         ).to_stream().to("out")
    run = Run(b.build(), batch_mode, cache)
    for i, (topic, value, ts) in enumerate(JOIN_INPUT):
        run.pipe(topic, 1, value, ts)
        got = [(v, t) for _, v, t in run.out("out")]
        expected = TABLE_JOIN_EXPECTED[mode].get(i)
        assert got == ([] if expected is None else [expected]), (i, topic, value, ts)


@MODES
def test_out_of_order_updates_in_table_joins_are_counted_as_dropped(batch_mode):
    b = StreamsBuilder()
    b.table("left", versioned("left")).join(b.table("right"), _joiner).to_stream().to("out")
    run = Run(b.build(), batch_mode)
    run.pipe("right", 1, "a", 1)
    run.pipe("left", 1, "A", 5)
    run.pipe("left", 1, "Z", 3)
    assert [v for _, v, _ in run.out("out")] == ["A-a"]
    assert run.driver.dropped_records == {
        "out-of-order update of a versioned table in a table-table join": 1}


STREAM_JOIN_EXPECTED = {
    "inner": {4: ("B-a", 5), 14: ("D-b", 6), 18: ("E-e", 15), 21: ("F-a", 4)},
    "left": {2: ("A-null", 3), 4: ("B-a", 5), 8: ("C-null", 9), 14: ("D-b", 6),
             18: ("E-e", 15), 21: ("F-a", 4)},
}


@MODES
@pytest.mark.parametrize("cache", [False, True])
@pytest.mark.parametrize("mode", ["inner", "left"])
def test_stream_table_join_with_versioned_store(mode, cache, batch_mode):
    """``StreamTableJoinIntegrationTest.test{Inner,Left}WithVersionedStore``: each stream
    record joins the table as of its timestamp."""
    b = StreamsBuilder()
    table = b.table("right", versioned("table"))
    stream = b.stream("left")
    (stream.join if mode == "inner" else stream.left_join)(table, _joiner).to("out")
    run = Run(b.build(), batch_mode, cache)
    for i, (topic, value, ts) in enumerate(JOIN_INPUT):
        run.pipe(topic, 1, value, ts)
        got = [(v, t) for _, v, t in run.out("out")]
        expected = STREAM_JOIN_EXPECTED[mode].get(i)
        assert got == ([] if expected is None else [expected]), (i, topic, value, ts)


@MODES
def test_a_stream_record_older_than_the_history_retention(batch_mode):
    """As of a time older than the table's history retention only a latest version old enough
    answers: an inner join drops the record (counted), a left join joins ``None``."""
    b = StreamsBuilder()
    table = b.table("table", versioned("table", 100))
    b.stream("inner").join(table, _joiner).to("out-inner")
    b.stream("left").left_join(table, _joiner).to("out-left")
    run = Run(b.build(), batch_mode)
    run.pipe("table", "old", "o", 5)
    run.pipe("table", "k", "v1", 10)
    run.pipe("table", "k", "v2", 500)
    for topic in ("inner", "left"):
        run.pipe(topic, "k", "s", 50)  # v1 was valid then, but 50 < 500 - 100
        run.pipe(topic, "old", "s", 50)  # the latest version, old enough: still joins
        run.pipe(topic, "k", "t", 450)  # within the retention: v1
    assert run.out("out-inner") == [("old", "s-o", 50), ("k", "t-v1", 450)]
    assert run.out("out-left") == [("k", "s-null", 50), ("old", "s-o", 50), ("k", "t-v1", 450)]
    assert run.driver.dropped_records == {
        "stream record older than the versioned table's history retention": 1}


@pytest.fixture
def fk_topology():
    def build(left_join: bool, left_versioned: bool, right_versioned: bool) -> Any:
        b = StreamsBuilder()
        left = b.table("left", versioned("left") if left_versioned else None)
        right = b.table("right", versioned("right") if right_versioned else None)
        join = left.left_join if left_join else left.join
        join(right, lambda lv, rv: f"({lv},{rv})",
             foreign_key_extractor=lambda v: v.split("|")[1],
             materialized=Materialized.as_("store").with_caching_disabled()
             ).to_stream().to("out")
        return b.build()
    return build


@MODES
@pytest.mark.parametrize("right_versioned", [False, True])
@pytest.mark.parametrize("left_versioned", [False, True])
@pytest.mark.parametrize("left_join", [False, True])
def test_fk_join_ignores_out_of_order_records_iff_versioned(fk_topology, left_join,
                                                            left_versioned, right_versioned,
                                                            batch_mode):
    """``KTableKTableForeignKeyJoinIntegrationTest.shouldIgnoreOutOfOrderRecordsIffVersioned``."""
    run = Run(fk_topology(left_join, left_versioned, right_versioned), batch_mode)
    base = 1_000_000

    def step(topic: str, key: str, value: Any, dt: int) -> tuple[dict[Any, Any], dict[Any, Any]]:
        run.pipe(topic, key, value, base + dt)
        out = {k: v for k, v, _ in run.out("out")}
        return out, run.driver.get_key_value_store("store").to_dict()

    assert step("right", "rhs1", "rhsValue1", 4) == ({}, {})
    step("left", "lhs1", "lhsValue1|rhs1", 3)
    out, store = step("left", "lhs2", "lhsValue2|rhs1", 5)
    assert store == {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs1,rhsValue1)"}
    out, store = step("left", "lhs2", None, 6)
    assert out == {"lhs2": None} and store == {"lhs1": "(lhsValue1|rhs1,rhsValue1)"}
    # an out-of-order left record makes no new result iff the left table is versioned
    out1, _ = step("left", "lhs1", "lhsValue1_ooo|rhs1", 2)
    out2, store = step("left", "lhs2", "lhsValue2_ooo|rhs1", 2)
    if left_versioned:
        assert (out1, out2) == ({}, {})
        assert store == {"lhs1": "(lhsValue1|rhs1,rhsValue1)"}
    else:
        assert {**out1, **out2} == {"lhs1": "(lhsValue1_ooo|rhs1,rhsValue1)",
                                    "lhs2": "(lhsValue2_ooo|rhs1,rhsValue1)"}
    out, store = step("left", "lhs1", None, 2)  # an out-of-order tombstone likewise
    if left_versioned:
        assert out == {} and store == {"lhs1": "(lhsValue1|rhs1,rhsValue1)"}
    else:
        assert out == {"lhs1": None} and store == {"lhs2": "(lhsValue2_ooo|rhs1,rhsValue1)"}
    step("left", "lhs1", "lhsValue1_new|rhs1", 8)
    out, store = step("left", "lhs2", "lhsValue2_new|rhs1", 8)
    new = {"lhs1": "(lhsValue1_new|rhs1,rhsValue1)", "lhs2": "(lhsValue2_new|rhs1,rhsValue1)"}
    assert store == new
    # an out-of-order right record makes no new result iff the right table is versioned
    out, store = step("right", "rhs1", "rhsValue1_ooo", 1)
    if right_versioned:
        assert out == {} and store == new
    else:
        ooo = {"lhs1": "(lhsValue1_new|rhs1,rhsValue1_ooo)",
               "lhs2": "(lhsValue2_new|rhs1,rhsValue1_ooo)"}
        assert out == ooo and store == ooo
    out, store = step("right", "rhs1", None, 1)
    if right_versioned:
        assert out == {} and store == new
    elif left_join:
        gone = {"lhs1": "(lhsValue1_new|rhs1,None)", "lhs2": "(lhsValue2_new|rhs1,None)"}
        assert out == gone and store == gone
    else:
        assert out == {"lhs1": None, "lhs2": None} and store == {}


@MODES
@pytest.mark.parametrize("versioned_input", [False, True])
def test_filter_of_a_versioned_table_forwards_repeated_tombstones(versioned_input, batch_mode):
    """``KTableFilterTest.shouldNotSkipNullIfVersionedUpstream`` and
    ``shouldSkipNullToRepartitionWithoutMaterialization``: a filter drops a row that neither
    was nor is kept, unless the table is versioned (its history downstream stays complete)."""
    b = StreamsBuilder()
    source = b.table("topic1", versioned("versioned") if versioned_input else "store")
    filtered = source.filter(lambda k, v: v.lower() == "accept")
    filtered.to_stream().to("out")
    filtered.group_by(lambda k, v: (k, v)).reduce(lambda a, v: v, lambda a, v: a)
    run = Run(b.build(), batch_mode)
    for key, ts in (("A", 5), ("B", 10), ("C", 20)):
        run.pipe("topic1", key, "reject", ts)
    expected = [("A", None, 5), ("B", None, 10), ("C", None, 20)] if versioned_input else []
    assert run.out("out") == expected


@MODES
def test_filter_materialized_in_a_versioned_store(batch_mode):
    """A derived table kept in a versioned store of its own: its history is queryable and an
    out-of-order change is forwarded marked, so the aggregation below skips it."""
    b = StreamsBuilder()
    big = b.table("in", "plain").filter(lambda k, v: v > 10, versioned("big"))
    assert big.is_versioned
    big.group_by(lambda k, v: ("all", v)).reduce(lambda a, v: a + v, lambda a, v: a - v,
                                                 "sum").to_stream().to("out")
    run = Run(b.build(), batch_mode)
    run.pipe("in", "x", 20, 10)
    run.pipe("in", "x", 30, 5)  # out of order for the versioned store
    assert [v for _, v, _ in run.out("out")] == [20]
    store = run.driver.get_versioned_key_value_store("big")
    assert store.get("x") == 20 and store.get("x", as_of=7) == 30


def test_versioned_tables_refuse_what_kafka_streams_refuses():
    b = StreamsBuilder()
    rates = b.table("rates", versioned("rates"))
    with pytest.raises(TopologyError, match="suppress"):
        rates.suppress(Suppressed.until_time_limit(1_000))
    with pytest.raises(TopologyError, match="global table"):
        b.global_table("g", versioned("g"))
    with pytest.raises(TopologyError, match="versioned store"):
        rates.group_by(lambda k, v: (k, v)).count(versioned("counts"))
    with pytest.raises(TopologyError, match="versioned store"):
        rates.join(b.table("other"), _joiner, materialized=versioned("joined"))
    assert not rates.map_values(str, materialized="plain").is_versioned
    assert rates.filter(lambda k, v: True).is_versioned
    assert b.stream("s").to_table(versioned("from-stream")).is_versioned


@MODES
def test_to_table_materialized_in_a_versioned_store(batch_mode):
    b = StreamsBuilder()
    b.stream("s").to_table(versioned("t")).to_stream().to("out")
    run = Run(b.build(), batch_mode)
    run.pipe("s", "k", "b", 20)
    run.pipe("s", "k", "a", 10)
    assert run.out("out") == [("k", "b", 20), ("k", "a", 10)]
    assert run.driver.get_versioned_key_value_store("t").get("k", as_of=15) == "a"


def test_several_micro_batches_of_a_versioned_table():
    """Batch mode with several records per micro-batch, over two partitions: the store and the
    joins follow the records in each task's processing order."""
    b = StreamsBuilder()
    table = b.table("rates", versioned("rates"))
    b.stream("tx").join(table, lambda amount, rate: amount * rate).to("out")
    driver = TopologyTestDriver(b.build(), batch_mode=True)
    rates = driver.create_input_topic("rates", partitions=2)
    tx = driver.create_input_topic("tx", partitions=2)
    rates.pipe_input("EUR", 2, timestamp=100)
    rates.pipe_input("EUR", 3, timestamp=300)
    driver.run_batch()
    rates.pipe_input("EUR", 4, timestamp=200)  # out of order
    tx.pipe_input("EUR", 10, timestamp=250)
    tx.pipe_input("EUR", 10, timestamp=150)
    tx.pipe_input("EUR", 10, timestamp=350)
    driver.run_batch()
    assert driver.create_output_topic("out").read_values() == [40, 20, 30]
    store = driver.get_versioned_key_value_store("rates")
    assert [store.get("EUR", as_of=t) for t in (100, 200, 300)] == [2, 4, 3]
