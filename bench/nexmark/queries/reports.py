"""The bidding statistics reports: per day (q15) and per channel and day (q16), the number of
bids, of distinct bidders and of distinct auctions, in all and per price rank. The two are
written in two shapes, each where it is the faster one.

**q15, a count of keys** (one group a day: every bid lands in it). Each bid adds one record per
(group, slot, item) to a table of counts: per bidder and per auction for the distinct counts (in
all and in the bid's price rank), and one item for the bid count of its price rank (the total is
their sum). That table, re-grouped by the day, gathers its rows into one value with an adder
and a subtractor. A bidder's first bid adds a row (+1); a later one updates the row, which the
re-grouping sees as the old row taken out (-1) and the new one put in (+1): the distinct count
is exact and needs no set of ids in one value. A bid count is the count of its row. Counting
keys lets the records of one key be counted where they are read, before the shuffle
(``count()``'s map-side combine): each task sends one partial count per key per batch rather
than a record per bid, so the day's one group is not one task's work.

**q16, ids seen for the first time** (~10,000 channels a day, most with a few dozen bids: their
rows would not combine). Each bid goes once, reduced to ``(bidder, auction, rank, minute)``, to
its group's task, where a processor of the Processor API keeps in a store the bidders and
auctions the group has seen, with the price ranks they were seen in, and marks which of the
bid's ids are new in all or in its rank; a plain aggregate adds them up.
Kafka Streams' way to deduplicate: one record per bid through one shuffle, instead of seven
rows through two. Half of the bids are on four channels: the shuffle has 8 partitions rather
than the input's 2, so that those four rarely share a task (at 1,000,000 events 24.9-28.1 s
against 27.2-31.4 s; at 10,000,000 on RocksDB stores 30,930 events/s against 21,611).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.nexmark.dates import day, minute
from bench.nexmark.events import BID_TOPIC
from bench.nexmark.queries.base import Params, Query
from streamtable import Processor

RANK1_BELOW, RANK2_BELOW = 10_000, 1_000_000
SLOTS = ("total", "rank1", "rank2", "rank3")


def price_rank(price: int) -> str:
    return "rank1" if price < RANK1_BELOW else "rank2" if price < RANK2_BELOW else "rank3"


def figures_row(group_fields: tuple[str, ...], with_minute: bool
                ) -> Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]:
    """The output row of a group and its figures (absent figures are 0)."""

    def row(group: tuple[Any, ...], figures: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = dict(zip(group_fields, group, strict=True))
        if with_minute:
            out["minute"] = figures.get("minute")
        for kind in ("bids", "bidders", "auctions"):
            for slot in SLOTS:
                out[f"{slot}_{kind}"] = figures.get(f"{slot}_{kind}", 0)
        return out

    return row


def group_key(group: tuple[Any, ...], _: Any) -> Any:
    """The output key: the group's one field, or its fields as a list."""
    return list(group) if len(group) > 1 else group[0]


def add_row(group: Any, row: tuple[str, Any, int], figures: dict[str, Any]) -> dict[str, Any]:
    """A row of the counts table, ``(slot, item, count)``, into its group's figures: a price
    rank's bid count (``total_bids`` is their sum) or an id new to a distinct count."""
    slot, item, n = row
    if slot.endswith("_bids"):
        return {**figures, slot: n, "total_bids": figures.get("total_bids", 0) + n}
    return {**figures, slot: figures.get(slot, 0) + 1}


def remove_row(group: Any, row: tuple[str, Any, int],
               figures: dict[str, Any]) -> dict[str, Any]:
    """A row taken out of its group's figures: always followed by its update's new row (no row
    of a count is deleted), which sets a rank's bid count again."""
    slot, item, n = row
    if slot.endswith("_bids"):
        return {**figures, "total_bids": figures["total_bids"] - n}
    return {**figures, slot: figures[slot] - 1}


# a price rank's slots: its distinct bidders, its distinct auctions, its bids
RANK_SLOTS = {rank: (f"{rank}_bidders", f"{rank}_auctions", f"{rank}_bids")
              for rank in SLOTS[1:]}


