"""The Processor API's stores on Spark, batch by batch with replays, equal to the test driver's
batch mode: a window store with retention (its stream time is task state, so a replayed or
later batch drops exactly what the driver drops), a table's store read with timestamps, and a
global store kept by a user processor."""

from __future__ import annotations

import json
import sys

import pytest
from pyspark import cloudpickle
from tests.processors import papi_topologies
from tests.processors.papi_topologies import global_profiles, priced_orders, windowed_clicks
from tests.processors.test_processor_api_stores import CLICKS, EXPECTED
from tests.runtime.spark.harness import SOURCE_SCHEMA, MemoryOutput

from streamtable import TopologyTestDriver
from streamtable.runtime.spark import StreamsApp
from streamtable.serde import JSON

pytestmark = pytest.mark.spark

# Spark's workers cannot import the tests' modules
cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(papi_topologies)


def rows(spark, batch, offsets):
    """``batch``: ``(topic, key, value, timestamp)``; offsets continue per topic."""
    out = []
    for topic, key, value, ts in batch:
        offset = offsets.get(topic, 0)
        offsets[topic] = offset + 1
        out.append((topic, 0, offset, ts, json.dumps(key).encode(),
                    None if value is None else JSON.serialize(topic, value), None))
    return spark.createDataFrame(out, SOURCE_SCHEMA)


def run_both(spark, tmp_path, topology, app_id, batches, topics, replays=(1, 2),
             dsl_store="in_memory"):
    """Run ``batches`` on the driver (batch mode) and on Spark (replaying ``replays``);
    return the driver, the app and the app's output."""
    driver = TopologyTestDriver(topology, {"application.id": app_id}, batch_mode=True)
    inputs = {t: driver.create_input_topic(t) for t in topics}
    for batch in batches:
        for topic, key, value, ts in batch:
            inputs[topic].pipe_input(key, value, timestamp=ts)
        driver.run_batch()
    output = MemoryOutput()
    app = StreamsApp(topology, app_id, state_dir=str(tmp_path), spark=spark, output=output,
                     config={"default.dsl.store": dsl_store})
    app.prepare(dict.fromkeys(topics, 1))
    offsets: dict[str, int] = {}
    for b, batch in enumerate(batches):
        frame = rows(spark, batch, offsets)
        app.process_batch(frame, b)
        if b in replays:  # a crash after the batch: Spark replays it with the same input
            app.process_batch(frame, b)
    return driver, app, output


def spark_out(output, topic, batches):
    return [(JSON.deserialize(topic, r["key"]), JSON.deserialize(topic, r["value"]))
            for b in range(batches) for r in output.batches.get(b, []) if r["topic"] == topic]


@pytest.mark.parametrize("dsl_store", ["in_memory", "rocksdb"])
def test_window_store_on_spark_with_replays_equals_the_driver(spark, tmp_path, dsl_store):
    cuts = [CLICKS[:3], CLICKS[3:5], CLICKS[5:8], CLICKS[8:]]
    batches = [[("clicks-in", k, "click", ts) for k, ts in cut] for cut in cuts]
    driver, app, output = run_both(spark, tmp_path, windowed_clicks(), f"papi-w-{dsl_store}",
                                   batches, ["clicks-in"], dsl_store=dsl_store)
    assert driver.create_output_topic("clicks-out").read_key_values() == EXPECTED
    assert spark_out(output, "clicks-out", len(batches)) == EXPECTED
    queried = app.store("clicks")
    reference = driver.get_window_store("clicks")
    for key in ("a", "b"):
        assert queried.fetch(key, 0, 60_000) == reference.fetch(key, 0, 60_000), key


