"""The reference checker on hand-made events: known answers of the SQL, and the verdicts."""

from __future__ import annotations

import json

from bench.nexmark.check import verdict
from bench.nexmark.reference import EXPECTED, AnyOf, Events, TopBids, canonical


def bid(auction, price, at, bidder=1, channel="Apple", extra=""):
    return {"auction": auction, "bidder": bidder, "price": price, "channel": channel,
            "url": "https://www.nexmark.com/a/b_c/d/item.htm?query=1", "dateTime": at,
            "extra": extra}


def auction(id_, at, expires, category=10, seller=1000):
    return {"id": id_, "itemName": "i", "description": "d", "initialBid": 1, "reserve": 2,
            "dateTime": at, "expires": expires, "seller": seller, "category": category,
            "extra": ""}


def person(id_, state, at=0):
    return {"id": id_, "name": f"p{id_}", "emailAddress": "e", "creditCard": "c",
            "city": "Bend", "state": state, "dateTime": at, "extra": ""}


def result(query, src):
    return {canonical(k): v for k, v in EXPECTED[query](src)}


def test_q4_averages_the_winning_bids_within_each_auctions_time():
    src = Events(auctions=[auction(1000, 0, 100), auction(1001, 0, 50),
                           auction(1002, 10, 20, category=11)],
                 bids=[bid(1000, 5, 10), bid(1000, 9, 100), bid(1000, 20, 101),
                       bid(1001, 7, 5), bid(1002, 3, 9), bid(1002, 4, 20)])
    # 1000 wins at 9 (20 came after it expired), 1001 at 7; 1002 at 4 (3 came before it)
    assert result("q4", src) == {"10": 8, "11": 4}


def test_q9_breaks_ties_of_price_by_the_earlier_bid():
    src = Events(auctions=[auction(1000, 0, 100)],
                 bids=[bid(1000, 9, 30, bidder=2), bid(1000, 9, 20, bidder=3),
                       bid(1000, 1, 40)])
    [(key, row)] = EXPECTED["q9"](src)
    assert key == 1000 and (row["bidder"], row["bid_dateTime"], row["price"]) == (3, 20, 9)


def test_q3_joins_category_10_auctions_with_sellers_of_three_states():
    src = Events(persons=[person(1000, "OR"), person(1001, "WA")],
                 auctions=[auction(1000, 0, 9, seller=1000), auction(1001, 0, 9, seller=1001),
                           auction(1002, 0, 9, category=11, seller=1000)])
    assert result("q3", src) == {"1000": {"name": "p1000", "city": "Bend", "state": "OR",
                                          "id": 1000}}


def test_q5_keeps_the_auctions_with_the_most_bids_per_hopping_window():
    src = Events(bids=[bid(1, 1, 0), bid(1, 1, 1), bid(2, 1, 3000)])
    got = result("q5", src)
    assert got["[0,10000]"] == [[1, 2]]
    assert got["[2000,12000]"] == [[2, 1]]
    assert got["[-6000,4000]"] == [[1, 2]]
    assert len(got) == 6  # windows starting -8000 .. 2000


def test_q16_counts_per_channel_and_day_with_the_latest_minute_of_the_day():
    day = 86_400_000
    src = Events(bids=[bid(1, 5, day - 60_000, bidder=1), bid(2, 20_000, 61_000, bidder=1),
                       bid(1, 7, day + 120_000, bidder=2), bid(3, 2_000_000, 0, bidder=3),
                       bid(1, 5, 5_000, channel="Google")])
    got = result("q16", src)
    assert sorted(got) == ['["Apple","1970-01-01"]', '["Apple","1970-01-02"]',
                           '["Google","1970-01-01"]']
    first = got['["Apple","1970-01-01"]']
    assert first["minute"] == "23:59" and got['["Apple","1970-01-02"]']["minute"] == "00:02"
    assert (first["total_bids"], first["total_bidders"], first["total_auctions"]) == (3, 2, 3)
    assert [first[f"rank{r}_bids"] for r in (1, 2, 3)] == [1, 1, 1]
    assert (first["rank1_auctions"], first["rank2_bidders"]) == (1, 1)


