"""Hopping windows with grace, stream-table joins, and the "not looking at Facebook" app."""

from __future__ import annotations

from streamtable import Materialized, StreamsBuilder, TimeWindows, TopologyTestDriver, Windowed
from streamtable.cli import load_app

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


def test_not_looking_at_facebook_notifies_closed_users_on_every_tick_and_counts():
    app = load_app("examples/not_looking_at_facebook/app.py")
    driver = TopologyTestDriver(app.build_topology(), app.config)
    open_ = driver.create_input_topic("open")
    tick = driver.create_input_topic("tick")
    open_.pipe_input("mark", "Open", timestamp=0)
    open_.pipe_input("sheryl", "Closed", timestamp=0)
    for minute in range(3):
        for user in ("mark", "sheryl"):
            tick.pipe_input(user, "tick", timestamp=minute * MIN)
    open_.pipe_input("mark", "Closed", timestamp=3 * MIN)
    tick.pipe_input("mark", "tick", timestamp=3 * MIN)
    notes = driver.create_output_topic("notifications").read_key_values()
    assert notes == [("sheryl", app.MESSAGE)] * 3 + [("mark", app.MESSAGE)]
    counts = driver.create_output_topic("notification-counts", value_serde="long")
    updates = counts.read_key_values()
    # each notification updates every hopping window it falls in (1 + 2 + 3 windows for
    # sheryl's ticks at minutes 0, 1, 2, and 4 windows for mark's tick at minute 3)
    assert [k for k, _ in updates] == ["sheryl"] * 6 + ["mark"] * 4
    store = driver.get_key_value_store("notification-counts-store")
    assert store.get(Windowed("sheryl", 0, 10 * MIN)) == 3
    assert store.get(Windowed("sheryl", 2 * MIN, 12 * MIN)) == 1
    assert store.get(Windowed("mark", 0, 10 * MIN)) == 1
