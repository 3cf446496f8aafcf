"""Stateless KStream operators and KTable filter/map_values/to_stream."""

from __future__ import annotations

import pytest

from streamtable import StreamsBuilder, TopologyError, TopologyTestDriver


def run(builder, topic, pairs, out="out", **serdes):
    driver = TopologyTestDriver(builder.build())
    t = driver.create_input_topic(topic)
    for i, (k, v) in enumerate(pairs):
        t.pipe_input(k, v, timestamp=1000 + i)
    return driver, driver.create_output_topic(out, **serdes)


def test_filter_map_flat_map_select_key_keep_timestamps():
    b = StreamsBuilder()
    (b.stream("in")
        .filter_not(lambda k, v: v < 0)
        .map(lambda k, v: (v, k))
        .flat_map(lambda k, v: [(k, v), (k * 10, v)])
        .select_key(lambda k, v: f"key-{k}")
        .map_values(lambda k, v: f"{k}:{v}")
        .flat_map_values(lambda v: [v, v.upper()])
        .to("out"))
    driver, out = run(b, "in", [("a", 1), ("b", -1), ("c", 2)])
    records = out.read_records()
    assert [(r.key, r.value) for r in records] == [
        ("key-1", "key-1:a"), ("key-1", "KEY-1:A"), ("key-10", "key-10:a"),
        ("key-10", "KEY-10:A"), ("key-2", "key-2:c"), ("key-2", "KEY-2:C"),
        ("key-20", "key-20:c"), ("key-20", "KEY-20:C"),
    ]
    assert [r.timestamp for r in records] == [1000] * 4 + [1002] * 4


def test_split_routes_to_first_matching_branch_and_merge_joins_streams():
    b = StreamsBuilder()
    branches = (b.stream("in").split(prefix="n-")
                .branch(lambda k, v: v % 2 == 0, name="even")
                .branch(lambda k, v: v % 3 == 0, name="three")
                .default_branch(name="rest"))
    assert set(branches) == {"n-even", "n-three", "n-rest"}
    branches["n-even"].to("even")
    branches["n-three"].to("three")
    branches["n-rest"].merge(branches["n-three"]).to("rest-or-three")
    driver = TopologyTestDriver(b.build())
    t = driver.create_input_topic("in")
    for v in [1, 2, 3, 4, 6, 9]:
        t.pipe_input("k", v)
    assert driver.create_output_topic("even").read_values() == [2, 4, 6]
    assert driver.create_output_topic("three").read_values() == [3, 9]
    assert driver.create_output_topic("rest-or-three").read_values() == [1, 3, 9]


def test_peek_and_foreach_see_every_record():
    seen, peeked = [], []
    b = StreamsBuilder()
    s = b.stream("in").peek(lambda k, v: peeked.append((k, v)))
    s.foreach(lambda k, v: seen.append(v))
    run(b, "in", [("a", 1), ("b", 2)])
    assert peeked == [("a", 1), ("b", 2)]
    assert seen == [1, 2]


def test_table_filter_forwards_tombstone_only_when_row_stops_matching():
    b = StreamsBuilder()
    b.table("in").filter(lambda k, v: v > 10).to_stream().to("out")
    driver, out = run(b, "in", [("a", 5), ("a", 20), ("a", 30), ("a", 1), ("a", 2), ("b", 3)])
    assert out.read_key_values() == [("a", 20), ("a", 30), ("a", None)]


def test_table_map_values_materialized_is_queryable():
    b = StreamsBuilder()
    t = b.table("in").map_values(lambda v: v * 2, materialized="doubled")
    assert t.queryable_store_name == "doubled"
    t.to_stream().to("out")
    driver, out = run(b, "in", [("a", 1), ("b", 2), ("a", None)])
    assert driver.get_key_value_store("doubled").to_dict() == {"b": 4}
    assert out.read_key_values() == [("a", 2), ("b", 4), ("a", None)]


def test_stream_to_table_keeps_latest_per_key():
    b = StreamsBuilder()
    b.stream("in").to_table("latest")
    driver, _ = run(b, "in", [("a", 1), ("b", 2), ("a", 3), ("b", None)])
    assert driver.get_key_value_store("latest").to_dict() == {"a": 3}


def test_group_by_key_after_key_change_repartitions():
    b = StreamsBuilder()
    b.stream("in").select_key(lambda k, v: v).group_by_key().count("by-value")
    topology = b.build()
    assert len(topology.subtopologies) == 2
    assert topology.repartition_topics == ["by-value-repartition"]
    b2 = StreamsBuilder()
    b2.stream("in").group_by_key().count("by-key")
    assert len(b2.build().subtopologies) == 1


def test_duplicate_store_and_source_topic_are_rejected():
    b = StreamsBuilder()
    b.table("t", materialized="s")
    with pytest.raises(TopologyError, match="store named 's'"):
        b.table("u", materialized="s")
    with pytest.raises(TopologyError, match="topic 't' is already read"):
        b.stream("t")
    with pytest.raises(TopologyError, match="empty"):
        StreamsBuilder().build()


def test_range_prefix_scan_and_entries_of_store():
    b = StreamsBuilder()
    b.table("in", materialized="s")
    driver, _ = run(b, "in", [("apple", 1), ("apricot", 2), ("banana", 3), ("cherry", 4)])
    store = driver.get_key_value_store("s")
    assert list(store.prefix_scan("ap")) == [("apple", 1), ("apricot", 2)]
    assert list(store.range("apricot", "banana")) == [("apricot", 2), ("banana", 3)]
    assert list(store.range(None, "apple")) == [("apple", 1)]
    assert store.approximate_num_entries() == 4
