"""Primary-key table-table joins on Spark equal the test driver, over random changes of both
tables in several micro-batches (caching on: the final tables and the last value per key)."""

from __future__ import annotations

import random

import pytest
from tests.runtime.spark.harness import SOURCE_SCHEMA, MemoryOutput, last_per_key
from tests.runtime.spark.test_fk_join_runtime import rows

from streamtable import StreamsBuilder, TopologyTestDriver
from streamtable.runtime.spark import StreamsApp

pytestmark = pytest.mark.spark


def _topology(mode: str):
    b = StreamsBuilder()
    left, right = b.table("left", materialized="left-store"), b.table("right")
    join = {"inner": left.join, "left": left.left_join, "outer": left.outer_join}[mode]
    join(right, lambda lv, rv: [lv, rv], materialized="joined").to_stream().to("out")
    return b.build()


@pytest.mark.parametrize("mode,seed", [("inner", 1), ("left", 2), ("outer", 3)])
def test_table_join_on_spark_equals_driver(spark, tmp_path, mode, seed):
    rng = random.Random(seed)
    events = [(rng.choice(["left", "right"]), rng.randrange(8),
               None if rng.random() < 0.25 else rng.randrange(100)) for _ in range(90)]
    topology = _topology(mode)
    driver = TopologyTestDriver(topology)
    topics = {t: driver.create_input_topic(t) for t in ("left", "right")}
    for i, (topic, k, v) in enumerate(events):
        topics[topic].pipe_input(k, v, timestamp=1000 + i)
    expected = driver.create_output_topic("out").read_key_values()
    output = MemoryOutput()
    app = StreamsApp(topology, f"pk-{mode}", state_dir=str(tmp_path), spark=spark, output=output)
    app.prepare({"left": 2, "right": 2})
    cuts = [0, 25, 60, 90]
    for batch, (lo, hi) in enumerate(zip(cuts, cuts[1:], strict=False)):
        app.process_batch(spark.createDataFrame(rows(events[lo:hi], 2, lo), SOURCE_SCHEMA), batch)
    assert app.store("joined").to_dict() == driver.get_key_value_store("joined").to_dict()
    assert last_per_key(output.topic("out")) == last_per_key(expected)
