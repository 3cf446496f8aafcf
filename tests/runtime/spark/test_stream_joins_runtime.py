"""Stream-stream outer joins and stream-GlobalKTable joins on Spark equal the test driver in
batch mode, micro-batch by micro-batch (with a replayed batch); and through the real broker."""

from __future__ import annotations

import json
import random
from collections import defaultdict

import pytest
from tests.runtime.spark.harness import SOURCE_SCHEMA, MemoryOutput
from tests.runtime.spark.kafka_util import new_topics, produce, read_all

from streamtable import JoinWindows, StreamsBuilder, TopologyTestDriver
from streamtable.partitioner import default_partition
from streamtable.runtime.spark import StreamsApp
from streamtable.serde import JSON

pytestmark = pytest.mark.spark

# partitions per topic: the stream-stream join runs as one task, so the driver's single task
# is the same computation record for record; the global table's topic has three partitions, all
# seen by both tasks of the orders stream; clicks are re-keyed to meet views in their partition
PARTITIONS = {"left": 1, "right": 1, "orders": 2, "products": 3, "clicks": 2, "views": 2,
              "users": 2}


OUTPUTS = ("joined", "enriched", "matched", "profiled")


def topology(names=None, grace=20):
    n = names or {t: t for t in (*PARTITIONS, *OUTPUTS)}

    def tostring(a, b):  # defined here: Spark's workers receive it by value
        return f"{'null' if a is None else a}+{'null' if b is None else b}"

    b = StreamsBuilder()
    left, right = b.stream(n["left"]), b.stream(n["right"])
    left.outer_join(right, tostring, JoinWindows.of_time_difference_and_grace(30, grace)
                    ).to(n["joined"])
    products = b.global_table(n["products"], materialized="products")
    orders = b.stream(n["orders"])
    orders.left_join(products, lambda k, o: o["product"],
                     lambda o, p: [o["n"], None if p is None else p["name"]]).to(n["enriched"])
    if "clicks" in n:
        by_user = b.stream(n["clicks"]).select_key(lambda k, c: c["user"])
        by_user.join(b.stream(n["views"]), lambda c, v: [c["n"], v],
                     JoinWindows.of_time_difference_with_no_grace(1_000_000)).to(n["matched"])
        by_user.left_join(b.table(n["users"], materialized="users"),
                          lambda c, u: [c["n"], u]).to(n["profiled"])
    return b.build()


def events(seed=3, n=150):
    rng = random.Random(seed)
    out, ts = [], 1000
    for i in range(n):
        ts += rng.randrange(0, 25)
        # some out-of-order records (within and beyond the grace period)
        t = ts - rng.randrange(0, 80) if rng.random() < 0.15 else ts
        topic = rng.choice(["left", "right", "left", "right", "orders", "products", "clicks",
                            "views", "users"])
        if topic == "users":
            key, value = f"u{rng.randrange(3)}", f"name{i}"
        elif topic == "clicks":
            key, value = i, {"n": i, "user": f"u{rng.randrange(3)}"}
        elif topic == "views":
            key, value = f"u{rng.randrange(3)}", f"v{i}"
        elif topic == "products":
            key, value = f"p{rng.randrange(5)}", (None if rng.random() < 0.15
                                                  else {"name": f"name{i}"})
        elif topic == "orders":
            key, value = i, {"n": i, "product": f"p{rng.randrange(6)}"}
        else:
            key, value = rng.randrange(4), f"{topic[0]}{i}"
        out.append((topic, key, value, t))
    return out


def frame_rows(batch, offsets):
    rows = []
    for topic, key, value, ts in batch:
        k = json.dumps(key).encode()
        p = default_partition(k, PARTITIONS[topic])
        rows.append((topic, p, offsets[(topic, p)], ts, k,
                     None if value is None else JSON.serialize(topic, value), None))
        offsets[(topic, p)] += 1
    return rows


def driver_batches(evs, cuts, cache):
    driver = TopologyTestDriver(topology(), {"cache.max.bytes.buffering": cache},
                                batch_mode=True)
    inputs = {t: driver.create_input_topic(t, partitions=n) for t, n in PARTITIONS.items()}
    per_batch = []
    outs = {t: driver.create_output_topic(t) for t in OUTPUTS}
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        for topic, key, value, ts in evs[lo:hi]:
            p = default_partition(json.dumps(key).encode(), PARTITIONS[topic])
            inputs[topic].pipe_input(key, value, timestamp=ts, partition=p)
        driver.run_batch()
        per_batch.append({t: [(r.key, r.value, r.timestamp) for r in o.read_records()]
                          for t, o in outs.items()})
    return driver, per_batch


def spark_batches(output):
    got = []
    for b in sorted(output.batches):
        by_topic = defaultdict(list)
        for r in output.batches[b]:
            by_topic[r["topic"]].append((JSON.deserialize(r["topic"], r["key"]),
                                         JSON.deserialize(r["topic"], r["value"]),
                                         r["timestamp"]))
        got.append({t: by_topic.get(t, []) for t in OUTPUTS})
    return got


