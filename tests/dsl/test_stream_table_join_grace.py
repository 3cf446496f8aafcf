"""Stream-table joins with a grace period (KIP-923) on the test driver, record by record and in
batch mode, against Kafka Streams' ``KStreamKTableJoinTest`` (``shouldDelayJoinByGracePeriod``,
``shouldHandleLateJoinsWithGracePeriod``, ``shouldFailIfTableIsNotVersioned``,
``shouldFailIfGracePeriodIsLongerThanHistoryRetention``) and
``StreamTableJoinWithGraceIntegrationTest``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from tests.dsl.test_versioned_tables import JOIN_INPUT, MODES, Run, versioned

from streamtable import Joined, StreamsBuilder, TopologyTestDriver
from streamtable.errors import TopologyError


def _joiner(left: Any, right: Any) -> str:
    return f"{'null' if left is None else left}+{'null' if right is None else right}"


def _grace_join(grace: int) -> Any:
    b = StreamsBuilder()
    table = b.table("tableTopic2", versioned("V-grace"))
    b.stream("streamTopic").join(table, _joiner, Joined.as_("Grace").with_grace_period(grace)
                                 ).to("out")
    return b.build()


def _push_table(run: Run, prefix: str) -> None:
    for i in range(4):
        run.pipe("tableTopic2", i, f"{prefix}{i}", 0)


def _push_stream(run: Run, n: int, prefix: str) -> None:
    for i in range(n):
        run.pipe("streamTopic", i, f"{prefix}{i}", i)


@MODES
def test_delay_join_by_grace_period(batch_mode):
    run = Run(_grace_join(2), batch_mode)
    _push_table(run, "Y")
    assert run.out("out") == []
    _push_stream(run, 4, "X")
    assert run.out("out") == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]
    _push_table(run, "YY")
    assert run.out("out") == []
    _push_stream(run, 4, "X")
    assert run.out("out") == [(0, "X0+YY0", 0), (1, "X1+YY1", 1)]
    run.pipe("streamTopic", 5, "test", 7)
    assert run.out("out") == [(2, "X2+YY2", 2), (2, "X2+YY2", 2), (3, "X3+YY3", 3),
                              (3, "X3+YY3", 3)]
    _push_table(run, "YYY")
    assert run.out("out") == []


@MODES
def test_handle_late_joins_with_grace_period(batch_mode):
    run = Run(_grace_join(2), batch_mode)
    _push_table(run, "Y")
    _push_stream(run, 4, "X")  # four records buffered, the first two evicted
    assert run.out("out") == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]
    _push_stream(run, 1, "X")  # later than the grace period: joined at once, nothing evicted
    assert run.out("out") == [(0, "X0+Y0", 0)]


def test_a_table_update_within_the_grace_period_is_seen():
    """What the grace period is for: the table's version arrives after the stream record it
    precedes, and the record still joins it."""
    run = Run(_grace_join(10), batch_mode=False)
    run.pipe("tableTopic2", 1, "old", 0)
    run.pipe("streamTopic", 1, "order", 20)
    run.pipe("tableTopic2", 1, "new", 15)  # late, but before the order's time
    run.pipe("streamTopic", 2, "tick", 30)  # moves the buffer's time to 30: the order leaves
    assert run.out("out") == [(1, "order+new", 20)]


@MODES
@pytest.mark.parametrize("mode", ["inner", "left"])
def test_stream_table_join_with_grace(mode, batch_mode):
    """``StreamTableJoinWithGraceIntegrationTest.test{Inner,Left}WithVersionedStore`` (grace
    2 ms)."""
    b = StreamsBuilder()
    table = b.table("right", versioned("table-store"))
    stream = b.stream("left")
    join = stream.join if mode == "inner" else stream.left_join
    join(table, lambda lv, rv: f"{lv}-{'null' if rv is None else rv}",
         joined=Joined.with_grace_period(2).with_name("Grace")).to("out")
    expected = {
        "inner": {8: ("B-a", 5), 14: ("D-b", 6), 21: ("F-a", 4)},
        "left": {4: ("A-null", 3), 8: ("B-a", 5), 14: ("D-b", 6), 18: ("C-null", 9),
                 21: ("F-a", 4)},
    }[mode]
    run = Run(b.build(), batch_mode)
    for i, (topic, value, ts) in enumerate(JOIN_INPUT):
        run.pipe(topic, 1, value, ts)
        got = [(v, t) for _, v, t in run.out("out")]
        assert got == ([] if i not in expected else [expected[i]]), (i, topic, value, ts)


def test_the_buffer_survives_micro_batches_and_keeps_arrival_order():
    """Batch mode, several records per batch: what waits in the buffer at the end of a batch is
    task state, and leaves in timestamp order, then arrival order."""
    b = StreamsBuilder()
    table = b.table("t", versioned("t"))
    b.stream("s").join(table, _joiner, Joined.with_grace_period(timedelta(milliseconds=5))
                       ).to("out")
    driver = TopologyTestDriver(b.build(), batch_mode=True)
    t, s = driver.create_input_topic("t"), driver.create_input_topic("s")
    out = driver.create_output_topic("out")
    t.pipe_input("k", "v0", timestamp=0)
    s.pipe_input("k", "a", timestamp=10)
    s.pipe_input("k", "b", timestamp=8)
    s.pipe_input("k", "c", timestamp=10)
    driver.run_batch()
    assert out.read_values() == []
    t.pipe_input("k", "v9", timestamp=9)
    driver.run_batch()
    s.pipe_input("k", "d", timestamp=16)  # buffer time 16: everything at 11 or before leaves
    driver.run_batch()
    assert out.read_key_values() == [("k", "b+v0"), ("k", "a+v9"), ("k", "c+v9")]


def test_grace_needs_a_versioned_table():
    b = StreamsBuilder()
    with pytest.raises(TopologyError, match="must be versioned to use a grace period"):
        b.stream("topic").join(b.table("topic2"), _joiner, Joined.with_grace_period(6))


def test_grace_may_not_exceed_the_history_retention():
    b = StreamsBuilder()
    table = b.table("topic2", versioned("tableB", 300_000))
    with pytest.raises(TopologyError, match="history retention must be at least the grace"):
        b.stream("topic").join(table, _joiner, Joined.with_grace_period(360_000))
    b.stream("topic3").join(table, _joiner, Joined.with_grace_period(300_000))  # equal is fine


def test_the_buffer_is_a_store_of_the_join():
    topology = _grace_join(2)
    assert "Grace-Buffer" in topology.stores
    assert "Grace-Buffer" in topology.describe()


def test_records_without_key_or_value_are_dropped_before_the_buffer():
    run = Run(_grace_join(2), batch_mode=False)
    run.pipe("streamTopic", None, "x", 1)
    run.pipe("streamTopic", 1, None, 1)
    assert run.driver.dropped_records == {"null key or value in a stream-table join": 2}
