"""Random topologies on random inputs: the Spark runtime gives what the test driver gives.

Inputs are split into random micro-batches over several partitions, placed by key as Kafka
producers place them. Timestamps increase with the input, so every task sees its records in the
driver's order: without caching, every key's sequence of output values is the driver's; with
caching (per-batch compaction) the final value per key is. Final stores are always equal.
Some seeds keep the tasks' working copies in RocksDB instead of dicts; some are windowed
aggregations (time, sliding, session windows, with or without suppression).
"""

from __future__ import annotations

import random

import pytest
from tests.runtime.spark.harness import last_per_key, per_key, run_driver, run_spark
from tests.runtime.spark.topologies import random_case, random_input

pytestmark = pytest.mark.spark

SEEDS = list(range(10))
# windowed aggregations (time, sliding and session windows, some with final results only)
WINDOWED_SEEDS = list(range(20, 26))
# joins: a stream's windowed self-join, a table's primary-key join with a table derived from it.
# Seed 36 is a table inner-joined with a table derived from it (t.join(t.map_values(...))):
# when the source row is deleted each side sees the other side's row already deleted, so neither
# forwards the old result and the joined row stays, as in Kafka Streams' KTableKTableInnerJoin
# (which returns when the other side has no row). Both hosts do so (docs/kafka-streams.md).
JOINED_SEEDS = [30, 31, 33, 36, 39, 40, 41]


@pytest.mark.parametrize("seed,kind", [(s, "") for s in SEEDS]
                         + [(s, "windowed") for s in WINDOWED_SEEDS]
                         + [(s, "joined") for s in JOINED_SEEDS])
def test_random_topology_matches_driver(spark, tmp_path, seed, kind):
    case = random_case(seed, windowed=kind == "windowed", joined=kind == "joined")
    records = random_input(seed, case, n=60)
    rng = random.Random(seed)
    cache = seed % 2 == 0
    dsl_store = "rocksDB" if seed % 4 in (1, 2) else "in_memory"
    partitions = 1 if case.single_partition else rng.choice([1, 2, 3])
    cuts = sorted(rng.sample(range(1, len(records)), rng.randint(0, 2)))
    driver, expected = run_driver(case.topology, records, case.outputs, cache)
    app, output = run_spark(spark, case.topology, records, cuts, partitions, cache,
                            str(tmp_path), f"diff-{seed}", dsl_store)
    info = f"{case.description} P={partitions} cache={cache} cuts={cuts} {dsl_store}"
    for store in case.stores:
        assert app.store(store).to_dict() == driver.get_key_value_store(store).to_dict(), info
    for topic in case.outputs:
        got = output.topic(topic)
        if case.stateless_only:
            assert sorted(map(repr, got)) == sorted(map(repr, expected[topic])), info
        elif not cache:
            assert per_key(got) == per_key(expected[topic]), info
        assert last_per_key(got) == last_per_key(expected[topic]), info


@pytest.mark.parametrize("seed,windowed", [(100, False), (101, False), (102, False),
                                           (104, True), (106, True), (110, True)])
def test_replayed_batches_change_nothing(spark, tmp_path, seed, windowed):
    """Spark replays an unfinished batch with the same input after a crash: replaying any batch
    (even one whose state was already committed) gives the same stores and outputs."""
    from tests.runtime.spark.harness import SOURCE_SCHEMA, MemoryOutput, source_rows

    from streamtable.runtime.spark import StreamsApp

    case = random_case(seed, windowed=windowed)
    assert not case.single_partition  # two partitions below
    records = random_input(seed, case, n=45)
    driver, expected = run_driver(case.topology, records, case.outputs, cache=True)
    output = MemoryOutput()
    app = StreamsApp(case.topology, f"replay-{seed}", state_dir=str(tmp_path), spark=spark,
                     output=output, config={"default.dsl.store":
                                            "rocksDB" if seed == 101 else "in_memory"})
    app.prepare({"in": 2})
    batches = [records[0:15], records[15:30], records[30:45]]
    frames = [spark.createDataFrame(source_rows(b, 2, start=15 * i), SOURCE_SCHEMA)
              for i, b in enumerate(batches)]
    app.process_batch(frames[0], 0)
    app.process_batch(frames[1], 1)
    app.process_batch(frames[1], 1)  # crash after the state commit: replay
    app.process_batch(frames[2], 2)
    app.process_batch(frames[2], 2)
    for store in case.stores:
        assert app.store(store).to_dict() == driver.get_key_value_store(store).to_dict()
    for topic in case.outputs:
        assert last_per_key(output.topic(topic)) == last_per_key(expected[topic])
