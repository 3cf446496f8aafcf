"""Every Nexmark query's topology, run by the TopologyTestDriver over generated events (both
in batch mode, as the Spark runtime runs a micro-batch, and record at a time), gives the
reference's result."""

from __future__ import annotations

import pytest
from bench.nexmark.check import verdict
from bench.nexmark.driver import driver_output
from bench.nexmark.generator import Generator
from bench.nexmark.queries import ORDER, QUERIES, Params
from bench.nexmark.reference import EXPECTED, Events

# a slow event rate, so that 3,000 events span several windows of every windowed query
GENERATOR = Generator(11, rate=500)
EVENTS = 3_000
PARAMS = Params.of(GENERATOR, grace_ms=60_000)


# streamtable's internal serde (marshal) writes equal keys as different bytes when an int or
# string in them is shared with another live object (marshal's reference flag follows the
# reference count), so a repartition can send equal keys to different tasks: q15/q16's keys
# share the bidder's int, their distinct counts come out too large and q15's join finds nothing
SERDE_BUG = pytest.mark.xfail(strict=True, reason="InternalSerde's marshal output depends on "
                              "reference counts: equal keys, different bytes, split counts")
BATCH = [pytest.param(q, marks=SERDE_BUG) if q in ("q15", "q16") else q for q in ORDER]


@pytest.mark.parametrize("query", BATCH)
def test_query_matches_the_reference_in_batch_mode(query):
    out = driver_output(query, GENERATOR, EVENTS, PARAMS)
    want = EXPECTED[query](Events(generator=GENERATOR, count=EVENTS))
    assert verdict(QUERIES[query].kind, want, out) is None


@pytest.mark.parametrize("query", ["q4", "q5", "q7", "q8", "q11", "q15", "q16", "q20"])
def test_query_matches_the_reference_record_at_a_time(query):
    out = driver_output(query, GENERATOR, EVENTS, PARAMS, batch_mode=False)
    want = EXPECTED[query](Events(generator=GENERATOR, count=EVENTS))
    assert verdict(QUERIES[query].kind, want, out) is None