def test_q7_a_bid_at_a_windows_end_joins_it_when_its_price_is_the_max():
    src = Events(bids=[bid(1, 5, 0), bid(2, 9, 5000), bid(3, 9, 10_000), bid(4, 3, 12_000)])
    got = result("q7", src)
    assert [r["dateTime"] for r in got["[0,10000]"]] == [5000, 10_000]
    assert [r["dateTime"] for r in got["[10000,20000]"]] == [10_000]


def test_q11_sessions_merge_bids_less_than_ten_seconds_apart():
    src = Events(bids=[bid(1, 1, 0, bidder=1), bid(1, 1, 5, bidder=2),
                       bid(1, 1, 9_999, bidder=1), bid(1, 1, 19_999, bidder=1)])
    got = result("q11", src)
    assert got == {
        "[1,0]": {"bidder": 1, "bid_count": 2, "starttime": 0, "endtime": 19_999},
        "[1,19999]": {"bidder": 1, "bid_count": 1, "starttime": 19_999, "endtime": 29_999},
        "[2,5]": {"bidder": 2, "bid_count": 1, "starttime": 5, "endtime": 10_005}}


def test_q18_accepts_any_of_the_latest_bids_at_the_same_time():
    src = Events(bids=[bid(1, 1, 0), bid(1, 2, 7), bid(1, 3, 7)])
    [(key, want)] = EXPECTED["q18"](src)
    assert key == [1, 1] and isinstance(want, AnyOf)
    assert sorted(v["price"] for v in want.values) == [2, 3]


def test_q19_accepts_any_bids_tied_at_a_price_in_rank_order():
    bids = [bid(1, p, i, extra=str(i)) for i, p in enumerate([50, 40, 40, 30, 20, 20, 20,
                                                               10, 9, 8, 8, 8, 1])]
    [(key, want)] = EXPECTED["q19"](Events(bids=bids))
    assert isinstance(want, TopBids) and want.prices == [50, 40, 40, 30, 20, 20, 20, 10, 9, 8]

    def ranked(rows):
        return [{**r, "rank_number": i} for i, r in enumerate(rows, 1)]

    first_eight = ranked(bids[:10])
    assert want.accepts("", first_eight)
    assert want.accepts("", ranked(bids[:9] + [bids[11]]))       # another bid at 8
    assert not want.accepts("", ranked(bids[:9] + [bids[12]]))   # a lower price
    assert not want.accepts("", ranked(bids[:9] + [bids[8]]))    # a bid twice


def test_q21_and_q22_extract_channel_ids_and_url_directories():
    src = Events(bids=[bid(1, 1, 0, channel="Apple"),
                       {**bid(1, 1, 0, channel="channel-7"), "url": "https://x/a/b/c?q=1&channel_id=42"},
                       bid(1, 1, 0, channel="channel-8")])
    assert [v["channel_id"] for _, v in EXPECTED["q21"](src)] == ["0", "42"]
    assert [(v["dir1"], v["dir2"], v["dir3"]) for _, v in EXPECTED["q22"](src)][0] == (
        "a", "b_c", "d")


def raw(key, value):
    return json.dumps(key).encode(), None if value is None else json.dumps(value).encode()


def test_a_missing_or_duplicated_record_of_an_append_output_fails():
    want = [(1, {"p": 1}), (1, {"p": 2})]
    assert verdict("append", want, [raw(1, {"p": 2}), raw(1, {"p": 1})]) is None
    dup = verdict("append", want, [raw(1, {"p": 2}), raw(1, {"p": 2})])
    assert dup is not None and "1 missing, 1 unexpected" in dup


def test_a_table_output_is_its_last_value_per_key_and_tombstones_delete():
    want = [([1, "a"], 5), ([2, "b"], AnyOf((6, 7)))]
    good = [raw([1, "a"], 4), raw([1, "a"], 5), raw([2, "b"], 7), raw([3, "c"], 1),
            raw([3, "c"], None)]
    assert verdict("table", want, good) is None
    bad = verdict("table", want, good[:2] + [raw([2, "b"], 8), raw([4, "d"], 0)])
    assert bad is not None and "key [2,\"b\"]" in bad and "unexpected" in bad


def test_a_check_pauses_the_garbage_collector_and_restores_it():
    import gc

    seen = []

    def expected():
        seen.append(gc.isenabled())
        yield 1, 5

    assert gc.isenabled()
    assert verdict("table", expected, [raw(1, 5)]) is None
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        assert verdict("table", expected, [raw(1, 5)]) is None
        assert not gc.isenabled()
    finally:
        gc.enable()
