"""The Nexmark generator: deterministic, in the spec's proportions, with references the spec
guarantees, and in the documented Kafka format."""

from __future__ import annotations

import json

import pytest
from bench.nexmark.events import TOPICS, _records
from bench.nexmark.generator import (
    AUCTION_ID_LEAD,
    CHUNK,
    FIRST_AUCTION_ID,
    FIRST_PERSON_ID,
    PERSON_ID_LEAD,
    Generator,
)

EVENTS = CHUNK + 1234


def events(gen: Generator, n: int = EVENTS) -> list[tuple[str, dict]]:
    """Every event, in event order, as ``(kind, row)``."""
    out = []
    for batch in gen.batches(n):
        rows = ([(r["dateTime"], "person", r) for r in batch.persons]
                + [(r["dateTime"], "auction", r) for r in batch.auctions]
                + [(r["dateTime"], "bid", r) for r in batch.bids])
        out.extend((kind, row) for _, kind, row in sorted(rows, key=lambda t: t[0]))
    return out


def test_same_seed_gives_the_same_events_and_another_seed_others():
    a, b, c = (events(Generator(seed)) for seed in (3, 3, 4))
    assert a == b
    assert sum(x != y for x, y in zip(a, c, strict=True)) > len(a) // 2


def test_a_longer_run_starts_with_the_events_of_a_shorter_one():
    short = events(Generator(5), CHUNK + 10)
    long = events(Generator(5), 2 * CHUNK)
    assert short == long[:len(short)]


def test_persons_auctions_and_bids_come_one_three_forty_six():
    kinds = [k for k, _ in events(Generator(1), 100_000)]
    assert (kinds.count("person"), kinds.count("auction"), kinds.count("bid")) == (
        2_000, 6_000, 92_000)


def test_event_time_follows_the_rate_from_the_base_time():
    gen = Generator(1, rate=1_000, base_time=1_700_000_000_000)
    batch = gen.batch(0, 100)
    times = sorted([r["dateTime"] for r in batch.persons + batch.auctions + batch.bids])
    assert times == [1_700_000_000_000 + i for i in range(100)]


def test_every_reference_names_an_id_made_before_or_at_most_the_lead_ahead():
    gen = Generator(9)
    last_person, last_auction = FIRST_PERSON_ID - 1, FIRST_AUCTION_ID - 1
    persons, auctions = set(), {}
    late_bids = 0
    for kind, r in events(gen):
        if kind == "person":
            assert r["id"] == last_person + 1
            last_person = r["id"]
            persons.add(r["id"])
        elif kind == "auction":
            assert r["id"] == last_auction + 1
            last_auction = r["id"]
            assert FIRST_PERSON_ID <= r["seller"] <= last_person + PERSON_ID_LEAD
            assert 10 <= r["category"] <= 14
            assert r["dateTime"] < r["expires"] <= r["dateTime"] + gen.max_auction_length_ms()
            assert r["initialBid"] <= r["reserve"]
            auctions[r["id"]] = r
        else:
            assert FIRST_AUCTION_ID <= r["auction"] <= last_auction + AUCTION_ID_LEAD
            assert FIRST_PERSON_ID <= r["bidder"] <= last_person + PERSON_ID_LEAD
            assert 100 <= r["price"] <= 100_000_000
            late_bids += r["auction"] > last_auction
    # ids named ahead are made a few events later: all exist but those of the last events
    before, after = gen.max_bid_distance_ms()
    for kind, r in events(gen):
        if kind == "bid" and r["auction"] in auctions:
            delta = r["dateTime"] - auctions[r["auction"]]["dateTime"]
            assert -before <= delta <= after
    assert 0 < late_bids < EVENTS // 20
    assert len(persons) == last_person - FIRST_PERSON_ID + 1


def test_hot_auctions_bidders_and_sellers_take_their_spec_shares():
    batch = Generator(2).batch(0, CHUNK)
    bids, auctions = batch.bids, batch.auctions
    hot_auction = sum(b["auction"] % 100 == 0 for b in bids) / len(bids)
    hot_bidder = sum(b["bidder"] % 100 == 1 for b in bids) / len(bids)
    hot_seller = sum(a["seller"] % 100 == 0 for a in auctions) / len(auctions)
    hot_channel = sum(b["channel"] in ("Google", "Facebook", "Baidu", "Apple")
                      for b in bids) / len(bids)
    assert 0.48 < hot_auction < 0.56 and 0.73 < hot_bidder < 0.78
    assert 0.72 < hot_seller < 0.80 and 0.48 < hot_channel < 0.52


def test_extra_pads_records_to_the_spec_sizes():
    """The spec's idealized size: 8 bytes per number, the strings it counts, and ``extra``."""
    batch = Generator(2).batch(0, CHUNK)
    sizes = {
        200: [8 + sum(len(p[f]) for f in ("name", "emailAddress", "creditCard", "city",
                                          "state", "extra")) for p in batch.persons],
        500: [48 + len(a["itemName"]) + len(a["description"]) + len(a["extra"])
              for a in batch.auctions],
        100: [32 + len(b["extra"]) for b in batch.bids],
    }
    for size, values in sizes.items():
        assert size * 0.98 < sum(values) / len(values) < size * 1.02
        assert min(values) >= size * 0.75 and max(values) <= size * 1.25


@pytest.mark.parametrize("kind", ["person", "auction", "bid"])
def test_records_are_keyed_json_with_the_standard_field_names(kind):
    topic, key_field = TOPICS[kind]
    rows = getattr(Generator(1).batch(0, 200), f"{kind}s")
    records, stamps = _records(rows, key_field)
    fields = {"person": ["id", "name", "emailAddress", "creditCard", "city", "state",
                         "dateTime", "extra"],
              "auction": ["id", "itemName", "description", "initialBid", "reserve", "dateTime",
                          "expires", "seller", "category", "extra"],
              "bid": ["auction", "bidder", "price", "channel", "url", "dateTime",
                      "extra"]}[kind]
    for (key, value), stamp in zip(records, stamps, strict=True):
        row = json.loads(value)
        assert value == json.dumps(row, separators=(",", ":")).encode()
        assert list(row) == fields
        assert json.loads(key) == row[key_field] and isinstance(row[key_field], int)
        assert stamp == row["dateTime"]
        assert b" " not in key and b", " not in value
