"""The latency mode of the Nexmark bench: which event completes each result, the latencies
from what a watcher received, and a paced run of the bare loop end to end."""

from __future__ import annotations

import json
import types
from collections import Counter

import pytest
from bench.nexmark import latency
from bench.nexmark.contenders import bare_loop
from bench.nexmark.events import TOPICS
from bench.nexmark.generator import Generator
from bench.nexmark.reference import EXPECTED, Events

SEED, RATE, EVENTS = 5, 1_000, 6_000


@pytest.fixture(scope="module")
def source() -> Events:
    return Events(generator=Generator(SEED, rate=RATE), count=EVENTS)


def test_input_counts_are_the_generators(source) -> None:
    kinds = Counter()
    for batch in Generator(SEED, rate=RATE).batches(EVENTS - 7):
        for kind in TOPICS:
            kinds[kind] += len(getattr(batch, f"{kind}s"))
    counts = latency.input_counts(EVENTS - 7)
    assert {kind: counts[topic] for kind, (topic, _) in TOPICS.items()} == dict(kinds)


def test_paced_events_come_in_event_order_to_their_topics() -> None:
    events = list(latency.paced_events(Generator(SEED, rate=RATE), 500))
    assert len(events) == 500
    assert [ts for *_, ts in events] == sorted(ts for *_, ts in events)
    assert Counter(topic for topic, *_ in events) == Counter(
        {t: n for t, n in latency.input_counts(500).items() if n})
    for topic, key, value, ts in events:
        row = json.loads(value)
        assert row["dateTime"] == ts
        assert json.loads(key) == row["id" if topic != TOPICS["bid"][0] else "auction"]


@pytest.mark.parametrize("query", sorted(latency.COMPLETED_BY))
def test_every_reference_result_is_completed_by_a_paced_event(query, source) -> None:
    idx = latency.EventIndex(source)
    first, last = Generator(SEED, rate=RATE).timestamp(0), Generator(
        SEED, rate=RATE).timestamp(EVENTS - 1)
    results = list(EXPECTED[query](source))
    assert results
    for key, value in results:
        if query == "q19":  # the reference gives the acceptable top bids: take one of each
            picks = [json.loads(sorted(value.by_price[p])[value.prices[:i].count(p)])
                     for i, p in enumerate(value.prices)]
            value = [dict(b, rank_number=i + 1) for i, b in enumerate(picks)]
        done = latency.COMPLETED_BY[query](idx, json.loads(json.dumps(key)), value)
        assert done is not None and first <= done <= last, (key, value)


def test_q8_waits_for_the_person_and_the_sellers_first_auction_in_the_window() -> None:
    idx = latency.EventIndex(Events(
        persons=[{"id": 7, "dateTime": 12_000}],
        auctions=[{"seller": 7, "dateTime": 5_000}, {"seller": 7, "dateTime": 14_000},
                  {"seller": 7, "dateTime": 16_000}],
        bids=[]))
    assert latency.COMPLETED_BY["q8"](idx, [7, 10_000], {}) == 14_000
    assert latency.COMPLETED_BY["q8"](idx, [7, 0], {}) == 12_000  # the person came later
    assert latency.COMPLETED_BY["q8"](idx, [7, 20_000], {}) is None


def test_q5_waits_for_the_last_bid_of_each_hottest_auction_in_its_window() -> None:
    idx = latency.EventIndex(Events(persons=[], auctions=[], bids=[
        {"auction": 1, "dateTime": 1_000}, {"auction": 2, "dateTime": 3_000},
        {"auction": 1, "dateTime": 4_000}, {"auction": 2, "dateTime": 9_000},
        {"auction": 1, "dateTime": 12_000}]))
    assert latency.COMPLETED_BY["q5"](idx, [0, 10_000], [[1, 2], [2, 2]]) == 9_000
    assert latency.COMPLETED_BY["q5"](idx, [0, 10_000], [[1, 2]]) == 4_000
    assert latency.COMPLETED_BY["q5"](idx, [10_000, 20_000], [[2, 1]]) is None


def test_latencies_count_from_the_send_of_the_completing_event_after_the_warm_up() -> None:
    idx = latency.EventIndex(Events(persons=[], auctions=[], bids=[]))
    e0, t0 = 1_000_000, 500.0
    bid = {"auction": 1, "bidder": 2, "price": 3, "dateTime": e0 + 4_000, "extra": ""}
    early = dict(bid, dateTime=e0 + 1_000)
    received = {"appended": [(b"1", json.dumps(bid).encode(), t0 + 4.25),
                              (b"1", json.dumps(early).encode(), t0 + 3.0)],
                "table": {}}
    values, unexplained = latency.latencies("q1", idx, received, t0=t0, e0=e0, speed=1.0,
                                            warmup_s=2.0)
    assert values == [pytest.approx(0.25)] and unexplained == 0
    # paced twice as fast as event time: the bid was sent 2 s in, the early one in the warm-up
    values, _ = latency.latencies("q1", idx, received, t0=t0, e0=e0, speed=2.0, warmup_s=1.0)
    assert values == [pytest.approx(2.25)]


def test_a_table_result_counts_from_the_first_receipt_of_its_final_value() -> None:
    watcher = types.SimpleNamespace(kind="table", table={}, appended=[])
    for key, value, now in [(b"1", b"[]", 1.0), (b"1", b"[1]", 2.0), (b"1", b"[1]", 3.0),
                            (b"2", b"[1]", 4.0), (b"2", None, 5.0)]:
        latency.Watcher.add(watcher, key, value, now)  # type: ignore[arg-type]
    assert watcher.table == {b"1": (b"[1]", 2.0), b"2": (None, 5.0)}


@pytest.mark.slow  # a bench run: the latency mode's harness end to end
def test_the_bare_loop_paced_live_gives_its_latencies_and_the_reference_result(
        tmp_path, monkeypatch) -> None:
    from streamtable.kafka.broker import EmbeddedBroker

    args = types.SimpleNamespace(latency_rate=1_000, latency_seconds=4.0, latency_warmup=1.0,
                                 rate=RATE, seed=SEED, grace_ms=60_000, config=[],
                                 keep_state=False)
    run_dir = tmp_path / "nexmark-latency"
    run_dir.mkdir()
    monkeypatch.setattr(latency, "ROOT", tmp_path)
    with EmbeddedBroker(log_path=tmp_path / "broker.log") as broker:
        row = latency.run_latency("q1", bare_loop.CONTENDER, args, broker.bootstrap_servers,
                                  run_dir)
    assert row.status == "OK", row.reason
    bids = latency.input_counts(4_000)[TOPICS["bid"][0]]
    assert row.output_records == bids
    # every bid after the first second of pacing is a result, seen within seconds of its send
    assert 0.6 * bids <= row.results <= bids
    assert 0 < row.p50_s <= row.p99_s <= row.max_s < 5.0
