"""The Spark runtime's ordering and commit rules, checked on the test driver's batch mode."""

from __future__ import annotations

import random

import pytest
from tests.runtime.spark.harness import last_per_key, per_key
from tests.runtime.spark.topologies import random_case, random_input

from streamtable import StreamsBuilder, TimeWindows, TopologyTestDriver
from streamtable.config import StreamsConfig
from streamtable.engine import PartitionGroupOrdering, wire
from streamtable.records import RawRecord


def _seen_after_source(topics: list[str]) -> tuple[StreamsBuilder, list[tuple[str, int]]]:
    """A topology that records (value, timestamp) of every record reaching the merge point."""
    seen: list[tuple[str, int]] = []
    b = StreamsBuilder()
    streams = [b.stream(t) for t in topics]
    merged = streams[0]
    for s in streams[1:]:
        merged = merged.merge(s)
    merged.peek(lambda k, v: seen.append(v))
    return b, seen


def test_each_partition_is_processed_in_offset_order_even_when_timestamps_go_back():
    b, seen = _seen_after_source(["in"])
    driver = TopologyTestDriver(b.build(), batch_mode=True)
    topic = driver.create_input_topic("in")
    for value, ts in [("a", 30), ("b", 10), ("c", 20)]:
        topic.pipe_input("k", value, timestamp=ts)
    assert seen == []  # nothing runs before the batch does
    driver.run_batch()
    assert seen == ["a", "b", "c"]


def test_partitions_of_a_task_are_merged_by_the_timestamp_of_their_next_record():
    """A task reads partition i of each of its co-partitioned topics: it always takes the next
    record of the partition whose head has the smallest timestamp."""
    b, seen = _seen_after_source(["left", "right"])
    driver = TopologyTestDriver(b.build(), batch_mode=True)
    left, right = driver.create_input_topic("left"), driver.create_input_topic("right")
    left.pipe_input("k", "l-a", timestamp=5)
    left.pipe_input("k", "l-b", timestamp=1)  # behind its partition's head
    right.pipe_input("k", "r-a", timestamp=3)
    right.pipe_input("k", "r-b", timestamp=7)
    driver.run_batch()
    # heads 5 vs 3 -> r-a; then 5 vs 7 -> l-a; then l-b (1) before r-b (7)
    assert seen == ["r-a", "l-a", "l-b", "r-b"]


def test_each_partition_is_a_task_of_its_own_with_its_own_stream_time():
    """As on the runtime, partition i of a sub-topology's topics is task i: its stream time is
    its own, so a record that is late for one partition is on time for another."""
    b = StreamsBuilder()
    (b.stream("in").group_by_key()
     .windowed_by(TimeWindows.of(10, 0)).count(materialized="counts"))
    driver = TopologyTestDriver(b.build(), batch_mode=True)
    topic = driver.create_input_topic("in", partitions=2)
    topic.pipe_input("a", "x", timestamp=100, partition=0)  # task 0's stream time: 100
    topic.pipe_input("b", "x", timestamp=5, partition=1)  # on time for task 1
    topic.pipe_input("c", "x", timestamp=5, partition=0)  # late for task 0: dropped
    driver.run_batch()
    counts = driver.get_window_store("counts")
    assert counts.fetch("b", 0, 100) == [(0, 1)]
    assert counts.fetch("c", 0, 100) == []
    assert counts.fetch("a", 0, 100) == [(100, 1)]
    assert sum(driver.dropped_records.values()) == 1


def test_topics_of_earlier_stages_come_first_at_equal_timestamps():
    """A sub-topology reading an external topic and a repartition topic: at equal timestamps the
    runtime takes records of topics written by earlier stages first (rank -1 for external
    topics, the writer's stage position for repartition topics)."""
    seen: list[str] = []
    b = StreamsBuilder()
    rekeyed = b.stream("in").select_key(lambda k, v: v).repartition()
    b.stream("side").merge(rekeyed).peek(lambda k, v: seen.append(v))
    driver = TopologyTestDriver(b.build(), batch_mode=True)
    driver.create_input_topic("in").pipe_input("k", "via-repartition", timestamp=5)
    driver.create_input_topic("side").pipe_input("k", "external", timestamp=5)
    driver.run_batch()
    assert seen == ["external", "via-repartition"]
    # the record-at-a-time driver follows each record through the topology instead
    seen.clear()
    driver = TopologyTestDriver(b.build())
    driver.create_input_topic("in").pipe_input("k", "via-repartition", timestamp=5)
    driver.create_input_topic("side").pipe_input("k", "external", timestamp=5)
    assert seen == ["via-repartition", "external"]


