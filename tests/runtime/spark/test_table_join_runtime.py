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


def test_tables_read_their_topics_with_the_serdes_of_their_materialized_on_spark(spark, tmp_path):
    """Kafka Streams' shouldUseSerdesDefinedInMaterializedToConsume(Global)Table on Spark:
    long keys and string values, named only in the stores' Materialized."""
    from streamtable import Materialized
    from streamtable.serde import LONG, STRING

    def long_string(name):
        return Materialized.as_(name).with_key_serde("long").with_value_serde("string")

    b = StreamsBuilder()
    b.table("prices", materialized=long_string("price-store")).to_stream().to(
        "price-changes", key_serde="long", value_serde="string")
    names = b.global_table("names", materialized=long_string("name-store"))
    (b.stream("orders", key_serde="long", value_serde="long")
     .join(names, lambda k, v: v, lambda order, name: name)
     .to("named", key_serde="long", value_serde="string"))
    topology = b.build()
    output = MemoryOutput()
    app = StreamsApp(topology, "materialized-serdes", state_dir=str(tmp_path), spark=spark,
                     output=output)
    app.prepare({"prices": 1, "names": 1, "orders": 1})

    def row(topic, offset, key, value, serde=STRING):
        return (topic, 0, offset, 1000 + offset, LONG.serialize(topic, key),
                serde.serialize(topic, value), None)

    first = [row("prices", 0, 1, "value1"), row("prices", 1, 2, "value2"),
             row("names", 0, 1, "value1"), row("names", 1, 2, "value2")]
    app.process_batch(spark.createDataFrame(first, SOURCE_SCHEMA), 0)
    app.process_batch(spark.createDataFrame([row("orders", 0, 7, 2, LONG)], SOURCE_SCHEMA), 1)
    assert app.store("price-store").to_dict() == {1: "value1", 2: "value2"}
    written = [(r["topic"], LONG.deserialize(r["topic"], r["key"]),
                STRING.deserialize(r["topic"], r["value"]))
               for n in sorted(output.batches) for r in output.batches[n]]
    assert sorted(written) == [("named", 7, "value2"), ("price-changes", 1, "value1"),
                               ("price-changes", 2, "value2")]
