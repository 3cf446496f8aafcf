"""The "not looking at Facebook" seed: the open/close table and the stateless notifier."""

from __future__ import annotations

from streamtable import StreamsBuilder, TopologyTestDriver

MESSAGE = "You are not currently viewing Facebook."


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
