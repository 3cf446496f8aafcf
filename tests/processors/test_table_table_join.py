"""Primary-key KTable-KTable joins reproduce Kafka Streams' documented join semantics table
(inner, left and outer; records at timestamps 1..15, no caching)."""

from __future__ import annotations

import pytest

from streamtable import Materialized, StreamsBuilder, TopologyTestDriver
from streamtable.errors import TopologyError

# (timestamp, side, value) and the documented output per join (absent: no output; None: a
# tombstone) -- Kafka Streams' "KTable-KTable Join" semantics table
INPUT = [(1, "left", None), (2, "right", None), (3, "left", "A"), (4, "right", "a"),
         (5, "left", "B"), (6, "right", "b"), (7, "left", None), (8, "right", None),
         (9, "left", "C"), (10, "right", "c"), (11, "right", None), (12, "left", None),
         (13, "right", None), (14, "right", "d"), (15, "left", "D")]
ABSENT = object()
EXPECTED = {
    "inner": {4: ["A", "a"], 5: ["B", "a"], 6: ["B", "b"], 7: None, 10: ["C", "c"],
              11: None, 15: ["D", "d"]},
    "left": {3: ["A", None], 4: ["A", "a"], 5: ["B", "a"], 6: ["B", "b"], 7: None,
             9: ["C", None], 10: ["C", "c"], 11: ["C", None], 12: None, 15: ["D", "d"]},
    "outer": {3: ["A", None], 4: ["A", "a"], 5: ["B", "a"], 6: ["B", "b"], 7: [None, "b"],
              8: None, 9: ["C", None], 10: ["C", "c"], 11: ["C", None], 12: None,
              14: [None, "d"], 15: ["D", "d"]},
}


def _driver(mode: str, materialized: str | None, cache: bool):
    b = StreamsBuilder()
    left, right = b.table("left"), b.table("right")
    join = {"inner": left.join, "left": left.left_join, "outer": left.outer_join}[mode]
    join(right, lambda lv, rv: [lv, rv], materialized=materialized).to_stream().to("out")
    config = {"cache.max.bytes.buffering": 10_000_000 if cache else 0}
    driver = TopologyTestDriver(b.build(), config)
    return driver, {s: driver.create_input_topic(s) for s in ("left", "right")}, \
        driver.create_output_topic("out")


@pytest.mark.parametrize("materialized", [None, "joined"])
@pytest.mark.parametrize("mode", ["inner", "left", "outer"])
def test_join_follows_kafka_streams_documented_semantics(mode, materialized):
    driver, inputs, out = _driver(mode, materialized, cache=False)
    got = {}
    for ts, side, value in INPUT:
        inputs[side].pipe_input("k", value, timestamp=ts)
        records = out.read_records()
        assert len(records) <= 1, (ts, records)
        for r in records:
            assert r.timestamp == ts
            got[ts] = r.value
    assert got == EXPECTED[mode]
    if materialized:
        final = driver.get_key_value_store("joined").get("k")
        assert final == EXPECTED[mode][15]


def test_result_timestamp_is_the_larger_of_both_sides():
    driver, inputs, out = _driver("inner", "joined", cache=True)
    inputs["right"].pipe_input("k", "r", timestamp=50)
    inputs["left"].pipe_input("k", "l", timestamp=10)
    assert [(r.value, r.timestamp) for r in out.read_records()] == [(["l", "r"], 50)]
    assert driver.get_timestamped_key_value_store("joined").get("k") == (["l", "r"], 50)


def test_with_caching_an_update_is_one_change():
    driver, inputs, out = _driver("left", "joined", cache=True)
    inputs["left"].pipe_input("k", "A", timestamp=1)
    inputs["right"].pipe_input("k", "a", timestamp=2)
    assert out.read_values() == [["A", None], ["A", "a"]]
    inputs["left"].pipe_input("k", None, timestamp=3)
    assert out.read_values() == [None]
    assert driver.get_key_value_store("joined").to_dict() == {}


def test_joining_an_unmaterialized_table_says_what_to_do():
    b = StreamsBuilder()
    derived = b.table("a").filter(lambda k, v: True)
    with pytest.raises(TopologyError, match="materialized"):
        b.table("b").join(derived, lambda x, y: (x, y))


