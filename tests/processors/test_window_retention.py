"""Window and session stores keep their windows for a retention period (Kafka Streams' default:
window size, inactivity gap or twice the time difference, plus the grace period; or
Materialized.with_retention), then delete them without forwarding anything; and they answer
Kafka's window and session store queries."""

from __future__ import annotations

import pytest

from streamtable import (
    Materialized,
    SessionWindows,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
    Windowed,
)


def _counts(windows, materialized, cache=False):
    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(windows).count(materialized)
     .to_stream(lambda w, v: f"{w.key}@{w.start}").to("out"))
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 10**7 if cache else 0})
    return driver, driver.create_input_topic("in"), driver.create_output_topic("out")


@pytest.mark.parametrize("cache", [True, False])
def test_time_windows_expire_at_size_plus_grace_without_forwarding(cache):
    driver, topic, out = _counts(TimeWindows.of(10).with_grace(5), "counts", cache)
    for key, ts in [("a", 1), ("a", 12), ("b", 14)]:
        topic.pipe_input(key, "x", timestamp=ts)
    store = driver.get_window_store("counts")
    assert store.fetch("a", 0, 100) == [(0, 1), (10, 1)]
    assert out.read_key_values() == [("a@0", 1), ("a@10", 1), ("b@10", 1)]
    topic.pipe_input("b", "x", timestamp=15)  # stream time 15 = 0 + 10 + 5: [0, 10) expires
    assert out.read_key_values() == [("b@10", 2)]  # nothing for the expired window
    assert store.fetch("a", 0, 100) == [(10, 1)]
    assert store.fetch_all() == [(Windowed("a", 10, 20), 1), (Windowed("b", 10, 20), 2)]
    assert store.fetch_all(11, 100) == []
    assert driver.get_timestamped_window_store("counts").fetch("b", 10, 10) == [(10, (2, 15))]


def test_retention_can_be_longer_and_not_shorter():
    driver, topic, _ = _counts(TimeWindows.of(10), Materialized.as_("counts").with_retention(30))
    for ts in (1, 12, 25, 39):
        topic.pipe_input("a", "x", timestamp=ts)
    # stream time 39: windows starting at 39 - 30 = 9 or before are gone
    assert driver.get_window_store("counts").fetch("a") == [(10, 1), (20, 1), (30, 1)]
    with pytest.raises(ValueError, match="window size plus the grace period"):
        _counts(TimeWindows.of(10).with_grace(5), Materialized.as_("c").with_retention(14))
    with pytest.raises(ValueError, match="inactivity gap plus the grace period"):
        _counts(SessionWindows.of_inactivity_gap_and_grace(10, 5),
                Materialized.as_("c").with_retention(14))
    with pytest.raises(ValueError, match="must not be negative"):
        Materialized.as_("c").with_retention(-1)


def test_hopping_windows_expire_each_by_its_start():
    driver, topic, _ = _counts(TimeWindows.of(10).advance_by(5), "counts")
    topic.pipe_input("a", "x", timestamp=7)  # windows [0, 10) and [5, 15)
    assert driver.get_window_store("counts").fetch("a") == [(0, 1), (5, 1)]
    topic.pipe_input("b", "x", timestamp=10)  # [0, 10) expires at 10
    assert driver.get_window_store("counts").fetch("a") == [(5, 1)]
    topic.pipe_input("b", "x", timestamp=15)
    assert driver.get_window_store("counts").fetch("a") == []
    # b's [10, 20) and [15, 25): its [5, 15) expired at 15 too
    assert [w for w, _ in driver.get_window_store("counts").fetch_all()] == [
        Windowed("b", 10, 20), Windowed("b", 15, 25)]


@pytest.mark.parametrize("cache", [True, False])
def test_sessions_expire_by_their_end_and_are_queried_by_key(cache):
    driver, topic, out = _counts(SessionWindows.of_inactivity_gap_and_grace(5, 2), "sessions",
                                 cache)
    for key, ts in [("a", 0), ("a", 3), ("b", 4), ("a", 20)]:
        topic.pipe_input(key, "x", timestamp=ts)
    sessions = driver.get_session_store("sessions")
    # retention 5 + 2: at stream time 20 the sessions that ended before 13 are gone
    assert sessions.fetch("a") == [(Windowed("a", 20, 20), 1)]
    assert sessions.fetch("b") == []
    assert out.read_key_values()[-1] == ("a@20", 1)
    topic.pipe_input("a", "x", timestamp=24)
    topic.pipe_input("a", "x", timestamp=40)
    assert sessions.fetch("a") == [(Windowed("a", 40, 40), 1)]
    topic.pipe_input("a", "x", timestamp=45)
    assert sessions.fetch("a") == [(Windowed("a", 40, 45), 2)]
    topic.pipe_input("a", "x", timestamp=51)
    assert sessions.find_sessions("a", 46, 60) == [(Windowed("a", 51, 51), 1)]
    assert sessions.find_sessions("a", 0, 45) == [(Windowed("a", 40, 45), 2)]
    assert sessions.find_sessions("a", 0, 39) == []
    with pytest.raises(TypeError, match="not a window store"):
        driver.get_window_store("sessions")
