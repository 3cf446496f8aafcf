"""suppress(until_window_closes): one final result per window, once stream time has passed the
window's end plus its grace period; with caching on or off; the buffer can be bounded."""

from __future__ import annotations

import pytest

from streamtable import (
    BufferConfig,
    SessionWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    TopologyTestDriver,
    Windowed,
)
from streamtable.errors import ProcessingError, TopologyError


def _driver(cache: bool, buffer: BufferConfig | None = None, sessions: bool = False):
    b = StreamsBuilder()
    windows = (SessionWindows.of_inactivity_gap(4).with_grace(5) if sessions
               else TimeWindows.of(10).with_grace(5))
    (b.stream("clicks").group_by_key().windowed_by(windows).count("counts")
     .suppress(Suppressed.until_window_closes(buffer))
     .to_stream(lambda w, v: f"{w.key}@{w.start}-{w.end}").to("final"))
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 10**7 if cache else 0})
    return driver, driver.create_input_topic("clicks"), driver.create_output_topic("final")


@pytest.mark.parametrize("cache", [True, False])
def test_one_final_count_per_window_once_it_closes(cache):
    driver, clicks, final = _driver(cache)
    for ts in (1, 3, 8, 12):
        clicks.pipe_input("a", "x", timestamp=ts)
    assert final.read_records() == []  # stream time 12 < 10 + 5: [0, 10) still open
    clicks.pipe_input("b", "x", timestamp=14)
    assert final.read_records() == []
    clicks.pipe_input("a", "x", timestamp=15)  # closes [0, 10)
    assert [(r.key, r.value, r.timestamp) for r in final.read_records()] == [("a@0-10", 3, 8)]
    clicks.pipe_input("a", "x", timestamp=2)  # late: dropped by the aggregation, no change
    clicks.pipe_input("a", "x", timestamp=40)  # closes [10, 20) for a and b
    assert sorted(final.read_key_values()) == [("a@10-20", 2), ("b@10-20", 1)]
    assert driver.dropped_records == {"late record for a closed window": 1}


@pytest.mark.parametrize("cache", [True, False])
def test_windows_closing_at_one_time_leave_in_key_order(cache):
    """Kafka Streams forwards the keys a buffer holds under one time by their bytes: the windows
    of one close leave in key order, whatever order they arrived in."""
    driver, clicks, final = _driver(cache)
    keys = ["m", "b", "z", "a", "q", "c"]
    for i, key in enumerate(keys):
        clicks.pipe_input(key, "x", timestamp=i)
    clicks.pipe_input("y", "x", timestamp=12)  # [10, 20) of y: held under a later time
    clicks.pipe_input("d", "x", timestamp=9)  # one more key for [0, 10), after the others
    clicks.pipe_input("y", "x", timestamp=15)  # closes [0, 10)
    assert [r.key for r in final.read_records()] == [
        f"{k}@0-10" for k in sorted([*keys, "d"])]
    clicks.pipe_input("y", "x", timestamp=25)  # closes [10, 20)
    assert final.read_key_values() == [("y@10-20", 2)]


def test_session_windows_emit_each_final_session_once():
    driver, clicks, final = _driver(cache=True, sessions=True)
    for ts in (0, 3, 6, 30):
        clicks.pipe_input("a", "x", timestamp=ts)
    # [0, 6] ended at 6: closed once stream time reached 6 + 5; the replaced sessions
    # [0, 0] and [0, 3] were never final, so they are never emitted
    assert final.read_key_values() == [("a@0-6", 3)]


def test_a_full_buffer_stops_with_an_error():
    driver, clicks, _ = _driver(cache=False, buffer=BufferConfig.max_records_of(2))
    clicks.pipe_input("a", "x", timestamp=1)
    clicks.pipe_input("b", "x", timestamp=1)
    with pytest.raises(ProcessingError, match="suppression buffer .* is full"):
        clicks.pipe_input("c", "x", timestamp=1)


