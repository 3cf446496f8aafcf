"""The share-holders topology (foreign-key join, filter, group_by/reduce) on Spark equals the
test driver on random positions and reference-data changes."""

from __future__ import annotations

import json
import random

import pytest
from tests.processors.test_fk_join import load_example
from tests.runtime.spark.harness import SOURCE_SCHEMA, MemoryOutput, last_per_key

from streamtable import StreamsBuilder, TopologyTestDriver
from streamtable.runtime.spark import StreamsApp

pytestmark = pytest.mark.spark

TICKERS = ["AAPL", "FB", "VOD", "BP", "TSLA"]
EXCHANGES = ["NASDAQ", "NYSE", "LON"]


def random_events(seed: int, n: int):
    rng = random.Random(seed)
    events = []
    for _ in range(n):
        if rng.random() < 0.25:
            ticker = rng.choice(TICKERS)
            value = None if rng.random() < 0.15 else {"name": ticker.title(),
                                                      "exchange": rng.choice(EXCHANGES)}
            events.append(("shares-ref-data", ticker, value))
        else:
            pid = rng.randrange(15)
            value = None if rng.random() < 0.2 else {
                "id": pid, "client": f"c{rng.randrange(4)}", "ticker": rng.choice(TICKERS),
                "amount": rng.randint(1, 50)}
            if value is not None and rng.random() < 0.3:
                value["exchange"] = rng.choice(EXCHANGES)
            events.append(("share-holders", pid, value))
    return events


def rows(events, partitions, start):
    import json

    from streamtable.partitioner import default_partition
    from streamtable.serde import JSON

    offsets: dict[tuple[str, int], int] = {}
    out = []
    for i, (topic, k, v) in enumerate(events):
        key = json.dumps(k).encode()
        p = default_partition(key, partitions)
        o = offsets.get((topic, p), start * 100)
        offsets[(topic, p)] = o + 1
        out.append((topic, p, o, 1000 + start + i, key,
                    None if v is None else JSON.serialize(topic, v), None))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_share_holders_on_spark_equals_driver(spark, tmp_path, seed):
    topology = load_example("topology").build_topology()
    events = random_events(seed, 80)
    driver = TopologyTestDriver(topology)
    topics = {t: driver.create_input_topic(t) for t in ("share-holders", "shares-ref-data")}
    for i, (topic, k, v) in enumerate(events):
        topics[topic].pipe_input(k, v, timestamp=1000 + i)
    app = StreamsApp(topology, f"fk-{seed}", state_dir=str(tmp_path), spark=spark,
                     output=MemoryOutput())
    app.prepare({"share-holders": 2, "shares-ref-data": 2})
    cuts = [0, 30, 55, 80]
    for batch, (lo, hi) in enumerate(zip(cuts, cuts[1:], strict=False)):
        df = spark.createDataFrame(rows(events[lo:hi], 2, lo), SOURCE_SCHEMA)
        app.process_batch(df, batch)
    for store in ("us-share-holders", "positions-enriched", "share-holder-store"):
        assert app.store(store).to_dict() == driver.get_key_value_store(store).to_dict(), store


def test_right_table_not_partitioned_by_kafka_default_is_a_clear_error(spark, tmp_path):
    from streamtable import ProcessingError

    topology = load_example("topology").build_topology()
    app = StreamsApp(topology, "fk-partitioner", state_dir=str(tmp_path), spark=spark,
                     output=MemoryOutput())
    app.prepare({"share-holders": 2, "shares-ref-data": 2})
    good = rows([("shares-ref-data", "AAPL", {"name": "Apple", "exchange": "NASDAQ"})], 2, 0)
    wrong = [(t, 1 - p, o, ts, k, v, h) for t, p, o, ts, k, v, h in good]
    with pytest.raises(Exception) as info:
        app.process_batch(spark.createDataFrame(wrong, SOURCE_SCHEMA), 0)
    message = str(info.value)
    assert "murmur2_random" in message and "topic='shares-ref-data'" in message
    assert ProcessingError.__name__ in message


