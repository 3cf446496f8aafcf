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
