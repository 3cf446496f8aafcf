"""Session windows: sessions grow and merge; a merge forwards a tombstone for each replaced
session, then the merged one (Kafka Streams' KStreamSessionWindowAggregate)."""

from __future__ import annotations

import pytest

from streamtable import Materialized, SessionWindows, StreamsBuilder, TopologyTestDriver, Windowed


def _driver(cache: bool, grace: int = 0):
    b = StreamsBuilder()
    (b.stream("clicks").group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap(5).with_grace(grace))
     .count("sessions")
     .to_stream(lambda w, v: f"{w.key}@{w.start}-{w.end}").to("out"))
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 10**7 if cache else 0})
    return driver, driver.create_input_topic("clicks"), driver.create_output_topic("out")


def _pipe(topic, out, ts):
    topic.pipe_input("a", "click", timestamp=ts)
    return [(r.key, r.value, r.timestamp) for r in out.read_records()]


@pytest.mark.parametrize("cache", [False, True])
def test_sessions_merge_with_tombstones_for_the_replaced_sessions(cache):
    driver, topic, out = _driver(cache, grace=100)
    assert _pipe(topic, out, 0) == [("a@0-0", 1, 0)]
    assert _pipe(topic, out, 3) == [("a@0-0", None, 0), ("a@0-3", 2, 3)]
    assert _pipe(topic, out, 20) == [("a@20-20", 1, 20)]
    assert _pipe(topic, out, 10) == [("a@10-10", 1, 10)]  # 3 + 5 < 10 < 20 - 5: a new session
    assert _pipe(topic, out, 14) == [("a@10-10", None, 10), ("a@10-14", 2, 14)]
    # 17 is within the gap of both [10, 14] and [20, 20]: one session of four records
    assert _pipe(topic, out, 17) == [("a@10-14", None, 14), ("a@20-20", None, 20),
                                     ("a@10-20", 4, 20)]
    inside = _pipe(topic, out, 12)  # inside a session: replaced by itself
    if cache:  # the record cache folds the tombstone and the new value
        assert inside == [("a@10-20", 5, 20)]
    else:
        assert inside == [("a@10-20", None, 20), ("a@10-20", 5, 20)]
    store = driver.get_key_value_store("sessions")
    assert store.to_dict() == {Windowed("a", 0, 3): 2, Windowed("a", 10, 20): 5}


def test_a_record_for_a_closed_session_is_late():
    driver, topic, out = _driver(cache=True, grace=2)
    _pipe(topic, out, 0)
    # stream time 30: sessions ending before 30 - grace 2 - gap 5 = 23 are closed (Kafka
    # Streams' KStreamSessionWindowAggregate: a session can grow until then)
    _pipe(topic, out, 30)
    assert _pipe(topic, out, 2) == []
    assert _pipe(topic, out, 22) == []
    assert driver.dropped_records == {"late record for a closed session": 2}
    assert _pipe(topic, out, 24) == [("a@24-24", 1, 24)]  # still open: a session of its own
    assert _pipe(topic, out, 27) == [("a@24-24", None, 24), ("a@30-30", None, 30),
                                     ("a@24-30", 3, 30)]


def test_session_reduce_and_aggregate_merge_their_sessions():
    b = StreamsBuilder()
    grouped = b.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap(20))
    # kept longer than the default retention (gap + grace = 20): at stream time 30 the
    # session [0, 0] would be gone before 15 can bridge it to [30, 30]
    grouped.reduce(lambda a, v: a + v, materialized=Materialized.as_("sums").with_retention(60))
    grouped.aggregate(list, lambda k, v, agg: [*agg, v], lambda k, a1, a2: sorted(a1 + a2),
                      materialized=Materialized.as_("lists").with_retention(60))
    driver = TopologyTestDriver(b.build())
    topic = driver.create_input_topic("in")
    for ts, v in [(0, 1), (30, 2), (15, 4)]:  # 15 bridges the two sessions
        topic.pipe_input("k", v, timestamp=ts)
    assert driver.get_key_value_store("sums").to_dict() == {Windowed("k", 0, 30): 7}
    assert driver.get_key_value_store("lists").to_dict() == {Windowed("k", 0, 30): [1, 2, 4]}


