"""Nexmark end to end on the Spark runtime: generated events into the broker, a few queries run
with ``run_until_caught_up()``, each output topic checked against the reference."""

from __future__ import annotations

import uuid

import pytest
from bench.harness import create_topics, read_topic
from bench.nexmark.check import verdict
from bench.nexmark.events import PARTITIONS
from bench.nexmark.queries import QUERIES, Params
from bench.nexmark.reference import EXPECTED, Events

from streamtable.runtime.spark.app import StreamsApp

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("query", ["q0", "q4", "q5", "q19"])
def test_query_on_spark_matches_the_reference(query, nexmark_input, spark, tmp_path):
    loaded, generator, events = (nexmark_input[k] for k in ("bootstrap", "generator", "events"))
    output = f"nexmark-{query}-out-{uuid.uuid4().hex[:8]}"
    create_topics(loaded, {output: PARTITIONS})
    topology = QUERIES[query].topology(Params.of(generator, grace_ms=60_000), output)
    app = StreamsApp(topology, f"nexmark-test-{output}", loaded, state_dir=tmp_path,
                     spark=spark, development_broker=True)
    app.run_until_caught_up(timeout=120)
    raw = [(m.key(), m.value()) for m in read_topic(loaded, output, timeout=60)]
    want = EXPECTED[query](Events(generator=generator, count=events))
    assert verdict(QUERIES[query].kind, want, raw) is None