@pytest.mark.parametrize("materialized", [None, "joined"])
@pytest.mark.parametrize("mode", ["inner", "left", "outer"])
def test_a_row_created_and_deleted_within_one_commit_leaves_no_stale_join(mode, materialized):
    """The right row joins a left row and is deleted within one micro-batch: the right table's
    cache must not drop the row unseen, or the join keeps a result made from it. (The left
    table forwards at once: with both cached, the join runs at the commit, after the
    deletion.)"""
    b = StreamsBuilder()
    left = b.table("left", Materialized.as_("left-rows").with_caching_disabled())
    right = b.table("right")
    join = {"inner": left.join, "left": left.left_join, "outer": left.outer_join}[mode]
    join(right, lambda lv, rv: [lv, rv], materialized=materialized).to_stream().to("out")
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 10_000_000},
                                batch_mode=True)
    inputs = {s: driver.create_input_topic(s) for s in ("left", "right")}
    out = driver.create_output_topic("out")
    inputs["right"].pipe_input("x", "r", timestamp=1)
    inputs["left"].pipe_input("x", "l", timestamp=2)  # joins "r"
    inputs["right"].pipe_input("x", None, timestamp=3)
    driver.run_batch()
    final = {} if mode == "inner" else {"x": ["l", None]}
    assert {k: v for k, v in out.read_key_values_to_map().items() if v is not None} == final


def test_rows_of_both_sides_created_and_deleted_within_one_commit_leave_no_join():
    """Both tables cached: the left row is created and deleted while the right row exists, then
    the right row goes too, all within one micro-batch. The left row's deletion must retract
    what its creation joined while the right row is still there to join it with."""
    b = StreamsBuilder()
    b.table("left").join(b.table("right"), lambda lv, rv: [lv, rv]).to_stream().to("out")
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 10_000_000},
                                batch_mode=True)
    left, right = driver.create_input_topic("left"), driver.create_input_topic("right")
    out = driver.create_output_topic("out")
    right.pipe_input("x", "r", timestamp=1)
    left.pipe_input("x", "l", timestamp=2)
    left.pipe_input("x", None, timestamp=3)
    right.pipe_input("x", None, timestamp=4)
    driver.run_batch()
    assert {k: v for k, v in out.read_key_values_to_map().items() if v is not None} == {}


@pytest.mark.parametrize("mode", ["inner", "left", "outer"])
@pytest.mark.parametrize("caching", [True, False])
def test_rows_of_both_sides_deleted_within_one_commit_retract_their_join(mode, caching):
    """A join result made in one micro-batch; both of its rows deleted in the next. Both
    tables cached, neither deletion may wait for the commit: by then the other side's row is
    gone too, the join has nothing to retract with, and its result would stay for ever."""
    b = StreamsBuilder()
    left, right = b.table("left"), b.table("right")
    join = {"inner": left.join, "left": left.left_join, "outer": left.outer_join}[mode]
    join(right, lambda lv, rv: [lv, rv]).to_stream().to("out")
    driver = TopologyTestDriver(
        b.build(), {"cache.max.bytes.buffering": 10_000_000 if caching else 0}, batch_mode=True)
    inputs = {s: driver.create_input_topic(s) for s in ("left", "right")}
    out = driver.create_output_topic("out")
    inputs["right"].pipe_input("x", "r", timestamp=1)
    inputs["left"].pipe_input("x", "l", timestamp=2)
    inputs["right"].pipe_input("y", "r", timestamp=2)
    inputs["left"].pipe_input("y", "l", timestamp=2)
    driver.run_batch()
    table = out.read_key_values_to_map()
    assert table == {"x": ["l", "r"], "y": ["l", "r"]}
    inputs["left"].pipe_input("x", None, timestamp=3)
    inputs["right"].pipe_input("x", None, timestamp=4)
    inputs["right"].pipe_input("y", None, timestamp=5)  # the other order
    inputs["left"].pipe_input("y", None, timestamp=6)
    driver.run_batch()
    table.update(out.read_key_values())  # tombstones too
    assert {k: v for k, v in table.items() if v is not None} == {}