def _spark_batches(spark, tmp_path, topology, app_id, batches, partitions, config=None,
                   replay=None):
    """Run ``batches`` (lists of ``(topic, key, value)``) through a StreamsApp; returns the app
    and, per batch, per output topic, its ``(key, value)`` records."""
    from collections import defaultdict

    from streamtable.serde import JSON

    output = MemoryOutput()
    app = StreamsApp(topology, app_id, state_dir=str(tmp_path), spark=spark, output=output,
                     config=config or {})
    app.prepare(partitions)
    start = 0
    for n, batch in enumerate(batches):
        frame = spark.createDataFrame(rows(batch, 2, start), SOURCE_SCHEMA)
        app.process_batch(frame, n)
        if n == replay:  # Spark's replay of an unfinished batch: recomputed, not applied twice
            app.process_batch(frame, n)
        start += len(batch)
    got = []
    for n in range(len(batches)):
        by_topic = defaultdict(list)
        for r in output.batches.get(n, []):
            by_topic[r["topic"]].append((JSON.deserialize(r["topic"], r["key"]),
                                         JSON.deserialize(r["topic"], r["value"])))
        got.append(dict(by_topic))
    return app, got


@pytest.mark.parametrize("left_join", [False, True])
def test_fk_join_joined_back_to_its_left_table_on_spark_equals_kafka(spark, tmp_path,
                                                                     left_join):
    """Kafka Streams' KTableKTableForeignKeyJoinIntegrationTest (doJoinFromLeftThenDelete
    LeftEntity, with rejoin) on Spark, a micro-batch per step: the sub-topologies form a cycle,
    run in rounds within each batch."""
    from tests.processors.test_fk_join_cycles import kafka_topology

    steps = [[("right_table", "rhs1", "rhsValue1"), ("right_table", "rhs2", "rhsValue2"),
              ("right_table", "rhs3", "rhsValue3")],
             [("left_table", "lhs1", "lhsValue1|rhs1"), ("left_table", "lhs2", "lhsValue2|rhs2")],
             [("left_table", "lhs3", "lhsValue3|rhs1")],
             [("left_table", "lhs1", None)]]
    app, got = _spark_batches(spark, tmp_path, kafka_topology(left_join), f"rejoin-{left_join}",
                              steps, {"left_table": 2, "right_table": 2}, replay=2)
    outputs = [(dict(b.get("output-topic", [])), dict(b.get("rejoin-output-topic", [])))
               for b in got]
    assert outputs == [
        ({}, {}),
        ({"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs2,rhsValue2)"},
         {"lhs1": "rejoin((lhsValue1|rhs1,rhsValue1),lhsValue1|rhs1)",
          "lhs2": "rejoin((lhsValue2|rhs2,rhsValue2),lhsValue2|rhs2)"}),
        ({"lhs3": "(lhsValue3|rhs1,rhsValue1)"},
         {"lhs3": "rejoin((lhsValue3|rhs1,rhsValue1),lhsValue3|rhs1)"}),
        ({"lhs1": None}, {"lhs1": None})]
    assert app.store("store").to_dict() == {"lhs2": "(lhsValue2|rhs2,rhsValue2)",
                                            "lhs3": "(lhsValue3|rhs1,rhsValue1)"}


@pytest.mark.parametrize("cache,seed", [(True, 4), (False, 5)])
def test_cyclic_fk_joins_on_spark_equal_the_driver_batch_by_batch(spark, tmp_path, cache,
                                                                  seed):
    """Random changes of both tables through the rejoin topology and FK joins chained to one
    right table (both cycles), over two partitions: batch by batch the records the driver's
    batch mode gives, and the same final stores and last values as record by record."""
    from tests.processors.test_fk_join_cycles import chained_to_one_right_table, kafka_topology

    from streamtable.partitioner import default_partition

    rng = random.Random(seed)
    events = []
    for _ in range(70):
        if rng.random() < 0.4:
            k = f"p{rng.randrange(5)}"
            v = None if rng.random() < 0.15 else {"name": f"n{rng.randrange(50)}",
                                                   "next": f"p{rng.randrange(6)}"}
            events.append(("products", k, v))
        else:
            k = rng.randrange(8)
            events.append(("orders", k, None if rng.random() < 0.2
                           else {"product": f"p{rng.randrange(6)}"}))
    kafka = [("left_table" if t == "orders" else "right_table", str(k),
              None if v is None else (f"v{i}|{v['product']}" if t == "orders"
                                      else v["name"]))
             for i, (t, k, v) in enumerate(events)]
    cuts = [0, 20, 45, 70]
    config = {"cache.max.bytes.buffering": 10**7 if cache else 0}
    cases = [(chained_to_one_right_table(), events, ("orders", "products"), ["out"],
              ["with-product", "with-next"]),
             (kafka_topology(left_join=True), kafka, ("left_table", "right_table"),
              ["output-topic", "rejoin-output-topic"], ["store"])]
    for n, (topology, evs, inputs, outputs, stores) in enumerate(cases):
        batches = [evs[lo:hi] for lo, hi in zip(cuts, cuts[1:], strict=False)]
        driver = TopologyTestDriver(topology, config, batch_mode=True)
        topics = {t: driver.create_input_topic(t, partitions=2) for t in inputs}
        outs = {t: driver.create_output_topic(t) for t in outputs}
        expected = []
        for lo, hi in zip(cuts, cuts[1:], strict=False):
            for i in range(lo, hi):  # the timestamps rows() gives
                topic, k, v = evs[i]
                topics[topic].pipe_input(k, v, timestamp=1000 + i,
                                         partition=default_partition(json.dumps(k).encode(), 2))
            driver.run_batch()
            expected.append({t: o.read_key_values() for t, o in outs.items()})
        app, got = _spark_batches(spark, tmp_path / str(n), topology, f"cyclic-{seed}-{n}",
                                  batches, dict.fromkeys(inputs, 2), config, replay=1)
        for b, (g, e) in enumerate(zip(got, expected, strict=True)):
            for t in outputs:
                assert sorted(map(repr, g.get(t, []))) == sorted(map(repr, e[t])), (n, b, t)
        for store in stores:
            assert app.store(store).to_dict() == driver.get_key_value_store(store).to_dict()
        record = TopologyTestDriver(topology, config)
        record_topics = {t: record.create_input_topic(t) for t in inputs}
        for i, (topic, k, v) in enumerate(evs):
            record_topics[topic].pipe_input(k, v, timestamp=1000 + i)
        for store in stores:
            assert record.get_key_value_store(store).to_dict() == \
                driver.get_key_value_store(store).to_dict(), store
        assert sum(len(e[outputs[-1]]) for e in expected) > 5