def test_a_tables_store_read_with_timestamps_on_spark_equals_the_driver(spark, tmp_path):
    batches = [
        [("prices", "AAPL", 190, 1_000), ("orders", "AAPL", 5, 2_000), ("orders", "FB", 1, 2_500)],
        [("prices", "AAPL", 191, 3_000), ("orders", "AAPL", 7, 4_000)],
        [("prices", "FB", 300, 5_000), ("orders", "FB", 2, 6_000)],
    ]
    driver, _, output = run_both(spark, tmp_path, priced_orders(), "papi-ts", batches,
                                 ["prices", "orders"])
    expected = driver.create_output_topic("priced").read_key_values()
    assert expected == [("AAPL", [5, 190, 1_000]), ("FB", None), ("AAPL", [7, 191, 3_000]),
                        ("FB", [2, 300, 5_000])]
    assert spark_out(output, "priced", len(batches)) == expected


def test_a_global_store_kept_by_a_user_processor_on_spark_equals_the_driver(spark, tmp_path):
    batches = [
        [("profiles-in", "u1", {"seq": 2, "name": "Ann"}, 10),
         ("profiles-in", "u1", {"seq": 1, "name": "stale"}, 11),
         ("visits", "v1", "u1", 20), ("visits", "v2", "u2", 21)],
        [("profiles-in", "u2", {"seq": 1, "name": "Bob"}, 30), ("visits", "v3", "u2", 25)],
        [("profiles-in", "u1", None, 40), ("visits", "v4", "u1", 50)],
        [("visits", "v5", "u2", 60)],
    ]
    driver, app, output = run_both(spark, tmp_path, global_profiles(), "papi-global", batches,
                                   ["profiles-in", "visits"])
    expected = driver.create_output_topic("greetings").read_key_values()
    assert expected == [("v1", "u1:Ann"), ("v2", "u2:None"), ("v3", "u2:Bob"),
                        ("v4", "u1:None"), ("v5", "u2:Bob")]
    assert spark_out(output, "greetings", len(batches)) == expected
    assert app.store("profiles").to_dict() == {"u2": {"seq": 1, "name": "Bob"}}


def test_custom_daily_windows_on_spark_equal_the_driver(spark, tmp_path):
    from tests.processors import custom_windows
    from tests.processors.custom_windows import HOUR, DailyWindows, paris

    from streamtable import StreamsBuilder

    cloudpickle.register_pickle_by_value(custom_windows)
    b = StreamsBuilder()
    (b.stream("sales").group_by_key().windowed_by(DailyWindows("Europe/Paris", grace_ms=HOUR))
     .reduce(lambda a, v: a + v, "per-day")
     .to_stream(lambda w, v: [w.key, w.start, w.end]).to("daily"))
    sales = [("shop", 10, paris(2026, 3, 28, 9)), ("bar", 1, paris(2026, 3, 28, 20)),
             ("shop", 7, paris(2026, 3, 29, 1)), ("shop", 1, paris(2026, 3, 29, 23)),
             ("bar", 2, paris(2026, 3, 30, 0, 10)), ("shop", 4, paris(2026, 3, 29, 22)),
             ("shop", 3, paris(2026, 3, 30, 2)), ("shop", 100, paris(2026, 3, 29, 22)),
             ("bar", 5, paris(2026, 3, 31, 8))]
    batches = [[("sales", k, v, ts) for k, v, ts in sales[i:i + 3]] for i in range(0, 9, 3)]
    driver, app, output = run_both(spark, tmp_path, b.build(), "papi-days", batches, ["sales"])
    expected = driver.create_output_topic("daily").read_key_values()
    # with the record cache, the last change per window per batch; the late record dropped
    assert len(expected) == 7
    assert spark_out(output, "daily", len(batches)) == expected
    # the other days expired: stream time is past their start plus size() and grace
    day31 = paris(2026, 3, 31)
    for key in ("shop", "bar"):
        assert (app.store("per-day").fetch(key, 0, day31)
                == driver.get_window_store("per-day").fetch(key, 0, day31)
                == ([(day31, 5)] if key == "bar" else [])), key
