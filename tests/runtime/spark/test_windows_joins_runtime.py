"""The "not looking at Facebook" app (wall-clock ticks joined to a table, hopping windows,
suppression), session windows and suppression on Spark equal the test driver."""

from __future__ import annotations

import random

import pytest
from tests.runtime.spark.harness import SOURCE_SCHEMA, MemoryOutput
from tests.runtime.spark.test_fk_join_runtime import rows

from streamtable import TopologyTestDriver
from streamtable.cli import load_app
from streamtable.runtime.spark import StreamsApp

pytestmark = pytest.mark.spark

MIN = 60_000


def test_not_looking_at_facebook_on_spark_equals_driver(spark, tmp_path):
    """Wall-clock ticks joined to the open/closed table, windowed counts suppressed until their
    windows close: batch by batch (several without records) what the driver's batch mode
    gives, at the same wall-clock times."""
    import json

    from streamtable.serde import JSON

    app_module = load_app("examples/not_looking_at_facebook/app.py")
    topology = app_module.build_topology(grace_ms=MIN)
    rng = random.Random(5)
    start = 1_700_000_000_000 // MIN * MIN
    batches = []  # (open/close events, wall-clock time of the batch)
    for b in range(16):
        events = [(f"user{rng.randrange(5)}", rng.choice(["Open", "Closed"]))
                  for _ in range(rng.choice([0, 0, 3, 8]))]
        batches.append((events, start + b * MIN + rng.randrange(0, 50_000)))
    config = {"application.id": "fb"}  # JSON keys and values, the driver's default serdes
    driver = TopologyTestDriver(topology, config, initial_wall_clock_time_ms=batches[0][1],
                                batch_mode=True)
    open_ = driver.create_input_topic("open")
    outputs = {t: driver.create_output_topic(t) for t in ("notifications",
                                                           "notification-counts")}
    expected = []
    for events, now in batches:
        for k, v in events:
            open_.pipe_input(k, v, timestamp=now - 1000)
        driver.advance_wall_clock_time(now - driver.wall_clock_ms)
        driver.run_batch()
        expected.append({t: o.read_key_values() for t, o in outputs.items()})
    times = iter([now for _, now in batches])
    output = MemoryOutput()
    app = StreamsApp(topology, "fb", state_dir=str(tmp_path), spark=spark, output=output,
                     config=config, clock=lambda: next(times))
    app.prepare({"open": 1})
    offset = 0
    for b, (events, now) in enumerate(batches):
        frame = [("open", 0, offset + i, now - 1000, json.dumps(k).encode(),
                  JSON.serialize("open", v), None) for i, (k, v) in enumerate(events)]
        offset += len(events)
        app.process_batch(spark.createDataFrame(frame, SOURCE_SCHEMA), b)
    got = [{t: [(JSON.deserialize(t, r["key"]), JSON.deserialize(t, r["value"]))
                for r in output.batches.get(b, []) if r["topic"] == t] for t in outputs}
           for b in range(len(batches))]
    assert got == expected
    assert sum(len(e["notification-counts"]) for e in expected) > 10
    assert sum(1 for (events, _), e in zip(batches, expected, strict=True)
               if not events and e["notifications"]) >= 3  # ticks of batches without records
    for store in ("open-store", "notification-counts-store"):
        assert app.store(store).to_dict() == driver.get_key_value_store(store).to_dict(), store


def test_session_windows_on_spark_equal_the_driver(spark, tmp_path):
    from streamtable import Materialized, SessionWindows, StreamsBuilder

    b = StreamsBuilder()
    # kept for the whole run (the default, gap + grace, would keep only the last hour's)
    (b.stream("clicks").group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap(5 * MIN).with_grace(30 * MIN))
     .count(Materialized.as_("sessions").with_retention(1000 * MIN)))
    topology = b.build()
    rng = random.Random(9)
    times = sorted(rng.randrange(0, 600 * MIN) for _ in range(150))
    events = [("clicks", f"user{rng.randrange(4)}", "click") for _ in times]
    driver = TopologyTestDriver(topology)
    clicks = driver.create_input_topic("clicks")
    for (_, k, v), ts in zip(events, times, strict=True):
        clicks.pipe_input(k, v, timestamp=ts)
    app = StreamsApp(topology, "sessions", state_dir=str(tmp_path), spark=spark,
                     output=MemoryOutput())
    app.prepare({"clicks": 2})
    for batch, (lo, hi) in enumerate([(0, 60), (60, 110), (110, 150)]):
        frame = [(r[0], r[1], r[2], ts, r[4], r[5], r[6])
                 for r, ts in zip(rows(events[lo:hi], 2, lo), times[lo:hi], strict=True)]
        app.process_batch(spark.createDataFrame(frame, SOURCE_SCHEMA), batch)
    expected = driver.get_key_value_store("sessions").to_dict()
    assert app.store("sessions").to_dict() == expected
    assert len(expected) > 10


