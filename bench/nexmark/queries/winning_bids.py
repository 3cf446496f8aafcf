"""The winning bids (q9) and what is built on them: the average winning price per category
(q4) and per seller over their latest auctions (q6).

A bid counts for an auction when ``B.dateTime BETWEEN A.dateTime AND A.expires``. Each bid
joins the auctions table (bids and auctions are co-partitioned by auction id: no repartition),
then the filter keeps the SQL's pairs. The join sees every auction that started before or at
the bid's time: a task processes its records in timestamp order across its partitions, a
table's first at equal timestamps, and a batch that takes only part of the input ends at the
same timestamp on every partition, a table's records at it first
(:mod:`streamtable.engine.ordering`, :mod:`streamtable.kafka.batch_cut`). The join stores no
bid: a windowed stream-stream join of the same pairs stores every bid for the grace period.
The highest bid per auction is then a table (``reduce``) whose rows change as higher bids come:
q4 and q6 aggregate that table with an adder and a subtractor, so a winner that is overtaken
is taken out of its category's or seller's aggregate, which is what the SQL's updating join
means.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.nexmark.events import AUCTION_TOPIC, BID_TOPIC
from bench.nexmark.queries.base import Params, Query


def bid_in_auction(bid: dict[str, Any], auction: dict[str, Any]) -> dict[str, Any]:
    """q9's row: the auction's fields, then the bid's (``bid_dateTime``, ``bid_extra``)."""
    row = dict(auction)
    row["auction"], row["bidder"], row["price"] = bid["auction"], bid["bidder"], bid["price"]
    row["bid_dateTime"], row["bid_extra"] = bid["dateTime"], bid["extra"]
    return row


def sale_in_auction(bid: dict[str, Any], auction: dict[str, Any]) -> dict[str, Any]:
    """q4's and q6's row: the fields of q9's that they read, so that their winners table keeps
    a few numbers an auction rather than every field."""
    return {"dateTime": auction["dateTime"], "expires": auction["expires"],
            "category": auction["category"], "seller": auction["seller"],
            "price": bid["price"], "bid_dateTime": bid["dateTime"]}


def higher(best: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """``ORDER BY B.price DESC, B.dateTime ASC``: the better of two bids (ties keep ``best``)."""
    if (row["price"], -row["bid_dateTime"]) > (best["price"], -best["bid_dateTime"]):
        return row
    return best


def in_auction_time(id_: Any, row: dict[str, Any]) -> bool:
    """``B.dateTime BETWEEN A.dateTime AND A.expires``."""
    return bool(row["dateTime"] <= row["bid_dateTime"] <= row["expires"])


def winning_bids(builder: Any, row: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]
                 = bid_in_auction) -> Any:
    """The table auction id -> its highest bid within the auction's time, as ``row(bid,
    auction)`` (q9's by default)."""
    auctions = builder.table(AUCTION_TOPIC)
    return (builder.stream(BID_TOPIC)
            .join(auctions, row)
            .filter(in_auction_time)
            .group_by_key()
            .reduce(higher))


def q9(params: Params, output: str) -> Any:
    """Query 9, winning bids: each auction with its highest bid (the earliest of equal ones).
    Output (``table``): auction id -> the auction's fields and the bid's.

    .. code-block:: sql

        SELECT id, itemName, description, initialBid, reserve, `dateTime`, expires, seller,
            category, extra, auction, bidder, price, bid_dateTime, bid_extra
        FROM (
           SELECT A.*, B.auction, B.bidder, B.price, B.`dateTime` AS bid_dateTime,
             B.extra AS bid_extra,
             ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.`dateTime` ASC)
               AS rownum
           FROM auction A, bid B
           WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires)
        WHERE rownum <= 1;
    """
    from streamtable import StreamsBuilder

    b = StreamsBuilder()
    winning_bids(b).to_stream().to(output)
    return b.build()


def add_price(category: Any, winner: tuple[int, int], total: tuple[int, int]
              ) -> tuple[int, int]:
    return total[0] + winner[1], total[1] + 1


