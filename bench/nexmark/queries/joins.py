"""Joins that enrich: persons with their auctions (q3, a foreign-key table join), bids with
their auction (q20, a stream-table join, and a windowed stream-stream join for a bid made
before its auction) and with a side input (q13, a join with a GlobalKTable).
"""

from __future__ import annotations

from typing import Any

from bench.nexmark.events import AUCTION_TOPIC, BID_TOPIC, PERSON_TOPIC, SIDE_INPUT_TOPIC
from bench.nexmark.fields import BID_FIELDS
from bench.nexmark.queries.base import AUCTION_FIELDS, Params, Query

Q3_STATES = frozenset(("OR", "ID", "CA"))


def q3(params: Params, output: str) -> Any:
    """Query 3, local item suggestion: who sells in OR, ID or CA in category 10, and which
    auctions. Both sides are unbounded tables (every auction and person is inserted once), so
    the SQL join is a KTable-KTable join on a foreign key: the auctions table joins the persons
    table on ``seller``, whichever of the two arrives first. Output (``table``): auction id ->
    ``{name, city, state, id}``.

    .. code-block:: sql

        SELECT P.name, P.city, P.state, A.id
        FROM auction AS A INNER JOIN person AS P on A.seller = P.id
        WHERE A.category = 10 and (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
    """
    from streamtable import StreamsBuilder

    b = StreamsBuilder()
    auctions = b.table(AUCTION_TOPIC).filter(lambda id_, a: a["category"] == 10)
    sellers = b.table(PERSON_TOPIC).filter(lambda id_, p: p["state"] in Q3_STATES,
                                           materialized="q3-sellers")
    (auctions
     .join(sellers, lambda a, p: {"name": p["name"], "city": p["city"], "state": p["state"],
                                  "id": a["id"]},
           foreign_key_extractor=lambda a: a["seller"])
     .to_stream()
     .to(output))
    return b.build()


def q13(params: Params, output: str) -> Any:
    """Query 13, bounded side input join: every bid with the side input's value for
    ``auction % 10000``. The side input (``nexmark-side-input``, filled from the spec's
    ``side_input.txt`` rows) is a GlobalKTable, read in full before the bids that need it.
    Output (``append``): auction -> ``{auction, bidder, price, dateTime, value}``.

    .. code-block:: sql

        SELECT B.auction, B.bidder, B.price, B.`dateTime`, S.`value`
        FROM (SELECT *, PROCTIME() as p_time FROM bid) B
        JOIN side_input FOR SYSTEM_TIME AS OF B.p_time AS S
        ON mod(B.auction, 10000) = S.key;
    """
    from streamtable import StreamsBuilder

    b = StreamsBuilder()
    side = b.global_table(SIDE_INPUT_TOPIC)
    (b.stream(BID_TOPIC)
     .join(side, lambda auction, bid: bid["auction"] % 10_000,
           lambda bid, value: {"auction": bid["auction"], "bidder": bid["bidder"],
                               "price": bid["price"], "dateTime": bid["dateTime"],
                               "value": value})
     .to(output))
    return b.build()


def bid_with_auction(bid: dict[str, Any], auction: dict[str, Any]) -> dict[str, Any]:
    """q20's row: the bid's fields and the auction's, ``dateTime``/``extra`` of each renamed."""
    row = {f: bid[f] for f in BID_FIELDS if f not in ("dateTime", "extra")}
    row["bid_dateTime"], row["bid_extra"] = bid["dateTime"], bid["extra"]
    for f in AUCTION_FIELDS:
        if f not in ("id", "dateTime", "extra"):
            row[f] = auction[f]
    row["auction_dateTime"], row["auction_extra"] = auction["dateTime"], auction["extra"]
    return row


def q20(params: Params, output: str) -> Any:
    """Query 20, expand bid with auction: every bid on an auction of category 10, with the
    auction's fields.

    The SQL join has no time condition. Each bid looks its auction up in the auctions table,
    which holds every auction that started before or at the bid's time (a task processes its
    records in timestamp order, a table's first at equal timestamps). A bid may also name an
    auction made after it (one of the next 10: the spec's id lead), at most
    ``Params.bid_before_ms`` later; only such a bid, not in the table yet, waits for its
    auction in a windowed stream-stream join. So the windowed join stores a few bids in a
    hundred, not every bid. Bids and auctions are co-partitioned by auction id: no repartition.
    Output (``append``): auction -> the joined row.

    .. code-block:: sql

        SELECT auction, bidder, price, channel, url, B.`dateTime`, B.extra,
            itemName, description, initialBid, reserve, A.`dateTime`, expires, seller,
            category, A.extra
        FROM bid AS B INNER JOIN auction AS A on B.auction = A.id
        WHERE A.category = 10;
    """
    from streamtable import JoinWindows, Materialized, StreamsBuilder

    b = StreamsBuilder()
    # no cache: each auction goes on to the windowed join when it comes, at its own time
    auctions = b.table(AUCTION_TOPIC,
                       materialized=Materialized.as_("q20-auctions").with_caching_disabled())
    looked_up = b.stream(BID_TOPIC).left_join(auctions, lambda bid, a: (bid, a))
    known = (looked_up
             .filter(lambda id_, found: found[1] is not None and found[1]["category"] == 10)
             .map_values(lambda found: bid_with_auction(*found)))
    early = (looked_up
             .filter(lambda id_, found: found[1] is None)
             .map_values(lambda found: found[0]))
    # an auction at t joins the bids in [t - before, t] that came before it
    reach = JoinWindows.of_time_difference_and_grace(0, params.grace_ms).before(
        params.bid_before_ms)
    (auctions.to_stream()
     .filter(lambda id_, a: a["category"] == 10)
     .join(early, lambda a, bid: bid_with_auction(bid, a), reach)
     .merge(known)
     .to(output))
    return b.build()


QUERIES = [
    Query("q3", "local item suggestion", "table", q3, (AUCTION_TOPIC, PERSON_TOPIC)),
    Query("q13", "bounded side input join", "append", q13, (BID_TOPIC, SIDE_INPUT_TOPIC)),
    Query("q20", "expand bid with auction", "append", q20, (BID_TOPIC, AUCTION_TOPIC)),
]
