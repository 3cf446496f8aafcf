"""Versioned stores and tables on Spark, batch by batch with replays, equal to the test driver's
batch mode: a processor's versioned store, a versioned table joined as of each order's time
(with and without a grace period), their queries from the serving store; and kill -9 of the
running application while it builds a versioned table and joins orders with it."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest
from pyspark import cloudpickle
from tests.processors import versioned_topologies
from tests.processors.test_processor_api_versioned import PAPI_EXPECTED
from tests.processors.versioned_topologies import PAPI_BATCHES, priced_orders, versioned_papi
from tests.runtime.spark.kafka_util import new_topics, produce, read_all
from tests.runtime.spark.test_processor_api_stores_runtime import run_both, spark_out
from tests.runtime.spark.word_count_cli import APP_ID, ROOT, CliRun, run_cli

from streamtable import TopologyTestDriver
from streamtable.serving import SqliteServingStore

pytestmark = pytest.mark.spark

# Spark's workers cannot import the tests' modules
cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(versioned_topologies)


@pytest.mark.parametrize("dsl_store", ["in_memory", "rocksdb"])
def test_a_processors_versioned_store_on_spark_with_replays_equals_the_driver(
        spark, tmp_path, dsl_store):
    batches = [[("in", k, v, ts) for k, v, ts in b] for b in PAPI_BATCHES]
    driver, app, output = run_both(spark, tmp_path, versioned_papi(), f"versioned-{dsl_store}",
                                   batches, ["in"], dsl_store=dsl_store)
    assert spark_out(output, "out", len(batches)) == PAPI_EXPECTED
    assert driver.create_output_topic("out").read_key_values() == PAPI_EXPECTED
    served = app.store("versioned-store")
    reference = driver.get_versioned_key_value_store("versioned-store")
    for key in (1, 2, 3):
        assert served.versions(key) == reference.versions(key), key
        for t in range(98, 110):
            assert served.get_record(key, t) == reference.get_record(key, t), (key, t)


# rates in and out of order (one refused: older than the history retention of 60 s), and
# orders in and out of order, over four batches
RATE_BATCHES = [
    [("rates", "EUR", 1.10, 1_000), ("rates", "USD", 0.90, 1_000),
     ("orders", "EUR", 100, 2_000), ("rates", "EUR", 1.30, 5_000)],
    [("orders", "EUR", 10, 4_000), ("rates", "EUR", 1.20, 3_000),  # a late rate
     ("orders", "USD", 7, 6_000), ("orders", "EUR", 20, 3_500)],
    [("rates", "USD", 0.95, 70_000), ("rates", "EUR", None, 65_000),
     ("rates", "USD", 0.80, 5_000),  # older than 70 000 - 60 000: refused
     ("orders", "EUR", 30, 66_000), ("orders", "USD", 40, 9_000)],
    [("orders", "EUR", 50, 4_500), ("orders", "USD", 60, 80_000),
     ("rates", "EUR", 1.50, 75_000), ("orders", "GBP", 1, 90_000)],
]


@pytest.mark.parametrize("grace", [None, 2_000])
def test_a_versioned_table_joined_as_of_each_order_on_spark_equals_the_driver(
        spark, tmp_path, grace):
    driver, app, output = run_both(spark, tmp_path, priced_orders(grace),
                                   f"priced-{grace}", RATE_BATCHES, ["rates", "orders"])
    expected = driver.create_output_topic("priced").read_key_values()
    assert spark_out(output, "priced", len(RATE_BATCHES)) == expected
    assert spark_out(output, "priced-rates", len(RATE_BATCHES)) == (
        driver.create_output_topic("priced-rates").read_key_values())
    if grace is None:  # each order joins the rate valid at its time, as the batches ran
        assert expected == [
            ("EUR", [100, 1.10]), ("EUR", [10, 1.20]), ("USD", [7, 0.90]), ("EUR", [20, 1.20]),
            ("EUR", [30, 1.30]), ("USD", [40, 0.90]),
            ("EUR", [50, None]),  # 4 500 is older than the retention: only the latest counts
            ("USD", [60, 0.95]), ("GBP", [1, None])]
    served = app.store("rates")
    reference = driver.get_versioned_key_value_store("rates")
    assert served.to_dict() == reference.to_dict() == {"EUR": 1.50, "USD": 0.95}
    for key in ("EUR", "USD", "GBP"):
        assert served.versions(key) == reference.versions(key)
        for t in range(0, 80_001, 500):
            assert served.get_record(key, t) == reference.get_record(key, t), (key, t)
    assert reference.get("USD", as_of=9_000) is None  # past the retention, latest too new


def _write_app(path: Path, rates: str, orders: str, out: str) -> Path:
    app = path / "priced_app.py"
    app.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from tests.processors.versioned_topologies import priced_orders\n"
        "config = {'application.id': 'priced'}\n"
        f"def build_topology():\n    return priced_orders(None, {rates!r}, {orders!r}, {out!r})\n")
    return app


def _kill_during(app: Path, bootstrap: str, state: Path) -> None:
    """Start the application, kill -9 it after its first batch, then run it to the end."""
    run = CliRun(app, bootstrap, state)
    run.wait_for(lambda: run.batches_done() >= 1, 300, "the first batch")
    run.stop(signal.SIGKILL)
    final = run_cli(app, bootstrap, state, "--until-caught-up")
    _, err = final.communicate(timeout=300)
    assert final.returncode == 0, err.decode()[-3000:]


@pytest.mark.slow  # ~1 min: kill -9 as test_kill_and_restart does, on a versioned store
def test_kill_9_while_a_versioned_table_builds_and_joins_then_restart(bootstrap, tmp_path):
    """The rates table (a versioned store; updates in and out of order, some refused) is built
    by a run killed with kill -9 after its first micro-batch and restarted; then orders are
    joined as of their times by another run killed the same way: the served history and the
    join's output are the test driver's exactly (the orders come after every rate, so they
    meet the same history however the batches fall)."""
    rates, orders, out = new_topics(bootstrap, 1, "rates", "orders", "priced")
    app = _write_app(tmp_path, rates, orders, out)
    state = tmp_path / "state"
    keys = ["EUR", "USD", "GBP", "JPY"]
    rate_records = []
    for i in range(1200):  # timestamps rise by 100 ms with jitter: many arrive out of order
        ts = 100_000 + i * 100 + (i * 7919) % 2_500 - 1_250
        if i % 50 == 49:
            ts -= 70_000  # later than the history retention: refused
        value = None if i % 17 == 0 else round(1 + (i % 13) / 10, 2)
        rate_records.append((keys[i % 4], value, ts))
    produce(bootstrap, rates, [(json.dumps(k).encode(), None if v is None else
                                json.dumps(v).encode()) for k, v, _ in rate_records],
            timestamps=[t for _, _, t in rate_records])
    _kill_during(app, bootstrap, state)
    order_records = [(keys[i % 4], i, 100_000 + (i * 104_729) % 120_000) for i in range(900)]
    produce(bootstrap, orders, [(json.dumps(k).encode(), json.dumps(v).encode())
                                for k, v, _ in order_records],
            timestamps=[t for _, _, t in order_records])
    _kill_during(app, bootstrap, state)

    driver = TopologyTestDriver(priced_orders(None, rates, orders, out))
    rate_topic, order_topic = driver.create_input_topic(rates), driver.create_input_topic(orders)
    for k, v, t in rate_records:
        rate_topic.pipe_input(k, v, timestamp=t)
    for k, v, t in order_records:
        order_topic.pipe_input(k, v, timestamp=t)
    expected = driver.create_output_topic(out).read_key_values()
    got = [(json.loads(m.key()), json.loads(m.value())) for m in read_all(bootstrap, out)]
    assert got == expected  # one partition: in offset order, nothing twice, nothing lost
    served = SqliteServingStore(state / APP_ID / "serving.db").view("rates", "versioned")
    reference = driver.get_versioned_key_value_store("rates")
    for key in keys:
        assert served.versions(key) == reference.versions(key), key
        for t in range(99_000, 225_000, 250):
            assert served.get(key, as_of=t) == reference.get(key, as_of=t), (key, t)
    assert driver.dropped_records  # some rates came later than the history retention


UPGRADE_APP = '''
import sys
sys.path.insert(0, {root!r})
from tests.processors.versioned_topologies import priced_orders
from streamtable import Materialized, Stores, StreamsBuilder
config = {{"cache.max.bytes.buffering": 0}}
def build_topology(version="v1"):
    if version == "v1":
        return priced_orders(None, {rates!r}, {orders!r}, {out!r})
    b = StreamsBuilder()  # v2: a new branch; the versioned table and the join are kept
    table = b.table({rates!r}, Materialized.as_(
        Stores.persistent_versioned_key_value_store("rates", 60_000)))
    orders = b.stream({orders!r})
    orders.left_join(table, lambda amount, rate: [amount, rate]).to({out!r})
    table.to_stream().to({out!r} + "-rates")
    orders.filter(lambda k, v: v > 100).to({out!r} + "-big")
    # a new versioned store, built from the earliest offsets
    table.filter(lambda k, rate: rate < 1.0, Materialized.as_(
        Stores.persistent_versioned_key_value_store("cheap", 60_000)))
    return b.build()
'''


def test_an_upgrade_keeps_a_versioned_table_and_its_expiry(spark, bootstrap, tmp_path):
    """A new version that keeps the versioned table carries its history and its expiry index
    over, and builds a new versioned store from the earliest offsets with its index: queries
    answer as the driver's over the whole input, and versions that leave the history retention
    after the upgrade are deleted from the task's state."""
    from streamtable.cli import load_app
    from streamtable.runtime.spark.app import StreamsApp
    from streamtable.state.versioned import StoreTime
    from streamtable.state.windowed import Windowed

    rates, orders, out = new_topics(bootstrap, 1, "up-rates", "up-orders", "up-priced")
    file = tmp_path / "upgrade_app.py"
    file.write_text(UPGRADE_APP.format(root=str(ROOT), rates=rates, orders=orders, out=out))
    module = load_app(str(file))
    state, app_id = tmp_path / "state", f"up-{rates}"

    def send(topic, records):
        produce(bootstrap, topic, [(json.dumps(k).encode(), json.dumps(v).encode())
                                   for k, v, _ in records],
                timestamps=[t for _, _, t in records])

    def app(version):
        return StreamsApp(module.build_topology(version), app_id, bootstrap, state_dir=state,
                          spark=spark, config=module.config, development_broker=True)

    # GBP's older version is filed for expiry before the upgrade only
    first_rates = [("EUR", 1.0, 1_000), ("EUR", 1.1, 2_000), ("USD", 0.9, 1_000),
                   ("EUR", 1.05, 1_500), ("GBP", 0.7, 1_000), ("GBP", 0.75, 2_000)]
    send(rates, first_rates)
    send(orders, [("EUR", 10, 2_500)])  # after every rate in a batch's timestamp order
    app("v1").run_until_caught_up(timeout=240)
    second_rates = [("EUR", 1.2, 3_000), ("USD", 0.8, 200_000)]
    send(rates, second_rates)
    send(orders, [("EUR", 500, 2_600), ("USD", 7, 199_000)])
    upgraded = app("v2")
    upgraded.run_until_caught_up(timeout=300)

    driver = TopologyTestDriver(module.build_topology("v2"), module.config)
    rate_topic, order_topic = driver.create_input_topic(rates), driver.create_input_topic(orders)
    for k, v, t in first_rates:
        rate_topic.pipe_input(k, v, timestamp=t)
    order_topic.pipe_input("EUR", 10, timestamp=2_500)
    # the second batch as a task takes it: the earliest head of its two topics first
    order_topic.pipe_input("EUR", 500, timestamp=2_600)
    rate_topic.pipe_input("EUR", 1.2, timestamp=3_000)
    order_topic.pipe_input("USD", 7, timestamp=199_000)
    rate_topic.pipe_input("USD", 0.8, timestamp=200_000)
    for store in ("rates", "cheap"):
        served = upgraded.store(store)
        reference = driver.get_versioned_key_value_store(store)
        for key in ("EUR", "USD", "GBP"):
            assert served.versions(key) == reference.versions(key), (store, key)
            for t in (1_000, 1_500, 2_000, 2_500, 3_000, 150_000, 199_000, 200_000):
                assert served.get_record(key, t) == reference.get_record(key, t), (store, t)
    assert upgraded.store("cheap").to_dict() == {"GBP": 0.75, "USD": 0.8}
    got = [(json.loads(m.key()), json.loads(m.value())) for m in read_all(bootstrap, out)]
    assert got == driver.create_output_topic(out).read_key_values() == [
        ("EUR", [10, 1.1]), ("EUR", [500, 1.1]), ("USD", [7, 0.9])]
    # stream time 200 000: every version valid before 140 000 has left the task state
    state = upgraded.task_state.checkout(0, 0, 10**9)
    for store in ("rates", "cheap"):
        rows = state.store(store)
        history = [k for k, _ in rows.items() if type(k) is Windowed]
        assert history == [Windowed("USD", 1_000, 200_000)], store
        assert rows.get(StoreTime(0)) == (200_000, 60_000)