def _sessions_of(operation: str, emit_final: bool = False, suppress: bool = False,
                 gap: int = 20, grace: int = 0, cache: bool = False):
    """A session-windowed ``operation`` (count, reduce or aggregate) of the values of topic
    "in", with the default retention (gap + grace), its changes on topic "out"."""
    from streamtable import EmitStrategy, Suppressed

    b = StreamsBuilder()
    windowed = (b.stream("in").group_by_key()
                .windowed_by(SessionWindows.of_inactivity_gap(gap).with_grace(grace)))
    if emit_final:
        windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
    if operation == "count":
        table = windowed.count("sessions")
    elif operation == "reduce":
        table = windowed.reduce(lambda a, v: a + v, "sessions")
    else:
        table = windowed.aggregate(lambda: 0, lambda k, v, agg: agg + v,
                                   lambda k, a1, a2: a1 + a2, "sessions")
    if suppress:
        table = table.suppress(Suppressed.until_window_closes())
    table.to_stream(lambda w, v: f"{w.key}@{w.start}-{w.end}").to("out")
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 10**7 if cache else 0})
    return driver, driver.create_input_topic("in"), driver.create_output_topic("out")


@pytest.mark.parametrize("cache", [False, True])
@pytest.mark.parametrize("operation", ["count", "reduce", "aggregate"])
def test_a_session_ending_a_gap_before_a_record_merges_with_it(operation, cache):
    """Kafka Streams merges a record at t with the sessions of its key that end at t - gap or
    later: with the default retention (gap + grace = 20) the session [70, 70] is still there
    when 90 arrives, and 70, 90, 100 are one session."""
    driver, topic, out = _sessions_of(operation, cache=cache)
    for ts in (70, 90, 100):
        topic.pipe_input("k", 1, timestamp=ts)
    assert driver.get_key_value_store("sessions").to_dict() == {Windowed("k", 70, 100): 3}
    changes = [(r.key, r.value, r.timestamp) for r in out.read_records()]
    assert changes == [("k@70-70", 1, 70), ("k@70-70", None, 70), ("k@70-90", 2, 90),
                       ("k@70-90", None, 90), ("k@70-100", 3, 100)]
    # one ms further it is closed: a session of its own
    topic.pipe_input("k", 1, timestamp=121)
    assert driver.get_key_value_store("sessions").to_dict() == {Windowed("k", 121, 121): 1}
    assert driver.get_session_store("sessions").fetch("k") == [(Windowed("k", 121, 121), 1)]


@pytest.mark.parametrize("cache", [False, True])
@pytest.mark.parametrize("how", ["suppress", "emit_final"])
@pytest.mark.parametrize("operation", ["count", "reduce", "aggregate"])
def test_final_results_at_the_retention_edge_are_the_merged_session(operation, how, cache):
    driver, topic, out = _sessions_of(operation, emit_final=how == "emit_final",
                                      suppress=how == "suppress", cache=cache)
    for ts in (70, 90, 100):
        topic.pipe_input("k", 1, timestamp=ts)
    topic.pipe_input("other", 1, timestamp=120)
    assert out.read_key_values() == []  # [70, 100] ends exactly gap + grace before 120: open
    topic.pipe_input("other", 1, timestamp=121)
    assert [(r.key, r.value, r.timestamp) for r in out.read_records()] == [("k@70-100", 3, 100)]


@pytest.mark.parametrize("cache", [False, True])
@pytest.mark.parametrize("how", ["suppress", "emit_final"])
def test_a_session_is_final_once_its_end_plus_gap_and_grace_is_before_stream_time(how, cache):
    """Gap 10: k@0, x@10, k@10 give one session k@[0, 10] of 2 (k@10 merges with [0, 0]), never
    the final result k@[0, 0]; KStreamSessionWindowAggregate emits a session once its end is
    before stream time minus gap and grace, strictly."""
    driver, topic, out = _sessions_of("count", emit_final=how == "emit_final",
                                      suppress=how == "suppress", gap=10, cache=cache)
    topic.pipe_input("k", "v", timestamp=0)
    topic.pipe_input("x", "v", timestamp=10)
    assert out.read_key_values() == []
    topic.pipe_input("k", "v", timestamp=10)
    topic.pipe_input("x", "v", timestamp=20)
    assert out.read_key_values() == []
    topic.pipe_input("y", "v", timestamp=21)
    assert out.read_key_values() == [("k@0-10", 2)]
    topic.pipe_input("y", "v", timestamp=31)  # x's [10, 20]: 20 < 31 - 10
    assert out.read_key_values() == [("x@10-20", 2)]


