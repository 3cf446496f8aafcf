"""The "not looking at Facebook" app (stream-table join, hopping windows) on Spark equals the
test driver, micro-batch by micro-batch over two partitions."""

from __future__ import annotations

import random

import pytest
from tests.spark.harness import SOURCE_SCHEMA, MemoryOutput
from tests.spark.test_fk_join_runtime import rows

from streamtable import TopologyTestDriver
from streamtable.cli import load_app
from streamtable.runtime.spark import StreamsApp

pytestmark = pytest.mark.spark

MIN = 60_000


def test_not_looking_at_facebook_on_spark_equals_driver(spark, tmp_path):
    app_module = load_app("examples/not_looking_at_facebook/app.py")
    topology = app_module.build_topology(grace_ms=MIN)
    rng = random.Random(5)
    events = []
    for _ in range(120):
        user = f"user{rng.randrange(5)}"
        if rng.random() < 0.2:
            events.append(("open", user, rng.choice(["Open", "Closed"])))
        else:
            events.append(("tick", user, "tick"))
    # JSON keys and values like every topic of the test driver's default serdes here
    config = {"application.id": "fb"}
    driver = TopologyTestDriver(topology, config)
    inputs = {t: driver.create_input_topic(t) for t in ("open", "tick")}
    for i, (topic, k, v) in enumerate(events):
        inputs[topic].pipe_input(k, v, timestamp=1000 + i * 10_000)
    app = StreamsApp(topology, "fb", state_dir=str(tmp_path), spark=spark,
                     output=MemoryOutput(), config=config)
    app.prepare({"open": 2, "tick": 2})
    for batch, (lo, hi) in enumerate([(0, 50), (50, 120)]):
        chunk = [(t, 1000 + (lo + j) * 10_000, k, v)
                 for j, (t, k, v) in enumerate(events[lo:hi])]
        frame = rows([(t, k, v) for t, _, k, v in chunk], 2, lo)
        frame = [(r[0], r[1], r[2], ts, r[4], r[5], r[6])
                 for r, (_, ts, _, _) in zip(frame, chunk, strict=True)]
        app.process_batch(spark.createDataFrame(frame, SOURCE_SCHEMA), batch)
    for store in ("open-store", "notification-counts-store"):
        assert app.store(store).to_dict() == driver.get_key_value_store(store).to_dict(), store
    assert len(app.store("notification-counts-store").to_dict()) > 20


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
    from tests.spark.harness import per_key

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
