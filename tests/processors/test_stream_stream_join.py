"""Windowed KStream-KStream joins reproduce Kafka Streams' own test expectations
(KStreamKStreamJoinTest, KStreamKStreamLeftJoinTest, KStreamKStreamOuterJoinTest: the same
inputs, output records and timestamps), with caching on and off (stream joins are not cached),
record by record and in batch mode (one micro-batch per step)."""

from __future__ import annotations

import pytest

from streamtable import JoinWindows, StreamJoined, StreamsBuilder, TopologyTestDriver
from streamtable.errors import TopologyError


def tostring(a, b):
    """Kafka's MockValueJoiner.TOSTRING_JOINER."""
    return f"{'null' if a is None else a}+{'null' if b is None else b}"


def build(mode, windows, stream_joined=None):
    b = StreamsBuilder()
    s1, s2 = b.stream("topic1"), b.stream("topic2")
    join = {"inner": s1.join, "left": s1.left_join, "outer": s1.outer_join}[mode]
    join(s2, tostring, windows, stream_joined=stream_joined).to("out")
    return b.build()


RUNS = [("record", True), ("record", False), ("batch", True), ("batch", False)]


def run(mode, windows, steps, how, cache):
    """Pipe each step's records ((topic, key, value, ts) ...) and compare what the join emits
    after the step with the step's expected (key, value, ts) records."""
    config = {"cache.max.bytes.buffering": 10_000_000 if cache else 0}
    driver = TopologyTestDriver(build(mode, windows), config, batch_mode=how == "batch")
    inputs = {t: driver.create_input_topic(t) for t in ("topic1", "topic2")}
    out = driver.create_output_topic("out")
    for i, (records, expected) in enumerate(steps):
        for topic, key, value, ts in records:
            inputs[topic].pipe_input(key, value, timestamp=ts)
        if how == "batch":
            driver.run_batch()
        got = [(r.key, r.value, r.timestamp) for r in out.read_records()]
        assert got == expected, f"step {i}: {records}"
    return driver


def one(topic, keys, prefix, ts):
    return [(topic, k, f"{prefix}{k}", ts) for k in keys]


# KStreamKStreamJoinTest.testJoin: ofTimeDifferenceWithNoGrace(100), every record at 0
INNER_JOIN = [
    (one("topic1", [0, 1], "A", 0), []),
    (one("topic2", [0, 1], "a", 0), [(0, "A0+a0", 0), (1, "A1+a1", 0)]),
    (one("topic1", [0, 1, 2, 3], "B", 0), [(0, "B0+a0", 0), (1, "B1+a1", 0)]),
    (one("topic2", [0, 1, 2, 3], "b", 0),
     [(0, "A0+b0", 0), (0, "B0+b0", 0), (1, "A1+b1", 0), (1, "B1+b1", 0), (2, "B2+b2", 0),
      (3, "B3+b3", 0)]),
    (one("topic1", [0, 1, 2, 3], "C", 0),
     [(0, "C0+a0", 0), (0, "C0+b0", 0), (1, "C1+a1", 0), (1, "C1+b1", 0), (2, "C2+b2", 0),
      (3, "C3+b3", 0)]),
    (one("topic2", [0, 1], "c", 0),
     [(0, "A0+c0", 0), (0, "B0+c0", 0), (0, "C0+c0", 0), (1, "A1+c1", 0), (1, "B1+c1", 0),
      (1, "C1+c1", 0)]),
]

# KStreamKStreamLeftJoinTest.testLeftJoinDuplicates: ofTimeDifferenceAndGrace(100, 10)
LEFT_DUPLICATES = [
    ([("topic1", 0, "A0", 0), ("topic1", 0, "A0-0", 0)], []),
    ([("topic2", 1, "a0", 111), ("topic2", 2, "dummy", 500)],
     [(0, "A0+null", 0), (0, "A0-0+null", 0)]),
    ([("topic1", 2, "A2", 1000), ("topic1", 2, "A2-0", 1000)], []),
    ([("topic2", 2, "a2", 1001)], [(2, "A2+a2", 1001), (2, "A2-0+a2", 1001)]),
    ([("topic2", 3, "a3", 315)], []),
]

# testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor: ofTimeDifferenceAndGrace(100, 0)
LEFT_EXPIRED_BY_LEFT = [
    ([("topic1", 0, "A0", 1), ("topic1", 1, "A1", 2), ("topic1", 0, "A0-0", 3)], []),
    ([("topic2", 1, "a1", 3)], [(1, "A1+a1", 3)]),
    ([("topic1", 2, "dummy", 401)], [(0, "A0+null", 1), (0, "A0-0+null", 3)]),
    ([("topic2", 2, "dummy", 401)], [(2, "dummy+dummy", 401)]),
]

# testLeftExpiredNonJoinedRecordsAreEmittedByTheRightProcessor
LEFT_EXPIRED_BY_RIGHT = [
    ([("topic1", 0, "A0", 1), ("topic1", 1, "A1", 2), ("topic1", 0, "A0-0", 3)], []),
    ([("topic2", 1, "a1", 3)], [(1, "A1+a1", 3)]),
    ([("topic2", 2, "dummy", 401)], [(0, "A0+null", 1), (0, "A0-0+null", 3)]),
    ([("topic1", 2, "dummy", 402)], [(2, "dummy+dummy", 402)]),
]

# KStreamKStreamLeftJoinTest.testGracePeriod: ofTimeDifferenceAndGrace(100, 10)
LEFT_GRACE = [
    (one("topic1", [0, 1], "A", 0), []),
    (one("topic2", [0, 1, 2, 3], "a", 101), []),
    ([("topic2", 0, "dummy", 1201)], [(0, "A0+null", 0), (1, "A1+null", 0)]),
]

# shouldNotEmitLeftJoinResultForAsymmetricWindow: ofTimeDifferenceWithNoGrace(100).before(0)
LEFT_ASYMMETRIC = [
    ([("topic1", 0, "A0", 0), ("topic1", 1, "A1", 1)], []),
    ([("topic2", 0, "a0", 100)], [(0, "A0+a0", 100)]),
    ([("topic2", 1, "a1", 102)], [(1, "A1+null", 1)]),
]

K4 = [0, 1, 2, 3]
# KStreamKStreamLeftJoinTest.testWindowing with testUpperWindowBound and the first steps of
# testLowerWindowBound: ofTimeDifferenceWithNoGrace(100). A record older than the window
# store's retention (G, H at 899/900 after stream time 1405) still joins what the other side
# retains, and without a partner is emitted at once (its window closed long ago).
LEFT_WINDOWING = [
    (one("topic1", [0, 1], "A", 0), []),
    (one("topic2", K4, "a", 0), [(0, "A0+a0", 0), (1, "A1+a1", 0)]),
    ([("topic2", k, f"b{k}", 1000 + k) for k in K4], []),
    (one("topic1", K4, "B", 1100), [(k, f"B{k}+b{k}", 1100) for k in K4]),
    (one("topic1", K4, "C", 1101), [(k, f"C{k}+b{k}", 1101) for k in (1, 2, 3)]),
    (one("topic1", K4, "D", 1102), [(k, f"D{k}+b{k}", 1102) for k in (2, 3)]),
    (one("topic1", K4, "E", 1103), [(3, "E3+b3", 1103)]),
    (one("topic1", K4, "F", 1104), []),
    ([("topic1", 0, "dummy", 1405)],
     [(0, "C0+null", 1101), (0, "D0+null", 1102), (1, "D1+null", 1102), (0, "E0+null", 1103),
      (1, "E1+null", 1103), (2, "E2+null", 1103), (0, "F0+null", 1104), (1, "F1+null", 1104),
      (2, "F2+null", 1104), (3, "F3+null", 1104)]),
    (one("topic1", K4, "G", 899), [(k, f"G{k}+null", 899) for k in K4]),
    (one("topic1", K4, "H", 900),
     [(0, "H0+b0", 1000), (1, "H1+null", 900), (2, "H2+null", 900), (3, "H3+null", 900)]),
]

# KStreamKStreamOuterJoinTest.testOuterJoinDuplicates: ofTimeDifferenceAndGrace(100, 10)
OUTER_DUPLICATES = [
    ([("topic1", 0, "A0", 0), ("topic1", 0, "A0-0", 0)], []),
    ([("topic2", 1, 11, 0), ("topic2", 1, 12, 0), ("topic2", 1, 10, 111),
      ("topic2", 3, 100, 211)],
     [(1, "null+11", 0), (1, "null+12", 0), (0, "A0+null", 0), (0, "A0-0+null", 0)]),
    ([("topic1", 2, "A2", 200), ("topic1", 2, "A2-0", 200)], []),
    ([("topic2", 2, 13, 201), ("topic2", 2, 14, 201)],
     [(2, "A2+13", 201), (2, "A2-0+13", 201), (2, "A2+14", 201), (2, "A2-0+14", 201)]),
    ([("topic2", 3, 100, 1500)], [(1, "null+10", 111), (3, "null+100", 211)]),
]