def test_process_first_topics_come_before_all_others_of_the_batch():
    ordering = PartitionGroupOrdering(first_topics=frozenset({"mirror"}))
    batch = [RawRecord("response", 0, 0, 1, None, b"r0"),
             RawRecord("mirror", 0, 0, 9, None, b"m0"),
             RawRecord("response", 0, 1, 2, None, b"r1")]
    assert [r.value for r in ordering.order(batch)] == [b"m0", b"r0", b"r1"]


def test_a_record_without_a_timestamp_is_ordered_as_kafka_stamps_it_not_refused():
    # Kafka marks a record without a timestamp -1 (a pre-0.10 message format); the partition
    # group orders it so, and its time is the timestamp extractor's to give
    ordering = PartitionGroupOrdering()
    batch = [RawRecord("in", 0, 0, 5, None, b"a"), RawRecord("in", 1, 0, None, None, b"b"),
             RawRecord("in", 1, 1, 7, None, b"c")]
    assert [r.value for r in ordering.order(batch)] == [b"b", b"a", b"c"]


def test_a_record_without_a_timestamp_takes_its_time_from_the_extractor_in_batch_mode():
    seen: list[tuple[str, int]] = []
    b = StreamsBuilder()
    stream = b.stream(["in", "more"],
                      timestamp_extractor=lambda k, v, ts: v["t"] if ts is None else ts)
    stream.process_values(lambda record: seen.append((record.value["v"], record.timestamp))
                          or record)
    driver = TopologyTestDriver(b.build(), batch_mode=True)
    json = StreamsConfig({"application.id": "app"}).default_value_serde
    for topic, value, ts in [("in", {"v": "a", "t": 50}, 5), ("more", {"v": "b", "t": 40}, None)]:
        driver.create_input_topic(topic)
        driver.pipe_raw(topic, json.serialize(topic, "k"), json.serialize(topic, value), ts)
    driver.run_batch()  # one task reads both topics: their records are merged by timestamp
    assert seen == [("b", 40), ("a", 5)]


def test_at_equal_timestamps_a_stream_record_joins_the_tables_update_of_that_time():
    # "orders" sorts before "prices", and its record is piped first: only the rule that a
    # table's records go first at equal timestamps makes the order join the price
    b = StreamsBuilder()
    prices = b.table("prices")
    b.stream("orders").join(prices, lambda qty, price: qty * price).to("costs")
    topology = b.build()
    assert wire(topology, StreamsConfig({"application.id": "app"})).table_topics == {"prices"}
    b.global_table("regions")  # a global table is read whole before processing, not merged
    assert b.build().table_topics == ["prices"]
    driver = TopologyTestDriver(topology, batch_mode=True)
    orders, table = driver.create_input_topic("orders"), driver.create_input_topic("prices")
    orders.pipe_input("apple", 3, timestamp=10)
    table.pipe_input("apple", 2, timestamp=10)
    orders.pipe_input("pear", 5, timestamp=11)  # the pear's price comes later: no join
    table.pipe_input("pear", 7, timestamp=12)
    driver.run_batch()
    assert [(r.key, r.value) for r in driver.create_output_topic("costs").read_records()] == [
        ("apple", 6)]


def test_foreign_key_join_mirrors_are_processed_first():
    b = StreamsBuilder()
    right = b.table("right", materialized="right-store")
    b.table("left").join(right, lambda left, r: (left, r),
                         foreign_key_extractor=lambda v: v["fk"], materialized="joined")
    wiring = wire(b.build(), StreamsConfig({"application.id": "app"}))
    assert list(wiring.first_topics) == ["app-joined-subscription-mirror"]


@pytest.mark.parametrize("cache", [True, False])
def test_a_batch_commits_once_per_task(cache):
    b = StreamsBuilder()
    b.stream("in").group_by_key().count(materialized="counts").to_stream().to("out")
    config = {"cache.max.bytes.buffering": 10_000_000 if cache else 0}
    driver = TopologyTestDriver(b.build(), config, batch_mode=True)
    topic = driver.create_input_topic("in")
    out = driver.create_output_topic("out")
    for k in ["a", "b", "a", "a"]:
        topic.pipe_input(k, 1, timestamp=1)
    driver.run_batch()
    expected = [("a", 3), ("b", 1)] if cache else [("a", 1), ("b", 1), ("a", 2), ("a", 3)]
    assert out.read_key_values() == expected
    topic.pipe_input("b", 1, timestamp=2)
    driver.run_batch()
    assert out.read_key_values() == [("b", 2)]
    assert driver.get_key_value_store("counts").to_dict() == {"a": 3, "b": 2}