@pytest.mark.parametrize("cache", [True, False])
def test_suppressed_final_results_on_spark_equal_the_driver(spark, tmp_path, cache):
    from tests.runtime.spark.harness import per_key

    from streamtable import StreamsBuilder, Suppressed, TimeWindows

    b = StreamsBuilder()
    (b.stream("clicks").group_by_key()
     .windowed_by(TimeWindows.of(10 * MIN).with_grace(2 * MIN)).count("counts")
     .suppress(Suppressed.until_window_closes())
     .to_stream(lambda w, v: f"{w.key}@{w.start}").to("final"))
    topology = b.build()
    config = {"cache.max.bytes.buffering": 10**7 if cache else 0}
    rng = random.Random(11)
    times = [i * 20_000 + rng.randrange(-150_000, 0) for i in range(1, 160)]  # out of order
    events = [("clicks", f"user{rng.randrange(3)}", "click") for _ in times]
    driver = TopologyTestDriver(topology, config)
    clicks = driver.create_input_topic("clicks")
    for (_, k, v), ts in zip(events, times, strict=True):
        clicks.pipe_input(k, v, timestamp=max(ts, 0))
    expected = driver.create_output_topic("final").read_key_values()
    output = MemoryOutput()
    app = StreamsApp(topology, f"suppress-{cache}", state_dir=str(tmp_path), spark=spark,
                     output=output, config=config)
    app.prepare({"clicks": 1})
    for batch, (lo, hi) in enumerate([(0, 50), (50, 100), (100, 159)]):
        frame = [(r[0], r[1], r[2], max(ts, 0), r[4], r[5], r[6])
                 for r, ts in zip(rows(events[lo:hi], 1, lo), times[lo:hi], strict=True)]
        app.process_batch(spark.createDataFrame(frame, SOURCE_SCHEMA), batch)
    got = output.topic("final")
    assert per_key(got) == per_key(expected)  # exactly one final count per closed window
    assert len(expected) > 10 and len(set(k for k, _ in expected)) == len(expected)


@pytest.mark.parametrize("cache", [True, False])
def test_sessions_at_the_retention_edge_on_spark_equal_kafka_and_the_driver(
        spark, tmp_path, cache):
    """Default retention (gap 20 + grace 0), micro-batches cut at the edges: a record merges
    with the session of its key ending a gap before it, also when that session was stored by
    an earlier batch, and emit-final and suppress give each merged session once, one ms after
    its end plus the gap (Kafka Streams' KStreamSessionWindowAggregate)."""
    import json

    from tests.runtime.spark.harness import last_per_key, per_key

    from streamtable import EmitStrategy, SessionWindows, StreamsBuilder, Suppressed
    from streamtable.serde import JSON

    b = StreamsBuilder()
    windowed = b.stream("clicks").group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap(20))
    sessions = windowed.count("sessions")
    sessions.to_stream(lambda w, v: f"{w.key}@{w.start}-{w.end}").to("changes")
    (sessions.suppress(Suppressed.until_window_closes())
     .to_stream(lambda w, v: f"{w.key}@{w.start}-{w.end}").to("suppressed"))
    (windowed.emit_strategy(EmitStrategy.on_window_close()).count("final-sessions")
     .to_stream(lambda w, v: f"{w.key}@{w.start}-{w.end}").to("final"))
    topology = b.build()
    batches = [[("k", 70)], [("k", 90)], [("k", 100), ("o", 120)],
               [("o", 121), ("a", 200), ("x", 220)], [("a", 220), ("x", 240)], [("y", 241)],
               [("z", 300)]]
    config = {"cache.max.bytes.buffering": 10**7 if cache else 0}
    driver = TopologyTestDriver(topology, config)
    clicks = driver.create_input_topic("clicks")
    for k, ts in (e for batch in batches for e in batch):
        clicks.pipe_input(k, "click", timestamp=ts)
    expected = {t: driver.create_output_topic(t).read_key_values()
                for t in ("changes", "suppressed", "final")}
    output = MemoryOutput()
    app = StreamsApp(topology, f"session-edge-{cache}", state_dir=str(tmp_path), spark=spark,
                     output=output, config=config)
    app.prepare({"clicks": 1})
    offset = 0
    for n, batch in enumerate(batches):
        frame = [("clicks", 0, offset + i, ts, json.dumps(k).encode(),
                  JSON.serialize("clicks", "click"), None) for i, (k, ts) in enumerate(batch)]
        offset += len(batch)
        app.process_batch(spark.createDataFrame(frame, SOURCE_SCHEMA), n)
    finals = {"k@70-100": 3, "o@120-121": 2, "a@200-220": 2, "x@220-240": 2, "y@241-241": 1}
    for topic in ("suppressed", "final"):
        got = output.topic(topic)
        assert sorted(got) == sorted(expected[topic]) == sorted(finals.items()), topic
    got = output.topic("changes")
    assert last_per_key(got) == last_per_key(expected["changes"])
    assert {k: v for k, v in last_per_key(got).items() if k in finals} == finals
    if not cache:
        assert per_key(got) == per_key(expected["changes"])
    assert app.store("sessions").to_dict() == driver.get_key_value_store("sessions").to_dict()
