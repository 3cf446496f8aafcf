"""The Processor API's stores on the test driver, in record mode and in batch mode (the Spark
runtime's way: a task per batch over committed state): window stores with retention,
timestamped key-value stores and the DSL's stores read with their timestamps."""

from __future__ import annotations

import pytest
from tests.processors.papi_topologies import (
    Greet,
    LatestPerUser,
    global_profiles,
    priced_orders,
    windowed_clicks,
)

from streamtable import (
    Processor,
    Stores,
    StreamsBuilder,
    TopologyTestDriver,
    ValueAndTimestamp,
    Windowed,
)

CLICKS = [("a", 1_000), ("a", 4_000), ("b", 5_000), ("a", 12_000),
          ("a", 45_000),   # observed stream time 40 000: windows before 5 001 expire
          ("a", 9_000),    # its window 0 expired: dropped
          ("a", 19_000),   # window 10 000 is live
          ("b", 50_000),   # observed 50 000: windows before 15 001 expire
          ("b", 5_500)]    # dropped

EXPECTED = [
    ("a", [[0, 1]]), ("a", [[0, 2]]), ("b", [[0, 1]]), ("a", [[0, 2], [10_000, 1]]),
    ("a", [[10_000, 1], [40_000, 1]]),  # fetch never returns the expired window 0
    ("a", []),  # the late record's put was dropped, and its range holds only expired windows
    ("a", [[10_000, 2]]),
    ("b", [[50_000, 1]]),
    ("b", []),
]


