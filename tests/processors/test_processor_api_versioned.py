"""A processor's versioned store on the test driver, record by record and in batch mode, on
the data of Kafka Streams' ``VersionedKeyValueStoreIntegrationTest.shouldPutGetAndDelete``;
and a processor reading a versioned table's store."""

from __future__ import annotations

from typing import Any

import pytest
from tests.processors.versioned_topologies import PAPI_BATCHES, versioned_papi

from streamtable import (
    Materialized,
    Processor,
    Stores,
    StreamsBuilder,
    TopologyTestDriver,
    VersionedRecord,
)
from streamtable.errors import TopologyError

LATEST = -1

# what the processor forwards for each record of PAPI_BATCHES
PAPI_EXPECTED = [
    (1, ["put", LATEST, ["a0", 100, None], None]),
    (2, ["put", LATEST, ["b0", 100, None], None]),
    (3, ["put", LATEST, None, None]),
    (1, ["put", LATEST, ["a5", 105, None], ["a0", 100, 105]]),
    (2, ["put", LATEST, None, ["b0", 100, 105]]),
    (3, ["put", LATEST, ["c5", 105, None], None]),
    (1, ["put", 105, ["a5", 105, None], ["a0", 100, 102]]),
    (2, ["put", 105, None, ["b0", 100, 102]]),
    (3, ["put", 105, ["c5", 105, None], None]),
    (1, ["put", LATEST, ["a5_new", 105, None], ["a2", 102, 105]]),
    (2, ["put", LATEST, ["b5", 105, None], ["b2", 102, 105]]),
    (3, ["put", LATEST, None, None]),
    (1, ["deleted", ["a5_new", 105], None, ["a5_new", 105, 107]]),
    (2, ["deleted", ["b5", 105], None, ["b5", 105, 107]]),
    (3, ["deleted", None, None, None]),
]


def run_papi(batch_mode: bool, batches: list[list[tuple[Any, Any, int]]]) -> TopologyTestDriver:
    driver = TopologyTestDriver(versioned_papi(), batch_mode=batch_mode)
    topic = driver.create_input_topic("in")
    for batch in batches:
        for key, value, ts in batch:
            topic.pipe_input(key, value, timestamp=ts)
        if batch_mode:
            driver.run_batch()
    return driver


@pytest.mark.parametrize("batch_mode,cuts", [(False, None), (True, None), (True, 2)])
def test_put_get_and_delete(batch_mode, cuts):
    batches = PAPI_BATCHES if cuts is None else [
        [r for b in PAPI_BATCHES[:cuts] for r in b], [r for b in PAPI_BATCHES[cuts:] for r in b]]
    driver = run_papi(batch_mode, batches)
    assert driver.create_output_topic("out").read_key_values() == PAPI_EXPECTED
    store = driver.get_versioned_key_value_store("versioned-store")
    assert [store.get_record(1, t) for t in (99, 100, 103, 106, 107)] == [
        None, VersionedRecord("a0", 100, 102), VersionedRecord("a2", 102, 105),
        VersionedRecord("a5_new", 105, 107), None]
    assert store.versions(2) == [VersionedRecord("b0", 100, 102), VersionedRecord("b2", 102, 105),
                                 VersionedRecord("b5", 105, 107)]
    assert store.versions(3) == [] and store.to_dict() == {}


def test_a_processor_reads_a_versioned_tables_store_as_of_a_time():
    class AsOf(Processor):
        def init(self, context):
            self.context = context
            self.rates = context.get_state_store("rates")

        def process(self, record):
            found = self.rates.get(record.key, record.value)
            self.context.forward(record.with_value(None if found is None else found.value))

    b = StreamsBuilder()
    b.table("rates", Materialized.as_(Stores.persistent_versioned_key_value_store("rates",
                                                                                  60_000)))
    b.stream("asks").process(AsOf, "rates").to("out")
    for batch_mode in (False, True):
        driver = TopologyTestDriver(b.build(), batch_mode=batch_mode)
        rates, asks = driver.create_input_topic("rates"), driver.create_input_topic("asks")
        rates.pipe_input("EUR", 1.1, timestamp=1_000)
        rates.pipe_input("EUR", 1.3, timestamp=3_000)
        rates.pipe_input("EUR", 1.2, timestamp=2_000)
        if batch_mode:
            driver.run_batch()
        for t in (500, 1_500, 2_500, 3_500):
            asks.pipe_input("EUR", t, timestamp=4_000)
        if batch_mode:
            driver.run_batch()
        assert driver.create_output_topic("out").read_values() == [None, 1.1, 1.2, 1.3]


def test_versioned_store_arguments_are_checked():
    with pytest.raises(ValueError, match="history_retention must not be negative"):
        Stores.persistent_versioned_key_value_store("s", -1)
    with pytest.raises(ValueError, match="segment_interval must be positive"):
        Stores.persistent_versioned_key_value_store("s", 1_000, 0)
    with pytest.raises(TypeError, match="window store supplier"):
        Materialized.as_(Stores.persistent_window_store("w", 10, 10))
    b = StreamsBuilder()
    with pytest.raises(TopologyError, match="key-value store"):
        b.add_global_store(Stores.versioned_key_value_store_builder(
            Stores.in_memory_versioned_key_value_store("g", 1_000)), "topic", Processor)
