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


@pytest.mark.parametrize("query", ORDER)
def test_query_matches_the_reference_in_batch_mode(query):
    out = driver_output(query, GENERATOR, EVENTS, PARAMS)
    want = EXPECTED[query](Events(generator=GENERATOR, count=EVENTS))
    assert verdict(QUERIES[query].kind, want, out) is None


@pytest.mark.parametrize("query", ["q4", "q5", "q7", "q8", "q11", "q15", "q16", "q20"])
def test_query_matches_the_reference_record_at_a_time(query):
    out = driver_output(query, GENERATOR, EVENTS, PARAMS, batch_mode=False)
    want = EXPECTED[query](Events(generator=GENERATOR, count=EVENTS))
    assert verdict(QUERIES[query].kind, want, out) is None


# ~100 events a millisecond: bids share their time with their auction, or come before it
TIED = Generator(11, rate=100_000)


@pytest.mark.parametrize("query", ["q4", "q9", "q20"])
def test_bids_joined_with_auctions_of_the_same_millisecond_match_the_reference(query):
    events = Events(generator=TIED, count=EVENTS)
    same_time = {(a["id"], a["dateTime"]) for a in events.each_auction()}
    assert sum((b["auction"], b["dateTime"]) in same_time for b in events.each_bid()) > 10
    out = driver_output(query, TIED, EVENTS, Params.of(TIED, grace_ms=60_000))
    assert verdict(QUERIES[query].kind, EXPECTED[query](events), out) is None
