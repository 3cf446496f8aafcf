"""The bidding statistics reports: per day (q15) and per channel and day (q16), the number of
bids, of distinct bidders and of distinct auctions, in all and per price rank.

Every figure is a count of keys. Each bid adds one record per (group, slot, item) to a table of
counts: per bidder and per auction for the distinct counts (in all and in the bid's price rank),
one item for the bid counts, and (q16) the bid's minute. That table, re-grouped by the report's
group, gathers its rows into one value with an adder and a subtractor. A bidder's first bid in a
group adds a row (+1); a later one updates the row, which the re-grouping sees as the old row
taken out (-1) and the new one put in (+1): the distinct count is exact and needs no set of ids
in one value. A bid count is the count of its row, the latest minute the largest minute whose
row exists (rows of a count are never deleted). Counting keys lets the records of one key be
counted where they are read, before the shuffle (``count()``'s map-side combine): each task
sends one partial count per key per batch rather than a record per bid.
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


def add_row(group: Any, row: tuple[str, Any, int], figures: dict[str, Any]) -> dict[str, Any]:
    """A row of the counts table, ``(slot, item, count)``, into its group's figures."""
    slot, item, n = row
    if slot.endswith("_bids"):
        return {**figures, slot: n}
    if slot == "minute":
        latest = figures.get("minute")
        return figures if latest is not None and latest >= item else {**figures, slot: item}
    return {**figures, slot: figures.get(slot, 0) + 1}


def remove_row(group: Any, row: tuple[str, Any, int],
               figures: dict[str, Any]) -> dict[str, Any]:
    """A row taken out of its group's figures: always followed by its update's new row (no row
    of a count is deleted), which sets a bid count and keeps the latest minute again."""
    slot = row[0]
    if slot.endswith("_bids") or slot == "minute":
        return figures
    return {**figures, slot: figures[slot] - 1}


def report(group_of: Callable[[dict[str, Any]], tuple[Any, ...]],
           group_fields: tuple[str, ...], with_minute: bool, output: str) -> Any:
    """The topology of a report grouped by ``group_of(bid)`` (a tuple)."""
    from streamtable import StreamsBuilder

    b = StreamsBuilder()

    # (a null value would be dropped by the aggregation, as in Kafka Streams)
    def rows(auction: Any, bid: dict[str, Any]) -> list[tuple[tuple[Any, ...], int]]:
        group, rank = group_of(bid), price_rank(bid["price"])
        out = [((*group, f"{slot}_{kind}", who), 1)
               for kind, who in (("bidders", bid["bidder"]), ("auctions", bid["auction"]))
               for slot in ("total", rank)]
        out += [((*group, "total_bids", None), 1), ((*group, f"{rank}_bids", None), 1)]
        if with_minute:
            out.append(((*group, "minute", minute(bid["dateTime"])), 1))
        return out

    def report_row(group: tuple[Any, ...], figures: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = dict(zip(group_fields, group, strict=True))
        if with_minute:
            out["minute"] = figures.get("minute")
        for kind in ("bids", "bidders", "auctions"):
            for slot in SLOTS:
                out[f"{slot}_{kind}"] = figures.get(f"{slot}_{kind}", 0)
        return out

    (b.stream(BID_TOPIC)
     .flat_map(rows)
     .group_by_key()
     .count()
     .group_by(lambda k, n: (k[:-2], (k[-2], k[-1], n)))
     .aggregate(dict, add_row, remove_row)
     .map_values(report_row)
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
