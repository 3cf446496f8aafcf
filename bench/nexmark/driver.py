"""Run a query's topology in-process with streamtable's ``TopologyTestDriver`` over generated
events: a quick check of a topology against the reference without Spark or a broker (the
tests use it; the runner measures the Spark runtime).

The driver gets the events as the broker would hold them: each in its topic's partition (Kafka's
default partitioner on the JSON key), with its ``dateTime`` as timestamp, in event order.
"""

from __future__ import annotations

from typing import Any

from bench.nexmark.events import PARTITIONS, SIDE_INPUT_TOPIC, TOPICS, encode
from bench.nexmark.generator import Generator
from bench.nexmark.queries import QUERIES, Params


def driver_output(query: str, generator: Generator, events: int, params: Params,
                  output: str = "out", batch_mode: bool = True
                  ) -> list[tuple[bytes | None, bytes | None]]:
    """The output topic of ``query`` run by the test driver over the first ``events``."""
    from streamtable import TopologyTestDriver
    from streamtable.partitioner import default_partition

    topology = QUERIES[query].topology(params, output)
    driver = TopologyTestDriver(topology, {}, batch_mode=batch_mode)
    try:
        for topic, _ in TOPICS.values():
            driver.create_input_topic(topic, partitions=PARTITIONS)
        driver.create_input_topic(SIDE_INPUT_TOPIC, partitions=PARTITIONS)

        def pipe(topic: str, key: Any, value: Any, ts: int) -> None:
            k = encode(key)
            driver.pipe_raw(topic, k, encode(value), ts,
                            partition=default_partition(k, PARTITIONS))

        first = generator.timestamp(0)
        for k, v in generator.side_input():
            pipe(SIDE_INPUT_TOPIC, k, v, first)
        for batch in generator.batches(events):
            merged = ([(p["dateTime"], 0, p) for p in batch.persons]
                      + [(a["dateTime"], 1, a) for a in batch.auctions]
                      + [(b["dateTime"], 2, b) for b in batch.bids])
            for _, kind, row in sorted(merged, key=lambda t: t[0]):
                topic, key_field = list(TOPICS.values())[kind]
                pipe(topic, row[key_field], row, row["dateTime"])
        if batch_mode:
            driver.run_batch()
        return [(r.key, r.value) for r in driver.topic_records(output)]
    finally:
        driver.close()