# KStreamKStreamOuterJoinTest.testGracePeriod: ofTimeDifferenceAndGrace(100, 10)
OUTER_GRACE = [
    ([("topic1", 0, "A0", 0)], []),
    ([("topic2", 1, 11, 0)], []),
    ([("topic1", 1, "A1", 101)], []),
    ([("topic2", 0, 10, 101)], []),
    ([("topic2", 0, 100, 112)], [(1, "null+11", 0), (0, "A0+null", 0)]),
]

# testEmitAllNonJoinedResultsForAsymmetricWindow: ofTimeDifferenceWithNoGrace(5).after(20)
OUTER_ASYMMETRIC = [
    ([("topic1", 0, "A0", 29)], []),
    ([("topic1", 1, "A1", 30)], []),
    ([("topic2", 2, 12, 31)], []),
    ([("topic2", 3, 13, 36)], []),
    ([("topic2", 4, 14, 37)], [(2, "null+12", 31)]),
    ([("topic2", 5, 15, 50)], [(0, "A0+null", 29), (3, "null+13", 36), (4, "null+14", 37)]),
]

# testRightNonJoinedRecordsAreNeverEmittedByTheRightProcessor: ofTimeDifferenceWithNoGrace(100)
LEFT_RIGHT_NEVER_EMITTED = [
    ([("topic2", 0, "A0", 1), ("topic2", 1, "A1", 2), ("topic2", 0, "A0-0", 3)], []),
    ([("topic1", 1, "a1", 3)], [(1, "a1+A1", 3)]),
    ([("topic2", 2, "dummy", 401)], []),
    ([("topic1", 2, "dummy", 402)], [(2, "dummy+dummy", 402)]),
]

# KStreamKStreamOuterJoinTest.testRightExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor
OUTER_RIGHT_EXPIRED_BY_LEFT = [
    ([("topic2", 0, 10, 1), ("topic2", 1, 11, 2), ("topic2", 0, 12, 3)], []),
    ([("topic1", 1, "A1", 3)], [(1, "A1+11", 3)]),
    ([("topic1", 2, "dummy", 401)], [(0, "null+10", 1), (0, "null+12", 3)]),
    ([("topic2", 2, 100, 402)], [(2, "dummy+100", 402)]),
]

CASES = {
    "inner-testJoin": ("inner", JoinWindows.of_time_difference_with_no_grace(100), INNER_JOIN),
    "left-duplicates": ("left", JoinWindows.of_time_difference_and_grace(100, 10),
                        LEFT_DUPLICATES),
    "left-expired-by-left": ("left", JoinWindows.of_time_difference_and_grace(100, 0),
                             LEFT_EXPIRED_BY_LEFT),
    "left-expired-by-right": ("left", JoinWindows.of_time_difference_and_grace(100, 0),
                              LEFT_EXPIRED_BY_RIGHT),
    "left-grace": ("left", JoinWindows.of_time_difference_and_grace(100, 10), LEFT_GRACE),
    "left-asymmetric": ("left", JoinWindows.of_time_difference_without_grace(100).before(0),
                        LEFT_ASYMMETRIC),
    "left-windowing": ("left", JoinWindows.of_time_difference_with_no_grace(100),
                       LEFT_WINDOWING),
    "left-right-never-emitted": ("left", JoinWindows.of_time_difference_with_no_grace(100),
                                 LEFT_RIGHT_NEVER_EMITTED),
    "outer-right-expired-by-left": ("outer", JoinWindows.of_time_difference_with_no_grace(100),
                                    OUTER_RIGHT_EXPIRED_BY_LEFT),
    "outer-duplicates": ("outer", JoinWindows.of_time_difference_and_grace(100, 10),
                         OUTER_DUPLICATES),
    "outer-grace": ("outer", JoinWindows.of_time_difference_and_grace(100, 10), OUTER_GRACE),
    "outer-asymmetric": ("outer", JoinWindows.of_time_difference_with_no_grace(5).after(20),
                         OUTER_ASYMMETRIC),
}


