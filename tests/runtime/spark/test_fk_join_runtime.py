"""The share-holders topology (foreign-key join, filter, group_by/reduce) on Spark equals the
test driver on random positions and reference-data changes."""

from __future__ import annotations

import random

import pytest
from tests.processors.test_fk_join import load_example
from tests.runtime.spark.harness import SOURCE_SCHEMA, MemoryOutput

from streamtable import TopologyTestDriver
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
