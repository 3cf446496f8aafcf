"""Property: for any sequence of upserts and deletes, a grouped-table reduce/aggregate equals a
recomputation from the final source table, with and without caching."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from streamtable import StreamsBuilder, TopologyTestDriver

CLIENTS = ["c0", "c1", "c2", "c3"]
EXCHANGES = ["NASDAQ", "NYSE", "LON"]

position = st.fixed_dictionaries(
    {
        "client": st.sampled_from(CLIENTS),
        "exchange": st.sampled_from(EXCHANGES),
        "amount": st.integers(min_value=0, max_value=50),
    }
)
# (position id, new value or None to close it)
operations = st.lists(
    st.tuples(st.integers(min_value=0, max_value=12), st.one_of(st.none(), position)),
    max_size=60,
)


def build(cache: bool):
    b = StreamsBuilder()
    t = b.table("positions", materialized="positions-store")
    us = t.filter(lambda k, p: p["exchange"] != "LON")
    us.group_by(lambda k, p: (p["client"], frozenset([k]))).reduce(
        adder=lambda a, v: a | v, subtractor=lambda a, v: (a - v) or None, materialized="ids"
    )
    us.group_by(lambda k, p: (p["client"], p["amount"])).aggregate(
        lambda: 0, lambda k, v, agg: agg + v, lambda k, v, agg: agg - v, materialized="amount"
    )
    t.group_by(lambda k, p: (p["exchange"], p)).count(materialized="per-exchange")
    b.table("positions-copy", materialized="unused")  # a second sub-topology, untouched
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 10_000 if cache else 0})
    return driver


def recompute(final: dict[int, dict]):
    ids: dict[str, set[int]] = defaultdict(set)
    amount: dict[str, int] = {}
    per_exchange: dict[str, int] = {}
    for pid, p in final.items():
        if p["exchange"] != "LON":
            ids[p["client"]].add(pid)
            amount[p["client"]] = amount.get(p["client"], 0) + p["amount"]
        per_exchange[p["exchange"]] = per_exchange.get(p["exchange"], 0) + 1
    return ids, amount, per_exchange


@settings(max_examples=150, deadline=None)
@given(ops=operations, cache=st.booleans())
def test_grouped_table_results_equal_recomputation_from_final_table(ops, cache):
    driver = build(cache)
    topic = driver.create_input_topic("positions")
    final: dict[int, dict] = {}
    ever_us: set[str] = set()
    ever_exchange: set[str] = set()
    for pid, value in ops:
        topic.pipe_input(pid, value)
        if value is None:
            final.pop(pid, None)
        else:
            final[pid] = value
            ever_exchange.add(value["exchange"])
            if value["exchange"] != "LON":
                ever_us.add(value["client"])
    ids, amount, per_exchange = recompute(final)
    assert driver.get_key_value_store("ids").to_dict() == {c: frozenset(s) for c, s in ids.items()}
    # aggregate keeps a group once created, even when it falls back to the initial value
    expected_amount = {c: amount.get(c, 0) for c in ever_us}
    assert driver.get_key_value_store("amount").to_dict() == expected_amount
    expected_counts = {e: per_exchange.get(e, 0) for e in ever_exchange}
    assert driver.get_key_value_store("per-exchange").to_dict() == expected_counts
    assert driver.get_key_value_store("positions-store").to_dict() == final


@settings(max_examples=100, deadline=None)
@given(ops=operations)
def test_cached_output_is_the_uncached_output_compacted_per_input_record(ops):
    """With caching the driver commits after every input record: the cached changelog is the
    uncached one keeping, for each input record, only the last change per key."""
    outputs = {}
    for cache in (False, True):
        b = StreamsBuilder()
        (b.table("positions")
            .group_by(lambda k, p: (p["client"], frozenset([k])))
            .reduce(lambda a, v: a | v, lambda a, v: (a - v) or None, "ids")
            .to_stream().to("out", value_serde="pickle"))
        driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 10_000 * cache})
        topic = driver.create_input_topic("positions")
        out = driver.create_output_topic("out", value_serde="pickle")
        per_input = []
        for pid, value in ops:
            topic.pipe_input(pid, value)
            per_input.append(out.read_key_values())
        outputs[cache] = per_input
    for uncached, cached in zip(outputs[False], outputs[True], strict=True):
        last: dict[str, object] = {}
        for k, v in uncached:
            last.pop(k, None)
            last[k] = v
        assert cached == [(k, v) for k, v in last.items() if k in {ck for ck, _ in cached}]
        assert {k: v for k, v in cached} == {
            k: v for k, v in last.items() if k in {ck for ck, _ in cached}
        }
        # a key changed in the uncached log is either emitted with caching or nets to no change
        for k in last:
            if k not in {ck for ck, _ in cached}:
                assert last[k] is None