@pytest.mark.parametrize("grace", [0, 7])
def test_a_session_at_the_retention_edge_is_never_expired_while_a_record_can_reach_it(grace):
    """The store keeps every session a record could still merge with: a session ending at
    stream time minus gap and grace is there for a record at end + gap (or earlier), and gone
    one ms later."""
    driver, topic, out = _sessions_of("count", gap=10, grace=grace)
    topic.pipe_input("k", "v", timestamp=0)
    topic.pipe_input("x", "v", timestamp=10 + grace)
    assert driver.get_session_store("sessions").fetch("k") == [(Windowed("k", 0, 0), 1)]
    topic.pipe_input("k", "v", timestamp=10)
    assert driver.get_session_store("sessions").fetch("k") == [(Windowed("k", 0, 10), 2)]
    topic.pipe_input("x", "v", timestamp=21 + grace)
    assert driver.get_session_store("sessions").fetch("k") == []
    # [0, 10] is closed (final): a record within its gap starts a session of its own
    topic.pipe_input("k", "v", timestamp=20)
    assert driver.get_session_store("sessions").fetch("k") == [(Windowed("k", 20, 20), 1)]


# Kafka Streams' SessionWindowedKStreamImplTest: gap 500 without grace, both emit strategies
_KAFKA_INPUT = [("1", "1", 10), ("1", "2", 15), ("1", "3", 600), ("2", "1", 600),
                ("2", "2", 599)]


@pytest.mark.parametrize("cache", [False, True])
@pytest.mark.parametrize("emit_final", [False, True])
@pytest.mark.parametrize("operation,values", [
    ("count", [1, None, 2, 1, 1, None, 2]),
    ("reduce", ["1", None, "1+2", "3", "1", None, "1+2"]),
    ("aggregate", ["0+1", None, "0+0+1+2", "0+3", "0+1", None, "0+0+1+2"]),
])
def test_kafka_session_windowed_kstream_cases(operation, values, emit_final, cache):
    from streamtable import EmitStrategy

    b = StreamsBuilder()
    windowed = (b.stream("in").group_by_key()
                .windowed_by(SessionWindows.of_inactivity_gap(500)))
    if emit_final:
        windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
    if operation == "count":
        table = windowed.count("store")
    elif operation == "reduce":
        table = windowed.reduce(lambda a, v: f"{a}+{v}", "store")
    else:
        table = windowed.aggregate(lambda: "0", lambda k, v, agg: f"{agg}+{v}",
                                   lambda k, a1, a2: f"{a1}+{a2}", "store")
    table.to_stream(lambda w, v: (w.key, w.start, w.end)).to("out")
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 10**7 if cache else 0})
    topic, out = driver.create_input_topic("in"), driver.create_output_topic("out")
    got = []
    for k, v, ts in _KAFKA_INPUT:
        topic.pipe_input(k, v, timestamp=ts)
        got += [(tuple(r.key), r.value, r.timestamp) for r in out.read_records()]
    windows = [("1", 10, 10), ("1", 10, 10), ("1", 10, 15), ("1", 600, 600), ("2", 600, 600),
               ("2", 600, 600), ("2", 599, 600)]
    expected = [(w, v, w[2]) for w, v in zip(windows, values, strict=True)]
    if emit_final:
        expected = [expected[2]]
    assert got == expected
    if not emit_final:
        # the store's retention (gap 500) has expired [10, 15] at stream time 600
        assert driver.get_session_store("store").fetch("1") == [
            (Windowed("1", 600, 600), values[3])]
        assert driver.get_session_store("store").fetch("2") == [
            (Windowed("2", 599, 600), values[6])]


@pytest.mark.parametrize("grace", [0, 1])
def test_kafka_late_records_with_and_without_grace(grace):
    """KStreamSessionWindowAggregateProcessorTest.shouldLogAndMeterWhenSkippingLateRecordWith
    ZeroGrace / NonzeroGrace: gap 10; a record at 0 is late once stream time is past
    0 + 10 + grace."""
    driver, topic, out = _sessions_of("count", gap=10, grace=grace)
    topic.pipe_input("dummy", "v", timestamp=0)
    topic.pipe_input("OnTime1", "v", timestamp=0)
    topic.pipe_input("dummy", "v", timestamp=11)
    topic.pipe_input("OnTime2", "v", timestamp=0)  # late without grace, on time with 1
    topic.pipe_input("dummy", "v", timestamp=12)
    topic.pipe_input("Late1", "v", timestamp=0)
    assert driver.dropped_records == {"late record for a closed session": 2 - grace}
    assert ("OnTime2@0-0" in dict(out.read_key_values())) is (grace == 1)
