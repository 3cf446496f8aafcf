"""A stage whose output two later stages read runs once per batch: each reader's Spark plan
would otherwise run it (and read its input) again. The shape of Nexmark's q15: one stream
feeds a count table, re-grouped into a distinct count, and a second grouping; both meet in a
join."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.runtime.spark.kafka_util import new_topics, produce, read_all

from streamtable import StreamsBuilder
from streamtable.runtime.spark.plan import plan_query

pytestmark = pytest.mark.spark

WORDS = ["ant", "bee", "cat", "ant", "wasp", "bee", "moth", "ant", "fly", "gnat", "moth", "ox"]


def fan_out(source: str, output: str) -> Any:
    """Per word length: the distinct words and all the words of that length."""
    b = StreamsBuilder()
    words = b.stream(source)
    distinct = (words.group_by(lambda _, w: w).count()
                .group_by(lambda w, n: (len(w), w))
                .aggregate(lambda: 0, lambda length, w, total: total + 1,
                           lambda length, w, total: total - 1))
    every = words.group_by(lambda _, w: len(w)).count()
    distinct.join(every, lambda d, n: [d, n]).to_stream().to(output)
    return b.build()


def test_a_stage_read_by_two_later_stages_runs_once(spark: Any, bootstrap: str,
                                                    tmp_path: Path) -> None:
    from streamtable.runtime.spark import StreamsApp

    source, output = new_topics(bootstrap, 2, "fan-words", "fan-lengths")
    topology = fan_out(source, output)
    plan = plan_query(topology, "fan", {source: 2})
    assert [(s.subtopology, sorted(s.upstream)) for s in plan.stages] == [
        (0, []), (1, [0]), (2, [0, 1])]
    produce(bootstrap, source, [(None, json.dumps(w).encode()) for w in WORDS])

    app = StreamsApp(topology, f"fan-{source}", bootstrap, state_dir=tmp_path, spark=spark,
                     development_broker=True)
    app.run_until_caught_up(timeout=300)

    # every record of the source was read by one task of one stage
    assert app.metrics.records_in == len(WORDS)
    latest = {json.loads(m.key()): json.loads(m.value()) for m in read_all(bootstrap, output)}
    lengths = {len(w) for w in WORDS}
    assert latest == {n: [len({w for w in WORDS if len(w) == n}),
                          sum(len(w) == n for w in WORDS)] for n in lengths}