def counted_report(group_of: Callable[[dict[str, Any]], tuple[Any, ...]],
                   group_fields: tuple[str, ...], output: str) -> Any:
    """The topology of a report grouped by ``group_of(bid)`` (a tuple) as a count of keys."""
    from streamtable import StreamsBuilder

    b = StreamsBuilder()

    # (a null value would be dropped by the aggregation, as in Kafka Streams)
    def rows(auction: Any, bid: dict[str, Any]) -> list[tuple[tuple[Any, ...], int]]:
        group = group_of(bid)
        bidders, auctions, bids = RANK_SLOTS[price_rank(bid["price"])]
        bidder, auction = bid["bidder"], bid["auction"]
        return [((*group, "total_bidders", bidder), 1), ((*group, bidders, bidder), 1),
                ((*group, "total_auctions", auction), 1), ((*group, auctions, auction), 1),
                ((*group, bids, None), 1)]

    (b.stream(BID_TOPIC)
     .flat_map(rows)
     .group_by_key()
     .count()
     .group_by(lambda k, n: (k[:-2], (k[-2], k[-1], n)))
     .aggregate(dict, add_row, remove_row)
     .map_values(figures_row(group_fields, with_minute=False))
     .to_stream(group_key)
     .to(output))
    return b.build()


# a price rank's bit in the ranks an id was seen in
RANK_BITS = {"rank1": 1, "rank2": 2, "rank3": 4}


class FirstSeen(Processor):
    """Marks which of a bid's bidder and auction its group sees for the first time, in all and
    in the bid's price rank: the value ``(bidder, auction, rank, minute)`` becomes ``(rank,
    new, minute)``, ``new`` a bit per slot of :func:`add_bid`. Its store ``seen`` holds for
    each ``(group, "bidder" or "auction", id)`` seen so far the price ranks it was seen in
    (:data:`RANK_BITS`): a bid looks up two keys."""

    def init(self, context: Any) -> None:
        self.seen = context.get_state_store("seen")

    def process(self, record: Any) -> None:
        group = record.key
        bidder, auction, rank, at = record.value
        seen, bit, new = self.seen, RANK_BITS[rank], 0
        for shift, key in ((0, (group, "bidder", bidder)), (2, (group, "auction", auction))):
            ranks = seen.get(key)
            if ranks is None:  # new in all and in the rank
                seen.put(key, bit)
                new |= 0b11 << shift
            elif not ranks & bit:  # new in the rank
                seen.put(key, ranks | bit)
                new |= 0b10 << shift
        self.forward(record.with_value((rank, new, at)))


def add_bid(group: Any, bid: tuple[str, int, str], figures: dict[str, Any]) -> dict[str, Any]:
    """A bid marked by :class:`FirstSeen` into its group's figures."""
    rank, new, at = bid
    bidders, auctions, bids = RANK_SLOTS[rank]
    out = {**figures}
    out["total_bids"] = out.get("total_bids", 0) + 1
    out[bids] = out.get(bids, 0) + 1
    for bit, slot in enumerate(("total_bidders", bidders, "total_auctions", auctions)):
        if new >> bit & 1:
            out[slot] = out.get(slot, 0) + 1
    latest = out.get("minute")
    if latest is None or at > latest:
        out["minute"] = at
    return out


def first_seen_report(group_of: Callable[[dict[str, Any]], tuple[Any, ...]],
                      group_fields: tuple[str, ...], output: str) -> Any:
    """The topology of a report grouped by ``group_of(bid)`` (a tuple), with the latest minute,
    as ids seen for the first time."""
    from streamtable import StreamsBuilder
    from streamtable.dsl.stores import Stores

    b = StreamsBuilder()
    b.add_state_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("seen")))
    (b.stream(BID_TOPIC)
     .map(lambda _, bid: (group_of(bid), (bid["bidder"], bid["auction"],
                                          price_rank(bid["price"]), minute(bid["dateTime"]))))
     .repartition(partitions=8)
     .process_values(FirstSeen, "seen")
     .group_by_key()
     .aggregate(dict, add_bid)
     .map_values(figures_row(group_fields, with_minute=True))
     .to_stream(group_key)
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
    return counted_report(lambda bid: (day(bid["dateTime"]),), ("day",), output)


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
    return first_seen_report(lambda bid: (bid["channel"], day(bid["dateTime"])),
                             ("channel", "day"), output)


QUERIES = [
    Query("q15", "bidding statistics report", "table", q15, (BID_TOPIC,)),
    Query("q16", "channel statistics report", "table", q16, (BID_TOPIC,)),
]