def remove_price(category: Any, winner: tuple[int, int], total: tuple[int, int]
                 ) -> tuple[int, int] | None:
    remaining = (total[0] - winner[1], total[1] - 1)
    return remaining if remaining[1] else None


def q4(params: Params, output: str) -> Any:
    """Query 4, average price for a category: the average winning price of the auctions of
    each category. The winners table is re-grouped by category into ``(sum, count)`` with an
    adder and a subtractor: when an auction's winner is overtaken, its old price leaves the
    sum. Output (``table``): category -> ``sum // count``.

    .. code-block:: sql

        SELECT Q.category, AVG(Q.final)
        FROM (
            SELECT MAX(B.price) AS final, A.category
            FROM auction A, bid B
            WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires
            GROUP BY A.id, A.category
        ) Q
        GROUP BY Q.category;
    """
    from streamtable import StreamsBuilder

    b = StreamsBuilder()
    (winning_bids(b, sale_in_auction)
     .group_by(lambda id_, w: (w["category"], (id_, w["price"])))
     .aggregate(lambda: (0, 0), add_price, remove_price)
     .map_values(lambda total: total[0] // total[1])
     .to_stream()
     .to(output))
    return b.build()


#: ``ROWS BETWEEN 10 PRECEDING AND CURRENT ROW``
Q6_ROWS = 11


def add_sale(seller: Any, sale: tuple[int, int, int], sales: dict[int, tuple[int, int]]
             ) -> dict[int, tuple[int, int]]:
    auction, when, price = sale
    return {**sales, auction: (when, price)}


def remove_sale(seller: Any, sale: tuple[int, int, int], sales: dict[int, tuple[int, int]]
                ) -> dict[int, tuple[int, int]] | None:
    rest = {a: s for a, s in sales.items() if a != sale[0]}
    return rest or None


def latest_average(sales: dict[int, tuple[int, int]]) -> int:
    """The average price of the :data:`Q6_ROWS` latest sales (by bid time, then auction)."""
    latest = sorted(((when, auction, price) for auction, (when, price) in sales.items()),
                    reverse=True)[:Q6_ROWS]
    return sum(p for _, _, p in latest) // len(latest)


def q6(params: Params, output: str) -> Any:
    """Query 6, average selling price by seller: the average winning price of each seller's
    latest auctions (the current row and the 10 before it, ordered by the winning bid's time).
    Flink SQL cannot run it (its OVER window does not take retractions); here the winners
    table is re-grouped by seller into ``auction -> (bid time, price)`` with an adder and a
    subtractor, so an overtaken winner is replaced. Output (``table``): seller -> the average
    (integer).

    .. code-block:: sql

        SELECT Q.seller, AVG(Q.price) OVER
            (PARTITION BY Q.seller ORDER BY Q.`dateTime` ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)
        FROM (
            SELECT *, ROW_NUMBER() OVER (PARTITION BY A.id, A.seller ORDER BY B.price DESC)
              AS rownum
            FROM (SELECT A.id, A.seller, B.price, B.`dateTime`
                FROM auction AS A, bid AS B
                WHERE A.id = B.auction and B.`dateTime` between A.`dateTime` and A.expires)
            WHERE rownum <= 1
        ) AS Q;
    """
    from streamtable import StreamsBuilder

    b = StreamsBuilder()
    (winning_bids(b, sale_in_auction)
     .group_by(lambda id_, w: (w["seller"], (id_, w["bid_dateTime"], w["price"])))
     .aggregate(dict, add_sale, remove_sale)
     .map_values(latest_average)
     .to_stream()
     .to(output))
    return b.build()


QUERIES = [
    Query("q4", "average price for a category", "table", q4, (AUCTION_TOPIC, BID_TOPIC)),
    Query("q6", "average selling price by seller", "table", q6, (AUCTION_TOPIC, BID_TOPIC)),
    Query("q9", "winning bids", "table", q9, (AUCTION_TOPIC, BID_TOPIC)),
]