def test_stream_joins_on_spark_equal_the_driver_batch_by_batch(spark, tmp_path):
    # caching off and RocksDB working copies here, caching on (the default) and in-memory
    # copies in the broker test: stream joins forward every result either way
    cache = 0
    evs = events()
    cuts = [0, 40, 90, 150]
    driver, expected = driver_batches(evs, cuts, cache)
    output = MemoryOutput()
    app = StreamsApp(topology(), f"stream-joins-{cache}", state_dir=str(tmp_path), spark=spark,
                     output=output, config={"cache.max.bytes.buffering": cache,
                                           "default.dsl.store": "rocksDB"})
    app.prepare({t: n for t, n in PARTITIONS.items() if t != "products"})
    offsets: dict[tuple[str, int], int] = defaultdict(int)
    frames = []
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        frames.append(spark.createDataFrame(frame_rows(evs[lo:hi], offsets), SOURCE_SCHEMA))
    for batch, frame in enumerate(frames):
        app.process_batch(frame, batch)
        if batch == 1:  # Spark's replay of an unfinished batch: recomputed, not applied twice
            app.process_batch(frame, batch)
    got = spark_batches(output)
    for b, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g["joined"] == e["joined"], b  # one task: the very same records in order
        # two tasks of orders: the same records, each task's in order
        assert sorted(map(repr, g["enriched"])) == sorted(map(repr, e["enriched"])), b
        # re-keyed clicks met the views of their user in the views' partition: every pair
        assert sorted(map(repr, g["matched"])) == sorted(map(repr, e["matched"])), b
        # and the users table's rows of their user (a stream-table join)
        assert sorted(map(repr, g["profiled"])) == sorted(map(repr, e["profiled"])), b
    joined = [v for batch in expected for _, v, _ in batch["joined"]]
    assert any(v.startswith("null+") for v in joined) and any(v.endswith("+null")
                                                              for v in joined)
    assert any("+" in v and "null" not in v for v in joined)
    enriched = [v for batch in expected for _, v, _ in batch["enriched"]]
    assert any(v[1] is None for v in enriched) and any(v[1] is not None for v in enriched)
    assert app.store("products").to_dict() == driver.get_key_value_store("products").to_dict()
    assert sum(len(batch["matched"]) for batch in expected) > 50
    profiled = [v for batch in expected for _, v, _ in batch["profiled"]]
    assert any(v[1] is None for v in profiled) and sum(v[1] is not None for v in profiled) > 5


def test_stream_joins_through_the_broker_across_restarts(spark, bootstrap, tmp_path):
    """Products first (one run), then the streams (a second run after a restart), then a record
    that closes every window (a third): each run resumes from the checkpoint and the state, and
    the output topics hold what the driver gives for the same input."""
    names = {}
    for logical, n in (("left", 1), ("right", 1), ("joined", 1), ("orders", 2),
                       ("enriched", 2), ("products", 3)):
        (names[logical],) = new_topics(bootstrap, n, logical)
    rng = random.Random(11)
    products = [(f"p{i % 5}", {"name": f"name{i}"}) for i in range(12)] + [("p4", None)]
    streams = []
    for i in range(60):
        topic = rng.choice(["left", "right", "orders"])
        key = i if topic == "orders" else rng.randrange(4)
        value = ({"n": i, "product": f"p{rng.randrange(6)}"} if topic == "orders"
                 else f"{topic[0]}{i}")
        streams.append((topic, key, value, 1000 + 7 * i))
    flush = [("left", 9, "flush", 10_000_000)]
    # the driver sees the same three steps
    # a grace longer than the run: however the source cuts the batches, no record is late and
    # every window closes only at the flush, so the results do not depend on the cuts
    driver = TopologyTestDriver(topology(grace=100_000))
    inputs = {t: driver.create_input_topic(t) for t in PARTITIONS}
    for k, v in products:
        inputs["products"].pipe_input(k, v, timestamp=500)
    for topic, k, v, ts in streams + flush:
        inputs[topic].pipe_input(k, v, timestamp=ts)
    expected = {t: sorted(repr((r.key, r.value, r.timestamp))
                          for r in driver.create_output_topic(t).read_records())
                for t in ("joined", "enriched")}

    def send(records):
        by_topic = defaultdict(list)
        for topic, k, v, ts in records:
            by_topic[topic].append((json.dumps(k).encode(),
                                    None if v is None else JSON.serialize(topic, v), ts))
        for topic, rs in by_topic.items():
            produce(bootstrap, names[topic], [(k, v) for k, v, _ in rs],
                    timestamps=[ts for _, _, ts in rs])

    def run():
        app = StreamsApp(topology(names, grace=100_000), "stream-joins-broker",
                         state_dir=str(tmp_path), spark=spark,
                         config={"bootstrap.servers": bootstrap, "max.records.per.batch": 25},
                         development_broker=True)
        app.run_until_caught_up(timeout=300)
        return app

    send([("products", k, v, 500) for k, v in products])
    run()
    send(streams)
    app = run()
    assert app.batches >= 2
    send(flush)
    app = run()
    got = {t: sorted(repr((json.loads(m.key()), json.loads(m.value()), m.timestamp()[1]))
                     for m in read_all(bootstrap, names[t]))
           for t in ("joined", "enriched")}
    assert got == expected
    assert any("null+" in r for r in got["joined"]) and any("+null" in r for r in got["joined"])
    assert app.store("products").to_dict() == driver.get_key_value_store("products").to_dict()
