"""A table's source reads its topic with the serdes given in its ``Materialized`` when it names
none of its own (Kafka Streams' StreamsBuilderTest.shouldUseSerdesDefinedInMaterializedTo
ConsumeTable / ConsumeGlobalTable), and with its own where it names them."""

from __future__ import annotations

import pytest

from streamtable import Materialized, StreamsBuilder, TopologyTestDriver
from streamtable.engine.wiring import external_topic_serdes
from streamtable.errors import DeserializationError
from streamtable.serde import LONG, STRING


def _long_string(name: str) -> Materialized:
    return Materialized.as_(name).with_key_serde("long").with_value_serde("string")


@pytest.mark.parametrize("batch_mode", [False, True])
def test_a_table_reads_its_topic_with_the_serdes_of_its_materialized(batch_mode):
    b = StreamsBuilder()
    results = {}
    b.table("topic", materialized=_long_string("store")).to_stream().foreach(results.__setitem__)
    driver = TopologyTestDriver(b.build(), batch_mode=batch_mode)
    topic = driver.create_input_topic("topic", LONG, STRING)
    topic.pipe_input(1, "value1")
    topic.pipe_input(2, "value2")
    if batch_mode:
        driver.run_batch()
    store = driver.get_key_value_store("store")
    assert (store.get(1), store.get(2)) == ("value1", "value2")
    assert results == {1: "value1", 2: "value2"}


@pytest.mark.parametrize("batch_mode", [False, True])
def test_a_global_table_reads_its_topic_with_the_serdes_of_its_materialized(batch_mode):
    b = StreamsBuilder()
    names = b.global_table("topic", materialized=_long_string("store"))
    (b.stream("orders", key_serde="long", value_serde="long")
     .join(names, lambda k, v: v, lambda order, name: name).to("named", value_serde="string"))
    driver = TopologyTestDriver(b.build(), batch_mode=batch_mode)
    topic = driver.create_input_topic("topic", LONG, STRING)
    topic.pipe_input(1, "value1")
    topic.pipe_input(2, "value2")
    driver.create_input_topic("orders", LONG, LONG).pipe_input(7, 2)
    if batch_mode:
        driver.run_batch()
    store = driver.get_key_value_store("store")
    assert (store.get(1), store.get(2)) == ("value1", "value2")
    assert driver.create_output_topic("named", value_serde=STRING).read_key_values() == [
        (7, "value2")]


def test_the_source_serdes_come_first_and_each_missing_one_from_materialized():
    b = StreamsBuilder()
    b.table("both", materialized=_long_string("a"), key_serde="string", value_serde="json")
    b.table("value-only", materialized=_long_string("b"), value_serde="json")
    b.global_table("global", materialized=Materialized.as_("c").with_value_serde("string"))
    b.table("named-only", materialized="d")
    from streamtable.config import StreamsConfig
    from streamtable.serde import JSON

    serdes = external_topic_serdes(b.build(), StreamsConfig({}))
    assert serdes["both"] == (STRING, JSON)
    assert serdes["value-only"] == (LONG, JSON)
    assert serdes["global"] == (JSON, STRING)
    assert serdes["named-only"] == (JSON, JSON)
    topology = b.build()
    assert (topology.stores["b"].key_serde, topology.stores["b"].value_serde) == (LONG, JSON)


def test_without_serdes_the_defaults_read_the_topic():
    b = StreamsBuilder()
    b.table("topic", materialized="store")
    driver = TopologyTestDriver(b.build())
    with pytest.raises(DeserializationError):
        driver.create_input_topic("topic", LONG, STRING).pipe_input(1, "value1")
