"""Hopping windows with grace and stream-table joins (the "not looking at Facebook" app:
test_facebook_state.py)."""

from __future__ import annotations

from streamtable import Materialized, StreamsBuilder, TimeWindows, TopologyTestDriver, Windowed

MIN = 60_000


def test_hopping_windows_contain_a_record_in_every_window_it_falls_in():
    w = TimeWindows.of(10 * MIN).advance_by(MIN)
    assert w.windows_for(0) == [(0, 10 * MIN)]
    assert len(w.windows_for(20 * MIN)) == 10
    assert w.windows_for(20 * MIN)[0] == (11 * MIN, 21 * MIN)
    assert TimeWindows.of(5).windows_for(7) == [(5, 10)]


def windowed_count(grace: int):
    b = StreamsBuilder()
    (b.stream("in").group_by_key()
        .windowed_by(TimeWindows.of(10).with_grace(grace)).count("counts"))
    driver = TopologyTestDriver(b.build())
    return driver, driver.create_input_topic("in")


def test_tumbling_count_and_late_records_beyond_grace_are_dropped_and_counted():
    driver, topic = windowed_count(grace=5)
    for ts in (1, 3, 12, 14):
        topic.pipe_input("a", "x", timestamp=ts)
    topic.pipe_input("a", "x", timestamp=9)   # stream time 14 < 10 + 5: still open
    topic.pipe_input("b", "x", timestamp=15)  # stream time 15 = end 10 + grace 5: closes [0, 10)
    topic.pipe_input("a", "x", timestamp=8)   # late
    store = driver.get_key_value_store("counts")
    # [0, 10) closed and, its retention (size + grace) over, left the store
    assert store.to_dict() == {Windowed("a", 10, 20): 2, Windowed("b", 10, 20): 1}
    assert driver.dropped_records == {"late record for a closed window": 1}


def test_windowed_reduce_starts_from_first_value():
    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(TimeWindows.of(100))
        .reduce(lambda a, v: a + v, Materialized.as_("sums").with_retention(1000)))
    driver = TopologyTestDriver(b.build())
    topic = driver.create_input_topic("in")
    for ts, v in ((1, 5), (2, 7), (150, 1)):
        topic.pipe_input("k", v, timestamp=ts)
    assert driver.get_key_value_store("sums").to_dict() == {
        Windowed("k", 0, 100): 12, Windowed("k", 100, 200): 1}


def test_stream_table_inner_and_left_join():
    b = StreamsBuilder()
    users = b.table("users", materialized="users-store")
    clicks = b.stream("clicks")
    clicks.join(users, lambda c, u: f"{u}:{c}").to("inner")
    clicks.left_join(users, lambda c, u: f"{u}:{c}").to("left")
    driver = TopologyTestDriver(b.build())
    users_in, clicks_in = driver.create_input_topic("users"), driver.create_input_topic("clicks")
    clicks_in.pipe_input("u1", "c0")
    users_in.pipe_input("u1", "alice")
    clicks_in.pipe_input("u1", "c1")
    users_in.pipe_input("u1", None)
    clicks_in.pipe_input("u1", "c2")
    assert driver.create_output_topic("inner").read_values() == ["alice:c1"]
    assert driver.create_output_topic("left").read_values() == [
        "None:c0", "alice:c1", "None:c2"]