@pytest.mark.parametrize("seed", range(12))
def test_batch_mode_reaches_the_record_mode_tables(seed):
    """Random topologies, random batches: the batch rules change when changes are emitted,
    never where the tables end up (the Spark differential test checks the same on Spark)."""
    case = random_case(seed)
    records = random_input(seed, case, n=60)
    rng = random.Random(seed)
    cache = seed % 2 == 0
    config = {"cache.max.bytes.buffering": 10_000_000 if cache else 0}
    reference = TopologyTestDriver(case.topology, config)
    batched = TopologyTestDriver(case.topology, config, batch_mode=True)
    ref_in, bat_in = reference.create_input_topic("in"), batched.create_input_topic("in")
    cuts = set(rng.sample(range(1, len(records)), rng.randint(0, 3)))
    for i, (k, v) in enumerate(records):
        if i in cuts:
            batched.run_batch()
        ref_in.pipe_input(k, v, timestamp=1000 + i)
        bat_in.pipe_input(k, v, timestamp=1000 + i)
    batched.run_batch()
    for store in case.stores:
        assert (batched.get_key_value_store(store).to_dict()
                == reference.get_key_value_store(store).to_dict()), case.description
    for topic in case.outputs:
        got = batched.create_output_topic(topic).read_key_values()
        expected = reference.create_output_topic(topic).read_key_values()
        if case.stateless_only or not cache:
            assert per_key(got) == per_key(expected), case.description
        assert last_per_key(got) == last_per_key(expected), case.description


def test_a_branch_with_one_child_still_forwards_by_name():
    b = StreamsBuilder()
    branches = b.stream("in").split().branch(lambda k, v: v > 0, name="pos").no_default_branch()
    next(iter(branches.values())).to("out")
    driver = TopologyTestDriver(b.build())
    driver.create_input_topic("in").pipe_input("k", 1)
    assert driver.create_output_topic("out").read_values() == [1]


@pytest.mark.parametrize("partitions", [2, 3])
def test_a_repartitioned_table_meets_a_source_table_in_its_partition(partitions):
    """A table aggregated after a repartition, joined with a table of an external topic: the
    repartition topic's records go where Kafka's default partitioner puts their key in that
    topic (Kafka Streams co-partitions them), so every key meets its row as record by record."""
    import json

    from streamtable.partitioner import default_partition

    b = StreamsBuilder()
    counts = b.stream("in").group_by(lambda k, v: v).count("counts")
    counts.join(b.table("names", materialized="names"), lambda c, n: [c, n],
                materialized="joined")
    tables = []
    for batch_mode in (False, True):
        driver = TopologyTestDriver(b.build(), batch_mode=batch_mode)
        words = driver.create_input_topic("in", partitions=partitions)
        names = driver.create_input_topic("names", partitions=partitions)
        for i, k in enumerate("abcdefghij"):
            names.pipe_input(k, k.upper(), timestamp=i,
                             partition=default_partition(json.dumps(k).encode(), partitions))
            words.pipe_input(i, k, timestamp=i, partition=i % partitions)
        if batch_mode:
            driver.run_batch()
        tables.append(driver.get_key_value_store("joined").to_dict())
    assert tables[0] == tables[1] == {k: [1, k.upper()] for k in "abcdefghij"}


@pytest.mark.parametrize("partitions", [2, 3])
def test_equal_keys_made_in_different_ways_meet_in_one_task(partitions):
    """A repartitioned record goes to the task its key's bytes hash to: equal tuple keys whose
    parts Python shares differently (an int held elsewhere too, a string interned or not) must
    write the same bytes, or their counts split over tasks."""
    b = StreamsBuilder()
    (b.stream("in")
     .flat_map(lambda k, v: [(("x", v["n"]), 1), (("y", v["n"]), 1)] if v["both"]
               else [(("y", "".join(["i", "d"]) if v["n"] < 0 else v["n"]), 1)])
     .group_by_key().count()
     .to_stream().to("out"))
    driver = TopologyTestDriver(b.build(), batch_mode=True)
    topic = driver.create_input_topic("in", partitions=partitions)
    for i in range(10):
        n = int("1001") if i % 3 else -1
        topic.pipe_input(i, {"n": n, "both": i % 2 == 0}, timestamp=i, partition=i % partitions)
    driver.run_batch()
    counts = {tuple(k): v for k, v in driver.create_output_topic("out").read_key_values()}
    expected: dict = {}
    for i in range(10):
        n = int("1001") if i % 3 else -1
        keys = [("x", n), ("y", n)] if i % 2 == 0 else [("y", "id" if n < 0 else n)]
        for key in keys:
            expected[key] = expected.get(key, 0) + 1
    assert counts == expected
