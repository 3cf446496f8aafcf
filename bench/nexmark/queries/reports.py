"""The bidding statistics reports: per day (q15) and per channel and day (q16), the number of
bids, of distinct bidders and of distinct auctions, in all and per price rank.

A distinct count is a count of keys: every bid adds one record per (group, bidder or auction,
rank) to a table of counts, and that table, re-grouped by the report's group, counts its rows
with an adder and a subtractor. A bidder's first bid in a group adds a row (+1); a later one
updates the row, which the re-grouping sees as the old row taken out (-1) and the new one put
in (+1): the distinct count is exact and needs no set of ids in one value. The bid counts are a
plain aggregate, joined with the distinct counts on the group (a primary-key table join).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.nexmark.dates import day, minute
from bench.nexmark.events import BID_TOPIC
from bench.nexmark.queries.base import Params, Query

RANK1_BELOW, RANK2_BELOW = 10_000, 1_000_000
SLOTS = ("total", "rank1", "rank2", "rank3")


def price_rank(price: int) -> str:
    return "rank1" if price < RANK1_BELOW else "rank2" if price < RANK2_BELOW else "rank3"


def no_bids() -> dict[str, Any]:
    return {**{f"{s}_bids": 0 for s in SLOTS}, "minute": None}


def count_bid(group: Any, bid: dict[str, Any], counts: dict[str, Any]) -> dict[str, Any]:
    out = dict(counts)
    out["total_bids"] += 1
    out[f"{price_rank(bid['price'])}_bids"] += 1
    m = minute(bid["dateTime"])
    out["minute"] = m if out["minute"] is None or m > out["minute"] else out["minute"]
    return out


def add_row(group: Any, slot: str, counts: dict[str, int]) -> dict[str, int]:
    return {**counts, slot: counts.get(slot, 0) + 1}


def remove_row(group: Any, slot: str, counts: dict[str, int]) -> dict[str, int]:
    return {**counts, slot: counts[slot] - 1}


def merged(bids: dict[str, Any], distinct: dict[str, int]) -> dict[str, Any]:
    out = dict(bids)
    for kind in ("bidders", "auctions"):
        for slot in SLOTS:
            out[f"{slot}_{kind}"] = distinct.get(f"{slot}_{kind}", 0)
    return out


def report(group_of: Callable[[dict[str, Any]], tuple[Any, ...]],
           group_fields: tuple[str, ...], with_minute: bool, output: str) -> Any:
    """The topology of a report grouped by ``group_of(bid)`` (a tuple)."""
    from streamtable import StreamsBuilder

    b = StreamsBuilder()
    bids = b.stream(BID_TOPIC)

    # (a null value would be dropped by the aggregation, as in Kafka Streams)
    def ids(auction: Any, bid: dict[str, Any]) -> list[tuple[tuple[Any, ...], int]]:
        group, rank = group_of(bid), price_rank(bid["price"])
        return [((*group, f"{slot}_{kind}", who), 1)
                for kind, who in (("bidders", bid["bidder"]), ("auctions", bid["auction"]))
                for slot in ("total", rank)]

    distinct = (bids.flat_map(ids)
                .group_by_key()
                .count()
                .group_by(lambda k, n: (k[:-2], k[-2]))
                .aggregate(dict, add_row, remove_row))
    counts = (bids.group_by(lambda auction, bid: group_of(bid))
              .aggregate(no_bids, count_bid))

    def row(group: tuple[Any, ...], both: dict[str, Any]) -> dict[str, Any]:
        out = dict(zip(group_fields, group, strict=True))
        out.update(both)
        if not with_minute:
            del out["minute"]
        return out

    (counts.join(distinct, merged)
     .map_values(row)
     .to_stream(lambda group, _: list(group) if len(group) > 1 else group[0])
     .to(output))
    return b.build()


def q15(params: Params, output: str) -> Any:
    """Query 15, bidding statistics report: per day, the bids, distinct bidders and distinct
    auctions, in all and per price rank. Output (``table``): day -> ``{day, total_bids,
    rank1_bids, rank2_bids, rank3_bids, total_bidders, rank1_bidders, ..., total_auctions,
    rank1_auctions, ...}``.

    .. code-block:: sql

        SELECT
             DATE_FORMAT(`dateTime`, 'yyyy-MM-dd') as `day`,
             count(*) AS total_bids,
             count(*) filter (where price < 10000) AS rank1_bids,
             count(*) filter (where price >= 10000 and price < 1000000) AS rank2_bids,
             count(*) filter (where price >= 1000000) AS rank3_bids,
             count(distinct bidder) AS total_bidders,
             count(distinct bidder) filter (where price < 10000) AS rank1_bidders,
             count(distinct bidder) filter (where price >= 10000 and price < 1000000)
               AS rank2_bidders,
             count(distinct bidder) filter (where price >= 1000000) AS rank3_bidders,
             count(distinct auction) AS total_auctions,
             count(distinct auction) filter (where price < 10000) AS rank1_auctions,
             count(distinct auction) filter (where price >= 10000 and price < 1000000)
               AS rank2_auctions,
             count(distinct auction) filter (where price >= 1000000) AS rank3_auctions
        FROM bid
        GROUP BY DATE_FORMAT(`dateTime`, 'yyyy-MM-dd');
    """
    return report(lambda bid: (day(bid["dateTime"]),), ("day",), False, output)


def q16(params: Params, output: str) -> Any:
    """Query 16, channel statistics report: q15 per channel and day, with the latest minute
    (``HH:mm``) of a bid. Output (``table``): ``[channel, day]`` -> ``{channel, day, minute,
    total_bids, ..., rank3_auctions}``.

    .. code-block:: sql

        SELECT
            channel,
            DATE_FORMAT(`dateTime`, 'yyyy-MM-dd') as `day`,
            max(DATE_FORMAT(`dateTime`, 'HH:mm')) as `minute`,
            count(*) AS total_bids,
            ... (the counts of q15)
        FROM bid
        GROUP BY channel, DATE_FORMAT(`dateTime`, 'yyyy-MM-dd');
    """
    return report(lambda bid: (bid["channel"], day(bid["dateTime"])), ("channel", "day"), True,
                  output)


QUERIES = [
    Query("q15", "bidding statistics report", "table", q15, (BID_TOPIC,)),
    Query("q16", "channel statistics report", "table", q16, (BID_TOPIC,)),
]