@pytest.mark.parametrize(("how", "cache"), RUNS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_kafka_streams_join_expectations(case, how, cache):
    mode, windows, steps = CASES[case]
    run(mode, windows, steps, how, cache)


def test_late_record_is_not_kept_and_is_counted():
    # LEFT_WINDOWING's G and H records are older than the left store's retention (200 ms
    # behind 1405): joined against what the right side retains, but not kept themselves
    driver = run("left", JoinWindows.of_time_difference_with_no_grace(100), LEFT_WINDOWING,
                 "record", False)
    late = [k for k, _ in driver.dropped_records.items() if "retention" in k]
    assert sum(driver.dropped_records[k] for k in late) == 8


def test_expired_records_are_deleted_from_the_window_stores():
    windows = JoinWindows.of_time_difference_and_grace(100, 10)
    driver = TopologyTestDriver(build("inner", windows, StreamJoined.with_store_name("j")))
    t1, t2 = driver.create_input_topic("topic1"), driver.create_input_topic("topic2")
    for i in range(10):
        t1.pipe_input(i, "x", timestamp=i * 1000)
        t2.pipe_input(i, "y", timestamp=i * 1000)
    t1.pipe_input(99, "x", timestamp=200_000)
    t2.pipe_input(99, "y", timestamp=200_000)
    this = driver._store("j-this-join-store")
    other = driver._store("j-other-join-store")
    # one record each (and the store's bookkeeping row): the others fell out of the retention
    assert sorted(k[:2] for k, _ in this.items() if k[0] is not None) == [(99, 200_000)]
    assert sorted(k[:2] for k, _ in other.items() if k[0] is not None) == [(99, 200_000)]


def test_a_rekeyed_stream_is_repartitioned_before_the_join():
    b = StreamsBuilder()
    left = b.stream("topic1").select_key(lambda k, v: v["id"])
    left.join(b.stream("topic2"), lambda lv, rv: [lv["n"], rv],
              JoinWindows.of_time_difference_with_no_grace(10)).to("out")
    topology = b.build()
    assert any(t.endswith("-repartition") for t in topology.repartition_topics)
    driver = TopologyTestDriver(topology)
    driver.create_input_topic("topic1").pipe_input("x", {"id": 7, "n": 1}, timestamp=5)
    driver.create_input_topic("topic2").pipe_input(7, "r", timestamp=8)
    assert [(r.key, r.value, r.timestamp)
            for r in driver.create_output_topic("out").read_records()] == [(7, [1, "r"], 8)]


def test_null_keys_and_values_are_dropped_and_counted():
    driver = TopologyTestDriver(build("inner", JoinWindows.of_time_difference_with_no_grace(10)))
    t1, t2 = driver.create_input_topic("topic1"), driver.create_input_topic("topic2")
    t1.pipe_input(None, "v", timestamp=1)
    t1.pipe_input(1, None, timestamp=1)
    t2.pipe_input(1, "w", timestamp=2)  # nothing to join: the null value was not kept
    assert sum(driver.dropped_records.values()) == 2
    assert driver.create_output_topic("out").read_records() == []


@pytest.mark.parametrize(("mode", "stores"), [
    ("inner", ["j-other-join-store", "j-this-join-store"]),
    ("left", ["j-left-shared-join-store", "j-outer-other-join-store", "j-this-join-store"]),
    ("outer", ["j-outer-other-join-store", "j-outer-shared-join-store",
               "j-outer-this-join-store"]),
])
def test_stream_joined_names_the_stores_as_kafka_streams(mode, stores):
    topology = build(mode, JoinWindows.of_time_difference_with_no_grace(5), "j")
    assert sorted(topology.stores) == stores
    assert not any(s.queryable for s in topology.stores.values())


def test_join_windows_need_windows():
    b = StreamsBuilder()
    with pytest.raises(TypeError, match="JoinWindows"):
        b.stream("a").join(b.stream("b"), tostring)
    with pytest.raises(TopologyError, match="already exists"):
        s1, s2 = b.stream("c"), b.stream("d")
        s1.join(s2, tostring, JoinWindows.of_time_difference_with_no_grace(1),
                stream_joined="same")
        s1.join(s2, tostring, JoinWindows.of_time_difference_with_no_grace(1),
                stream_joined="same")