def test_fk_join_joined_back_through_the_broker_equals_the_driver(spark, bootstrap, tmp_path):
    """The rejoin topology reading and writing Kafka (offset ranges read by the tasks, records
    written by them), in batches of at most 7 records, restarted once: its output topics end
    with the driver's last value per key, and its stores are the driver's."""
    from tests.runtime.spark.kafka_util import new_topics, produce, read_all

    left_t, right_t, out_t, rejoin_t = new_topics(bootstrap, 2, "left", "right", "out",
                                                  "rejoin")

    def topology():
        b = StreamsBuilder()
        left, right = b.table(left_t, materialized="left"), b.table(right_t)
        fk = left.left_join(right, lambda v1, v2: f"({v1},{v2})",
                            foreign_key_extractor=lambda v: v.split("|")[1], materialized="fk")
        fk.to_stream().to(out_t)
        fk.join(left, lambda v1, v2: f"rejoin({v1},{v2})", materialized="rejoined"
                ).to_stream().to(rejoin_t)
        return b.build()

    rng = random.Random(8)
    events = []
    for i in range(40):
        if rng.random() < 0.4:
            events.append((right_t, f"r{rng.randrange(4)}",
                           None if rng.random() < 0.2 else f"right{i}"))
        else:
            events.append((left_t, f"l{rng.randrange(6)}",
                           None if rng.random() < 0.2 else f"left{i}|r{rng.randrange(5)}"))
    driver = TopologyTestDriver(topology())
    inputs = {t: driver.create_input_topic(t) for t in (left_t, right_t)}
    for i, (t, k, v) in enumerate(events):
        inputs[t].pipe_input(k, v, timestamp=1000 + i)
    expected = {t: last_per_key(driver.create_output_topic(t).read_key_values())
                for t in (out_t, rejoin_t)}

    for lo, hi in ((0, 20), (20, 40)):
        for i in range(lo, hi):
            t, k, v = events[i]
            produce(bootstrap, t, [(json.dumps(k).encode(),
                                    None if v is None else json.dumps(v).encode())],
                    timestamps=[1000 + i])
        app = StreamsApp(topology(), "rejoin-broker", state_dir=str(tmp_path), spark=spark,
                         config={"bootstrap.servers": bootstrap, "max.records.per.batch": 7},
                         development_broker=True)
        app.run_until_caught_up(timeout=300)
    assert app.batches >= 2
    got = {t: last_per_key([(json.loads(m.key()), None if m.value() is None
                             else json.loads(m.value())) for m in read_all(bootstrap, t)])
           for t in (out_t, rejoin_t)}
    assert got == expected
    assert len(expected[rejoin_t]) >= 2
    for store in ("fk", "rejoined"):
        assert app.store(store).to_dict() == driver.get_key_value_store(store).to_dict(), store
