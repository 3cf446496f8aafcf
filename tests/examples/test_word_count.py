"""Word count from the concepts seed, and the KGroupedStream aggregations."""

from __future__ import annotations

import re

from streamtable import StreamsBuilder, TopologyTestDriver

PATTERN = re.compile(r"\W+")


def word_count_topology():
    builder = StreamsBuilder()
    counts = (
        builder.stream("streams-plaintext-input", value_serde="string")
        .flat_map_values(lambda line: [w for w in PATTERN.split(line.lower()) if w])
        .group_by(lambda key, word: word)
        .count(materialized="counts-store")
    )
    counts.to_stream().to("streams-wordcount-output", key_serde="string", value_serde="long")
    return builder.build()


def test_word_count_counts_every_word_with_caching_one_update_per_word_per_line():
    driver = TopologyTestDriver(word_count_topology())
    lines = driver.create_input_topic("streams-plaintext-input", value_serde="string")
    out = driver.create_output_topic("streams-wordcount-output", "string", "long")
    lines.pipe_input(None, "all streams lead to kafka")
    assert out.read_key_values() == [
        ("all", 1), ("streams", 1), ("lead", 1), ("to", 1), ("kafka", 1)
    ]
    lines.pipe_input(None, "hello kafka streams")
    assert out.read_key_values() == [("hello", 1), ("kafka", 2), ("streams", 2)]
    lines.pipe_input(None, "join kafka summit, kafka!")
    # with caching, "kafka" twice in one line is one update
    assert out.read_key_values() == [("join", 1), ("kafka", 4), ("summit", 1)]
    store = driver.get_key_value_store("counts-store")
    assert store.get("kafka") == 4
    assert store.get("streams") == 2
    assert list(store.range("s", "t")) == [("streams", 2), ("summit", 1)]


def test_word_count_without_caching_emits_every_increment():
    driver = TopologyTestDriver(word_count_topology(), {"cache.max.bytes.buffering": 0})
    lines = driver.create_input_topic("streams-plaintext-input", value_serde="string")
    out = driver.create_output_topic("streams-wordcount-output", "string", "long")
    lines.pipe_input(None, "kafka kafka kafka")
    assert out.read_key_values() == [("kafka", 1), ("kafka", 2), ("kafka", 3)]


def test_stream_reduce_and_aggregate():
    builder = StreamsBuilder()
    grouped = builder.stream("sales").group_by_key()
    grouped.reduce(lambda a, b: a + b, "total").to_stream().to("totals")
    grouped.aggregate(lambda: [], lambda k, v, agg: agg + [v], "history")
    driver = TopologyTestDriver(builder.build())
    sales = driver.create_input_topic("sales")
    for k, v in [("a", 1), ("b", 5), ("a", 2), ("a", 3)]:
        sales.pipe_input(k, v)
    assert driver.get_key_value_store("total").to_dict() == {"a": 6, "b": 5}
    assert driver.get_key_value_store("history").to_dict() == {"a": [1, 2, 3], "b": [5]}
    assert driver.create_output_topic("totals").read_key_values() == [
        ("a", 1), ("b", 5), ("a", 3), ("a", 6)
    ]


def test_aggregation_drops_and_counts_null_keys():
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().count("c")
    driver = TopologyTestDriver(builder.build())
    topic = driver.create_input_topic("in")
    topic.pipe_input(None, "x")
    topic.pipe_input("k", "y")
    assert driver.get_key_value_store("c").to_dict() == {"k": 1}
    assert sum(driver.dropped_records.values()) == 1
