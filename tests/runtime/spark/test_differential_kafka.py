"""Random topologies through a real broker: produce the input, run the Spark runtime until it has
caught up, and compare its tables and output topics with the test driver's."""

from __future__ import annotations

import json

import pytest
from tests.runtime.spark.harness import last_per_key, run_driver
from tests.runtime.spark.kafka_util import new_topics, produce, read_all
from tests.runtime.spark.topologies import random_case, random_input

from streamtable.runtime.spark import StreamsApp
from streamtable.serde import JSON

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("seed", [4, 10])
def test_random_topology_through_broker_matches_driver(spark, bootstrap, tmp_path, seed):
    src, out_stream, out_table = new_topics(bootstrap, 2, "in", "out-stream", "out-table")
    case = random_case(seed, {"in": src, "out-stream": out_stream, "out-table": out_table})
    records = random_input(seed, case, n=80)
    reference = random_case(seed)
    driver, expected = run_driver(reference.topology, records, reference.outputs, cache=True)
    produce(bootstrap, src,
            [(json.dumps(k).encode(), None if v is None else JSON.serialize(src, v))
             for k, v in records],
            timestamps=[1000 + i for i in range(len(records))])
    app = StreamsApp(case.topology, f"diff-kafka-{seed}", state_dir=str(tmp_path), spark=spark,
                     config={"bootstrap.servers": bootstrap, "max.records.per.batch": 30},
                     development_broker=True)
    app.run_until_caught_up(timeout=300)
    assert app.batches >= 2  # several micro-batches
    for store in case.stores:
        assert app.store(store).to_dict() == driver.get_key_value_store(store).to_dict()
    for topic, ref_topic in zip(case.outputs, reference.outputs, strict=True):
        got = [(json.loads(m.key()) if m.key() is not None else None,
                None if m.value() is None else json.loads(m.value()))
               for m in read_all(bootstrap, topic)]
        if case.stateless_only:
            assert sorted(map(repr, got)) == sorted(map(repr, expected[ref_topic]))
        else:
            assert last_per_key(got) == last_per_key(expected[ref_topic])
