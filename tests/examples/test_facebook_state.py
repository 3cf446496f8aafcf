"""The "not looking at Facebook" seed: the open/close table and the stateless notifier."""

from __future__ import annotations

import pytest

from streamtable import StreamsBuilder, TopologyTestDriver

MESSAGE = "You are not currently viewing Facebook."
MIN = 60_000


def test_close_events_become_notifications():
    builder = StreamsBuilder()
    (builder.stream("user-events", key_serde="string", value_serde="string")
        .filter(lambda k, v: v == "Close")
        .map_values(lambda v: MESSAGE)
        .to("notifications", key_serde="string", value_serde="string"))
    driver = TopologyTestDriver(builder.build())
    events = driver.create_input_topic("user-events", "string", "string")
    for user, action in [("mark", "Open"), ("mark", "Close"), ("sheryl", "Open"),
                         ("sheryl", "Close"), ("mark", "Open")]:
        events.pipe_input(user, action)
    out = driver.create_output_topic("notifications", "string", "string")
    assert out.read_key_values() == [("mark", MESSAGE), ("sheryl", MESSAGE)]


def test_open_table_tracks_latest_state_per_user():
    builder = StreamsBuilder()
    builder.table("open", materialized="open-store", key_serde="string",
                  value_serde="string").to_stream().to("open-changes", key_serde="string",
                                                       value_serde="string")
    driver = TopologyTestDriver(builder.build())
    events = driver.create_input_topic("open", "string", "string")
    store = driver.get_key_value_store("open-store")
    # The seed's KTable "as data rolls in"
    events.pipe_input("mark", "Open")
    assert store.to_dict() == {"mark": "Open"}
    events.pipe_input("sheryl", "Open")
    assert store.to_dict() == {"mark": "Open", "sheryl": "Open"}
    events.pipe_input("mark", "Closed")
    assert store.to_dict() == {"mark": "Closed", "sheryl": "Open"}
    events.pipe_input("sheryl", "Closed")
    assert store.to_dict() == {"mark": "Closed", "sheryl": "Closed"}
    out = driver.create_output_topic("open-changes", "string", "string")
    assert out.read_key_values() == [
        ("mark", "Open"), ("sheryl", "Open"), ("mark", "Closed"), ("sheryl", "Closed")
    ]


def facebook_driver(batch_mode=False, cache=True):
    from streamtable.cli import load_app

    app = load_app("examples/not_looking_at_facebook/app.py")
    config = dict(app.config, **{"cache.max.bytes.buffering": 10**7 if cache else 0})
    driver = TopologyTestDriver(app.build_topology(), config, initial_wall_clock_time_ms=0,
                                batch_mode=batch_mode)
    return app, driver


@pytest.mark.parametrize("batch_mode", [False, True])
@pytest.mark.parametrize("cache", [True, False])
def test_the_example_notifies_closed_users_every_wall_clock_minute(batch_mode, cache):
    app, driver = facebook_driver(batch_mode, cache)
    open_ = driver.create_input_topic("open")
    notifications = driver.create_output_topic("notifications")
    counts = driver.create_output_topic("notification-counts", value_serde="json")

    def minute(m, events=()):
        for ts, user, state in events:
            open_.pipe_input(user, state, timestamp=ts)
        driver.advance_wall_clock_time(MIN)
        if batch_mode:
            driver.run_batch()
        assert driver.wall_clock_ms == m * MIN

    minute(1, [(0, "mark", "Open"), (0, "sheryl", "Closed")])
    minute(2)
    minute(3, [(150_000, "mark", "Closed")])
    minute(4)
    minute(5, [(250_000, "mark", "Open")])
    for m in range(6, 13):
        minute(m)
    got = notifications.read_records()
    assert [(r.key, r.value, r.timestamp) for r in got] == (
        [("sheryl", MESSAGE, 1 * MIN), ("sheryl", MESSAGE, 2 * MIN)]
        + [("mark", MESSAGE, 3 * MIN), ("sheryl", MESSAGE, 3 * MIN)]
        + [("mark", MESSAGE, 4 * MIN), ("sheryl", MESSAGE, 4 * MIN)]
        + [("sheryl", MESSAGE, m * MIN) for m in range(5, 13)])
    # stream time of the counts is the last notification's, minute 12: the 10-minute windows
    # starting at minutes 0, 1 and 2 have closed; one final count each, none for open windows
    final = counts.read_key_values()
    assert sorted((k, v["start"] // MIN, v["end"] // MIN, v["notifications"])
                  for k, v in final) == [
        ("mark", 0, 10, 2), ("mark", 1, 11, 2), ("mark", 2, 12, 2),
        ("sheryl", 0, 10, 9), ("sheryl", 1, 11, 10), ("sheryl", 2, 12, 10)]
    # the table is still the article's KTable of who has Facebook open
    assert driver.get_key_value_store("open-store").to_dict() == {"mark": "Open",
                                                                  "sheryl": "Closed"}
    minute(13)
    assert sorted((k, v["start"] // MIN, v["notifications"])
                  for k, v in counts.read_key_values()) == [("mark", 3, 2), ("sheryl", 3, 10)]
