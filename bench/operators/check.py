"""The expected result of a family's run: from the in-process test driver in batch mode, or
from the family's plain-Python reference.

The driver gets the records exactly as the broker holds them (same partitions, offsets and
timestamps) and runs them as one batch (``TopologyTestDriver(topology, batch_mode=True)``,
``run_batch()``); its output topic is read through the same :meth:`Family.result` as the
Spark run's, so both are compared in the family's batch-independent terms.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from bench.operators.family import Family, Raw
from bench.operators.inputs import PARTITIONS, Input
from bench.workloads import compare

log = logging.getLogger("bench.operators")

#: ``--check auto`` uses the driver up to this many input records, the reference above
DRIVER_LIMIT = 200_000


def driver_output(family: Family, inp: Input, topics: Mapping[str, str],
                  output: str) -> list[Raw]:
    """The output topic of the family's topology run by the test driver over ``inp``."""
    from streamtable import TopologyTestDriver

    driver = TopologyTestDriver(family.topology(topics, output), family.settings,
                                batch_mode=True)
    try:
        for role, records in inp.topics.items():
            topic = topics[role]
            driver.create_input_topic(topic, partitions=PARTITIONS)
            for r in records:
                driver.pipe_raw(topic, r.key, r.value, r.timestamp, partition=r.partition)
        driver.run_batch()
        return [(r.key, r.value) for r in driver.topic_records(output)]
    finally:
        driver.close()


def expected(family: Family, inp: Input, how: str, topics: Mapping[str, str],
             output: str) -> tuple[str, dict[Any, Any]]:
    """``(what it came from, the expected result)``; ``how``: driver, reference or auto."""
    if how == "auto":
        how = "driver" if inp.records <= DRIVER_LIMIT else "reference"
    t0 = time.time()
    if how == "driver":
        result = family.result(driver_output(family, inp, topics, output))
    else:
        result = family.reference(inp)
    log.info("%s: expected result from the %s in %.1fs (%d entries)", family.name, how,
             time.time() - t0, len(result))
    return how, result


def verdict(expected_result: Mapping[Any, Any], actual: Mapping[Any, Any]) -> str | None:
    """None when equal, else what differs (keys missing, unexpected, wrong values)."""
    return compare(dict(expected_result), dict(actual))