def test_suppress_needs_a_windowed_table_and_a_strict_buffer():
    b = StreamsBuilder()
    with pytest.raises(TopologyError, match="windowed"):
        b.stream("in").group_by_key().count().suppress(Suppressed.until_window_closes())
    with pytest.raises(ValueError, match="shuts down when full"):
        Suppressed.until_window_closes(BufferConfig.max_records_of(5).emit_early_when_full())


@pytest.mark.parametrize("seed", range(5))
def test_batches_give_one_final_result_per_window_as_record_by_record(seed):
    """With a record cache holding a whole batch, changes reach the suppression out of time
    order; still each window is forwarded once, with its final count."""
    import random

    rng = random.Random(seed)
    times = [i * 1000 + rng.randrange(-8000, 0) for i in range(1, 200)]
    keys = [f"k{rng.randrange(3)}" for _ in times]
    cuts = set(rng.sample(range(1, 199), 4))
    results = []
    for batch_mode in (False, True):
        b = StreamsBuilder()
        (b.stream("in").group_by_key().windowed_by(TimeWindows.of(10_000).with_grace(3000))
         .count("counts").suppress(Suppressed.until_window_closes())
         .to_stream(lambda w, v: f"{w.key}@{w.start}").to("final"))
        driver = TopologyTestDriver(b.build(), batch_mode=batch_mode)
        topic = driver.create_input_topic("in")
        for i, (k, ts) in enumerate(zip(keys, times, strict=True)):
            if batch_mode and i in cuts:
                driver.run_batch()
            topic.pipe_input(k, "x", timestamp=max(ts, 0))
        if batch_mode:
            driver.run_batch()
        results.append(driver.create_output_topic("final").read_key_values())
    record_mode, batched = results
    assert len({k for k, _ in batched}) == len(batched)  # once per window
    assert sorted(batched) == sorted(record_mode)
    assert len(batched) > 10


def test_emit_strategy_on_window_close_forwards_final_results_only():
    from streamtable import EmitStrategy

    b = StreamsBuilder()
    (b.stream("clicks").group_by_key()
     .windowed_by(TimeWindows.of(10).with_grace(5))
     .emit_strategy(EmitStrategy.on_window_close())
     .count("counts")
     .to_stream(lambda w, v: f"{w.key}@{w.start}").to("final"))
    driver = TopologyTestDriver(b.build())
    clicks = driver.create_input_topic("clicks")
    for ts in (1, 3, 12, 30):
        clicks.pipe_input("a", "x", timestamp=ts)
    assert driver.create_output_topic("final").read_key_values() == [("a@0", 2), ("a@10", 1)]
    # intermediate results stay queryable until the store's retention (10 + 5) expires them
    assert driver.get_window_store("counts").fetch_all() == [(Windowed("a", 30, 40), 1)]


def test_kafka_final_results_for_session_windows():
    """SuppressScenarioTest.shouldSupportFinalResultsForSessionWindows: gap 5 without grace,
    caching off; the raw changes and the final results, with their timestamps."""
    b = StreamsBuilder()
    counts = (b.stream("input").group_by(lambda k, v: k)
              .windowed_by(SessionWindows.of_inactivity_gap(5))
              .count("counts"))
    (counts.suppress(Suppressed.until_window_closes())
     .to_stream(lambda w, v: f"[{w.key}@{w.start}/{w.end}]").to("output-suppressed"))
    counts.to_stream(lambda w, v: f"[{w.key}@{w.start}/{w.end}]").to("output-raw")
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 0})
    topic = driver.create_input_topic("input")
    for key, ts in [("k1", 0), ("k1", 5), ("k1", 1), ("k2", 11), ("k1", 5), ("k1", 30)]:
        topic.pipe_input(key, "v1", timestamp=ts)

    def read(name):
        return [(r.key, r.value, r.timestamp)
                for r in driver.create_output_topic(name).read_records()]

    assert read("output-raw") == [
        ("[k1@0/0]", 1, 0), ("[k1@0/0]", None, 0), ("[k1@0/5]", 2, 5), ("[k1@0/5]", None, 5),
        ("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11), ("[k1@30/30]", 1, 30)]
    assert read("output-suppressed") == [("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11)]