def run_clicks(batch_mode: bool, batches: int = 1) -> TopologyTestDriver:
    driver = TopologyTestDriver(windowed_clicks(), batch_mode=batch_mode)
    topic = driver.create_input_topic("clicks-in")
    size = -(-len(CLICKS) // batches)
    for i in range(0, len(CLICKS), size):
        for key, ts in CLICKS[i:i + size]:
            topic.pipe_input(key, "click", timestamp=ts)
        if batch_mode:
            driver.run_batch()
    return driver


@pytest.mark.parametrize("batch_mode,batches", [(False, 1), (True, 1), (True, 9), (True, 4)])
def test_window_store_counts_per_window_and_drops_expired_windows(batch_mode, batches):
    driver = run_clicks(batch_mode, batches)
    assert driver.create_output_topic("clicks-out").read_key_values() == EXPECTED
    assert driver.dropped_records.get("expired window store record") == 2
    # interactive queries see the windows the store holds: expired ones leave it a segment
    # (60 s of stream time here) at a time, so windows 0 and 10 000 are still there
    windows = driver.get_window_store("clicks")
    assert windows.fetch("a", 0, 60_000) == [(0, 2), (10_000, 2), (40_000, 1)]
    assert sorted(w for w, _ in windows.fetch_all(10_000, 60_000)) == [
        Windowed("a", 10_000, 20_000), Windowed("a", 40_000, 50_000),
        Windowed("b", 50_000, 60_000)]


def test_window_store_in_the_topology_description():
    assert "Processor: windowed-clicks (stores: [clicks])" in windowed_clicks().describe()


def test_a_processor_reads_a_tables_store_with_value_and_timestamp():
    for batch_mode in (False, True):
        driver = TopologyTestDriver(priced_orders(), batch_mode=batch_mode)
        prices = driver.create_input_topic("prices")
        orders = driver.create_input_topic("orders")
        prices.pipe_input("AAPL", 190, timestamp=1_000)
        orders.pipe_input("AAPL", 5, timestamp=2_000)
        orders.pipe_input("FB", 1, timestamp=2_500)
        if batch_mode:
            driver.run_batch()
        prices.pipe_input("AAPL", 191, timestamp=3_000)
        orders.pipe_input("AAPL", 7, timestamp=4_000)
        if batch_mode:
            driver.run_batch()
        assert driver.create_output_topic("priced").read_key_values() == [
            ("AAPL", [5, 190, 1_000]), ("FB", None), ("AAPL", [7, 191, 3_000])], batch_mode


class LastPrice(Processor):
    """Keeps each key's value with the record's timestamp in a timestamped store and forwards
    how long ago the previous value was written."""

    def init(self, context):
        self.context = context
        self.store = context.get_state_store("last")

    def process(self, record):
        previous = self.store.get(record.key)
        self.store.put(record.key, ValueAndTimestamp(record.value, record.timestamp))
        age = None if previous is None else record.timestamp - previous.timestamp
        self.context.forward(record.with_value([record.value, age]))


def test_timestamped_key_value_store_builder_holds_value_and_timestamp():
    b = StreamsBuilder()
    b.add_state_store(Stores.timestamped_key_value_store_builder(
        Stores.persistent_timestamped_key_value_store("last")))
    b.stream("in").process(LastPrice, "last").to("out")
    driver = TopologyTestDriver(b.build())
    topic = driver.create_input_topic("in")
    topic.pipe_input("k", 1, timestamp=100)
    topic.pipe_input("k", 2, timestamp=350)
    assert driver.create_output_topic("out").read_key_values() == [("k", [1, None]),
                                                                   ("k", [2, 250])]
    assert driver.get_timestamped_key_value_store("last").get("k") == (2, 350)


class PutsPlainValue(Processor):
    def init(self, context):
        self.store = context.get_state_store("last")

    def process(self, record):
        self.store.put(record.key, record.value)


def test_a_plain_value_put_into_a_timestamped_store_is_an_error_naming_the_store():
    b = StreamsBuilder()
    b.add_state_store(Stores.timestamped_key_value_store_builder(
        Stores.persistent_key_value_store("last")))
    b.stream("in").process(PutsPlainValue, "last")
    driver = TopologyTestDriver(b.build())
    with pytest.raises(Exception, match="timestamped store 'last' takes ValueAndTimestamp"):
        driver.create_input_topic("in").pipe_input("k", 1)


def test_window_store_arguments_are_checked():
    with pytest.raises(ValueError, match="at least the window size"):
        Stores.persistent_window_store("w", 10, 20)
    with pytest.raises(ValueError, match="must be positive"):
        Stores.in_memory_window_store("w", 10, 0)
    with pytest.raises(TypeError, match="milliseconds"):
        Stores.in_memory_window_store("w", "1h", 10)


# -- global stores kept by a user processor ----------------------------------------------------

PROFILES = [("u1", {"seq": 2, "name": "Ann"}), ("u1", {"seq": 1, "name": "stale"}),
            ("u2", {"seq": 1, "name": "Bob"})]


@pytest.mark.parametrize("batch_mode", [False, True])
def test_a_global_store_kept_by_a_user_processor_is_read_by_every_task(batch_mode):
    driver = TopologyTestDriver(global_profiles(), batch_mode=batch_mode)
    profiles = driver.create_input_topic("profiles-in", partitions=2)
    visits = driver.create_input_topic("visits", partitions=2)
    out = driver.create_output_topic("greetings")
    for i, (key, value) in enumerate(PROFILES):
        profiles.pipe_input(key, value, timestamp=10, partition=i % 2)
    # in a batch, the global store's updates come before the batch's stream records
    visits.pipe_input("v1", "u1", timestamp=20, partition=0)
    visits.pipe_input("v2", "u2", timestamp=20, partition=1)
    visits.pipe_input("v3", "u3", timestamp=20, partition=1)
    if batch_mode:
        driver.run_batch()
    assert sorted(out.read_key_values()) == [("v1", "u1:Ann"), ("v2", "u2:Bob"),
                                             ("v3", "u3:None")]
    profiles.pipe_input("u1", None, timestamp=30)  # the processor deletes on a tombstone
    visits.pipe_input("v4", "u1", timestamp=40)
    if batch_mode:
        driver.run_batch()
    assert out.read_key_values() == [("v4", "u1:None")]
    assert driver.get_key_value_store("profiles").to_dict() == {
        "u2": {"seq": 1, "name": "Bob"}}


def test_a_global_store_is_its_own_sub_topology_and_generates_no_tasks():
    topology = global_profiles()
    text = topology.describe()
    assert "for global store (will not generate tasks)" in text
    assert "Processor: KTABLE-SOURCE-0000000001 (stores: [profiles])" in text
    # the stream's processor reads the store without holding a copy of it
    assert [st.stores for st in topology.subtopologies] == [[]]
    assert topology.global_stores_of(topology.subtopologies[0]) == ["profiles"]


class WritesGlobal(Processor):
    def init(self, context):
        self.store = context.get_state_store("profiles")

    def process(self, record):
        self.store.put(record.key, {"seq": 9, "name": "hijack"})


def test_a_global_store_is_read_only_for_other_processors():
    b = StreamsBuilder()
    b.add_global_store(Stores.key_value_store_builder(
        Stores.persistent_key_value_store("profiles")), "profiles-in", LatestPerUser)
    b.stream("visits").process(WritesGlobal)
    driver = TopologyTestDriver(b.build())
    with pytest.raises(Exception, match="global store 'profiles' is read-only here"):
        driver.create_input_topic("visits").pipe_input("v", "u")


def test_a_processor_reads_a_global_tables_store_with_timestamps():
    class Reader(Processor):
        def init(self, context):
            self.context = context
            self.rates = context.get_state_store("rates-store")

        def process(self, record):
            rate = self.rates.get(record.value)
            self.context.forward(record.with_value(None if rate is None else list(rate)))

    b = StreamsBuilder()
    b.global_table("rates", materialized="rates-store")
    b.stream("trades").process(Reader).to("out")
    driver = TopologyTestDriver(b.build())
    driver.create_input_topic("rates").pipe_input("EUR", 1.1, timestamp=5)
    driver.create_input_topic("trades").pipe_input("t1", "EUR", timestamp=7)
    assert driver.create_output_topic("out").read_key_values() == [("t1", [1.1, 5])]


def test_add_global_store_through_the_topology_builder():
    from streamtable import TopologyBuilder

    t = (TopologyBuilder()
         .add_global_store(Stores.key_value_store_builder(
             Stores.persistent_key_value_store("profiles")), "profiles-source", "profiles-in",
             "profiles-keeper", LatestPerUser)
         .add_source("visits-source", "visits")
         .add_processor("greet", Greet, "visits-source")
         .add_sink("greetings", "greetings", "greet"))
    driver = TopologyTestDriver(t.build())
    driver.create_input_topic("profiles-in").pipe_input("u1", {"seq": 1, "name": "Ann"})
    driver.create_input_topic("visits").pipe_input("v1", "u1")
    assert driver.create_output_topic("greetings").read_key_values() == [("v1", "u1:Ann")]
    assert "profiles-keeper" in t.describe()


class PutEverything(Processor):
    def __init__(self, store):
        self.store_name = store

    def init(self, context):
        self.store = context.get_state_store(self.store_name)

    def process(self, record):
        self.store.put(record.key, record.value)


@pytest.mark.parametrize("batch_mode", [False, True])
def test_a_topology_of_global_stores_only_updates_them(batch_mode):
    """Kafka's TopologyTestDriverTest.shouldProcessRecordForTopic with
    setupGlobalStoreTopology: global stores, one per topic, and nothing else."""
    from streamtable import TopologyBuilder

    t = TopologyBuilder()
    for topic in ("source-topic-1", "source-topic-2"):
        t.add_global_store(Stores.key_value_store_builder(
            Stores.in_memory_key_value_store(f"{topic}-globalStore")).with_logging_disabled(),
            topic, topic, f"{topic}-processor",
            lambda topic=topic: PutEverything(f"{topic}-globalStore"))
    driver = TopologyTestDriver(t.build(), batch_mode=batch_mode)
    driver.create_input_topic("source-topic-1").pipe_input("key1", "value1", timestamp=42)
    driver.create_input_topic("source-topic-2").pipe_input("key2", "value2", timestamp=43)
    if batch_mode:
        driver.run_batch()
    assert driver.get_key_value_store("source-topic-1-globalStore").to_dict() == {
        "key1": "value1"}
    assert driver.get_key_value_store("source-topic-2-globalStore").to_dict() == {
        "key2": "value2"}


def test_global_store_processor_names_follow_kafka_streams():
    """Kafka's StreamsBuilderTest.shouldUse{Specified,Default}NameForGlobalStoreProcessor."""
    for named, expected in ((None, ["KSTREAM-SOURCE-0000000000", "KTABLE-SOURCE-0000000001"]),
                            ("test", ["test-source", "test"])):
        b = StreamsBuilder()
        b.add_global_store(Stores.key_value_store_builder(
            Stores.in_memory_key_value_store("store"), "string", "string"), "topic",
            LatestPerUser, key_serde="string", value_serde="string", named=named)
        topology = b.build()
        assert [st.nodes for st in topology.global_subtopologies] == [expected]


def test_should_add_global_store():
    """Kafka's StreamsBuilderTest.shouldAddGlobalStore."""
    b = StreamsBuilder()
    b.add_global_store(Stores.key_value_store_builder(
        Stores.in_memory_key_value_store("store"), "string", "string"), "topic",
        lambda: PutEverything("store"), key_serde="string", value_serde="string")
    driver = TopologyTestDriver(b.build())
    driver.create_input_topic("topic", "string", "string").pipe_input("hey", "there")
    assert driver.get_key_value_store("store").get("hey") == "there"
