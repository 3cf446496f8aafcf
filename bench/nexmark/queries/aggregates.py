"""Unbounded aggregations of the bids: statistics per auction and day (q17), the last bid of
each bidder on each auction (q18) and the ten highest bids of each auction (q19).
"""

from __future__ import annotations

from typing import Any

from bench.nexmark.dates import day
from bench.nexmark.events import BID_TOPIC
from bench.nexmark.fields import BID_FIELDS
from bench.nexmark.queries.base import Params, Query, pick
from streamtable import Processor

RANK1_BELOW, RANK2_BELOW = 10_000, 1_000_000


def no_stats() -> tuple[int, int, int, int, int | None, int | None, int]:
    return 0, 0, 0, 0, None, None, 0


def add_bid(key: Any, price: int, stats: tuple[Any, ...]) -> tuple[Any, ...]:
    """``(count, rank1, rank2, rank3, min, max, sum)`` with one more bid."""
    n, r1, r2, r3, low, high, total = stats
    return (n + 1, r1 + (price < RANK1_BELOW),
            r2 + (RANK1_BELOW <= price < RANK2_BELOW), r3 + (price >= RANK2_BELOW),
            price if low is None else min(low, price),
            price if high is None else max(high, price), total + price)


def q17_row(key: tuple[int, str], stats: tuple[Any, ...]) -> dict[str, Any]:
    n, r1, r2, r3, low, high, total = stats
    return {"auction": key[0], "day": key[1], "total_bids": n, "rank1_bids": r1,
            "rank2_bids": r2, "rank3_bids": r3, "min_price": low, "max_price": high,
            "avg_price": total // n, "sum_price": total}


def q17(params: Params, output: str) -> Any:
    """Query 17, auction statistics report: per auction and day, the number of bids (in all
    and in three price ranks), and the lowest, highest, average and total price. Output
    (``table``): ``[auction, day]`` -> the statistics.

    .. code-block:: sql

        SELECT auction, DATE_FORMAT(`dateTime`, 'yyyy-MM-dd') as `day`,
             count(*) AS total_bids,
             count(*) filter (where price < 10000) AS rank1_bids,
             count(*) filter (where price >= 10000 and price < 1000000) AS rank2_bids,
             count(*) filter (where price >= 1000000) AS rank3_bids,
             min(price) AS min_price, max(price) AS max_price,
             avg(price) AS avg_price, sum(price) AS sum_price
        FROM bid
        GROUP BY auction, DATE_FORMAT(`dateTime`, 'yyyy-MM-dd');
    """
    from streamtable import StreamsBuilder

    b = StreamsBuilder()
    (b.stream(BID_TOPIC)
     .map(lambda auction, bid: ((auction, day(bid["dateTime"])), bid["price"]))
     .group_by_key()
     .aggregate(no_stats, add_bid)
     .map_values(q17_row)
     .to_stream()
     .to(output))
    return b.build()


#: the store of :class:`LastBid`: (bidder, auction) -> the time of the latest bid
Q18_LAST = "q18-last-bid-times"


class LastBid(Processor):
    """Forwards a bid, keyed ``(bidder, auction)``, when it is at least as late as the
    bidder's latest on the auction so far (``ORDER BY dateTime DESC``: of equal times, the one
    that came last). Bids are keyed by auction, so every bid of a
    ``(bidder, auction)`` is in one partition and this task sees them all: unlike a
    ``group_by`` on the new key, nothing is repartitioned. The store keeps one time per key.

    >>> from streamtable import StreamsBuilder, TopologyTestDriver
    >>> from streamtable.dsl.stores import Stores
    >>> b = StreamsBuilder()
    >>> _ = b.add_state_store(Stores.key_value_store_builder(
    ...     Stores.in_memory_key_value_store(Q18_LAST)))
    >>> b.stream("bids").process(LastBid, Q18_LAST).to("out")
    >>> driver = TopologyTestDriver(b.build())
    >>> bids = driver.create_input_topic("bids")
    >>> for bidder, ts in ((7, 10), (8, 12), (7, 9), (7, 11)):
    ...     bids.pipe_input(1, {"bidder": bidder, "dateTime": ts}, timestamp=ts)
    >>> [(k, v["dateTime"]) for k, v in driver.create_output_topic("out").read_key_values()]
    [([7, 1], 10), ([8, 1], 12), ([7, 1], 11)]
    """

    def init(self, context: Any) -> None:
        self.context = context
        self.latest = context.get_state_store(Q18_LAST)

    def process(self, record: Any) -> None:
        bid = record.value
        key = (bid["bidder"], record.key)
        latest = self.latest.get(key)
        if latest is None or bid["dateTime"] >= latest:
            self.latest.put(key, bid["dateTime"])
            self.context.forward(record.with_key(key))


def q18(params: Params, output: str) -> Any:
    """Query 18, find last bid: each bidder's latest bid on each auction (deduplication), in
    the task of the bids' partition (:class:`LastBid`). Output (``table``): ``[bidder,
    auction]`` -> the bid.

    .. code-block:: sql

        SELECT auction, bidder, price, channel, url, `dateTime`, extra
         FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY `dateTime` DESC)
                 AS rank_number
               FROM bid)
         WHERE rank_number <= 1;
    """
    from streamtable import StreamsBuilder
    from streamtable.dsl.stores import Stores

    b = StreamsBuilder()
    b.add_state_store(Stores.key_value_store_builder(
        Stores.in_memory_key_value_store(Q18_LAST)))
    b.stream(BID_TOPIC).process(LastBid, Q18_LAST).to(output)
    return b.build()


TOP_N = 10


def top_bids(auction: Any, bid: dict[str, Any], top: list[dict[str, Any]]
             ) -> list[dict[str, Any]]:
    """The :data:`TOP_N` highest bids, highest first (of equal prices, the earlier first)."""
    if len(top) == TOP_N and bid["price"] <= top[-1]["price"]:
        return top
    at = len(top)
    while at > 0 and top[at - 1]["price"] < bid["price"]:
        at -= 1
    return (top[:at] + [pick(bid, BID_FIELDS)] + top[at:])[:TOP_N]


def ranked(top: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**bid, "rank_number": rank} for rank, bid in enumerate(top, 1)]


def q19(params: Params, output: str) -> Any:
    """Query 19, auction top-10 price: the ten highest bids of each auction (a top-N). Output
    (``table``): auction -> ``[bid + {rank_number}, ...]``, rank 1 first.

    .. code-block:: sql

        SELECT * FROM
        (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number
         FROM bid)
        WHERE rank_number <= 10;
    """
    from streamtable import StreamsBuilder

    b = StreamsBuilder()
    (b.stream(BID_TOPIC)
     .group_by_key()
     .aggregate(list, top_bids)
     .map_values(ranked)
     .to_stream()
     .to(output))
    return b.build()


QUERIES = [
    Query("q17", "auction statistics report", "table", q17, (BID_TOPIC,)),
    Query("q18", "find last bid", "table", q18, (BID_TOPIC,)),
    Query("q19", "auction top-10 price", "table", q19, (BID_TOPIC,)),
]
