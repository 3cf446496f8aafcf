"""The windowed queries, all in event time: hot items over hopping windows (q5), the highest
bid per tumbling window (q7), new users per tumbling window (q8) and bidder sessions (q11).

A window's result is updated as its records come (Kafka Streams' default, emit on update);
the output topic's last value per window is the SQL's result. Grace periods are
``Params.grace_ms``: a window keeps taking records that far behind its task's stream time.
"""

from __future__ import annotations

from typing import Any

from bench.nexmark.events import AUCTION_TOPIC, BID_TOPIC, PERSON_TOPIC
from bench.nexmark.queries.base import Params, Query
from streamtable import Processor

Q5_SIZE_MS, Q5_ADVANCE_MS = 10_000, 2_000


def set_count(window: Any, auction_count: tuple[int, int], counts: dict[int, int]
              ) -> dict[int, int]:
    auction, count = auction_count
    return {**counts, auction: count}


def drop_count(window: Any, auction_count: tuple[int, int], counts: dict[int, int]
               ) -> dict[int, int] | None:
    rest = {a: n for a, n in counts.items() if a != auction_count[0]}
    return rest or None


def hottest(counts: dict[int, int]) -> list[list[int]]:
    """The auctions with the most bids, ``[[auction, num], ...]`` sorted by auction."""
    top = max(counts.values())
    return [[a, n] for a, n in sorted(counts.items()) if n == top]


def q5(params: Params, output: str) -> Any:
    """Query 5, hot items: the auctions with the most bids in each 10-second window, every 2
    seconds. The bid counts per auction and hopping window are a windowed table; re-grouped by
    window (with a subtractor, as counts grow) it gives each window's counts, and their
    maximum. Output (``table``): ``[window_start, window_end]`` -> ``[[auction, num], ...]``.

    .. code-block:: sql

        SELECT AuctionBids.auction, AuctionBids.num
         FROM (
           SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
           FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND,
                          INTERVAL '10' SECOND))
           GROUP BY auction, window_start, window_end
         ) AS AuctionBids
         JOIN (
           SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
           FROM (
             SELECT count(*) AS num, window_start AS starttime, window_end AS endtime
             FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND,
                            INTERVAL '10' SECOND))
             GROUP BY auction, window_start, window_end
             ) AS CountBids
           GROUP BY CountBids.starttime, CountBids.endtime
         ) AS MaxBids
         ON AuctionBids.starttime = MaxBids.starttime AND
            AuctionBids.endtime = MaxBids.endtime AND
            AuctionBids.num >= MaxBids.maxn;
    """
    from streamtable import StreamsBuilder, TimeWindows

    b = StreamsBuilder()
    hopping = (TimeWindows.of(Q5_SIZE_MS).advance_by(Q5_ADVANCE_MS)
               .with_grace(params.grace_ms))
    (b.stream(BID_TOPIC)
     .group_by_key()
     .windowed_by(hopping)
     .count()
     .group_by(lambda w, n: ((w.start, w.end), (w.key, n)))
     .aggregate(dict, set_count, drop_count)
     .map_values(hottest)
     .to_stream()
     .to(output))
    return b.build()


Q7_SIZE_MS = 10_000


def q7_windows(auction: Any, bid: dict[str, Any]) -> list[tuple[int, tuple[str, Any]]]:
    """The windows a bid is a candidate of: its own tumbling window and, when it is exactly at
    a window's end, also the window before (the SQL's BETWEEN includes the end)."""
    ts = bid["dateTime"]
    start = ts - ts % Q7_SIZE_MS
    row = {"auction": bid["auction"], "price": bid["price"], "bidder": bid["bidder"],
           "dateTime": ts, "extra": bid["extra"]}
    own = [(start, ("in", row))]
    return own + [(start - Q7_SIZE_MS, ("end", row))] if ts == start else own


#: the store of :class:`LocalHighest`: (window start, slot) -> the highest price seen
Q7_LOCAL_HIGHEST = "q7-local-highest"


class LocalHighest(Processor):
    """Forwards a bid only when its price is at least the highest of the earlier bids of its
    window and slot in this task: a lower one cannot be the window's highest. The grouping
    then repartitions a few bids a window instead of every bid, as the two-phase
    (local-global) aggregation of SQL engines does. The store keeps one price per window and
    slot: two entries per 10 s of event time.

    >>> from streamtable import StreamsBuilder, TopologyTestDriver
    >>> from streamtable.dsl.stores import Stores
    >>> b = StreamsBuilder()
    >>> _ = b.add_state_store(Stores.key_value_store_builder(
    ...     Stores.in_memory_key_value_store(Q7_LOCAL_HIGHEST)))
    >>> b.stream("in").process_values(LocalHighest, Q7_LOCAL_HIGHEST).to("out")
    >>> driver = TopologyTestDriver(b.build())
    >>> bids = driver.create_input_topic("in")
    >>> for price in (5, 3, 5, 8):
    ...     bids.pipe_input(0, ["in", {"price": price}])
    >>> [v[1]["price"] for v in driver.create_output_topic("out").read_values()]
    [5, 5, 8]
    """

    def init(self, context: Any) -> None:
        self.context = context
        self.highest = context.get_state_store(Q7_LOCAL_HIGHEST)

    def process(self, record: Any) -> None:
        where, row = record.value
        slot = f"{record.key}/{where}"
        highest = self.highest.get(slot)
        if highest is None or row["price"] > highest:
            self.highest.put(slot, row["price"])
        elif row["price"] < highest:
            return
        self.context.forward(record)


def highest_bids(start: int, candidate: tuple[str, dict[str, Any]],
                 best: dict[str, Any]) -> dict[str, Any]:
    """Per window: the highest price of its own bids and the bids at that price, and the
    highest-priced bids exactly at its end (they join if their price is the window's max)."""
    where, row = candidate
    slot = "max" if where == "in" else "edge"
    price = best[f"{slot}_price"]
    if price is None or row["price"] > price:
        return {**best, f"{slot}_price": row["price"], slot: [row]}
    if row["price"] == price:
        return {**best, slot: best[slot] + [row]}
    return best


def no_bids() -> dict[str, Any]:
    return {"max_price": None, "max": [], "edge_price": None, "edge": []}


def window_top(best: dict[str, Any]) -> list[dict[str, Any]] | None:
    if best["max_price"] is None:
        return None
    rows = best["max"] + (best["edge"] if best["edge_price"] == best["max_price"] else [])
    return sorted(rows, key=lambda r: (r["dateTime"], r["auction"], r["bidder"]))


def q7(params: Params, output: str) -> Any:
    """Query 7, highest bid: the bids at the highest price of each 10-second tumbling window.
    The SQL's window is ``BETWEEN window_end - 10 s AND window_end``, both ends included, so a
    bid exactly at a window's end also joins that window if its price is the window's maximum;
    each bid goes to its window's key (``flat_map``), and to the window before when it is at
    that window's end; only a bid at or above its task's highest so far for that window goes
    on to the grouping (:class:`LocalHighest`). Output (``table``): ``[window_start,
    window_end]`` -> the bids, sorted by (``dateTime``, ``auction``, ``bidder``).

    .. code-block:: sql

        SELECT B.auction, B.price, B.bidder, B.`dateTime`, B.extra
        from bid B
        JOIN (
          SELECT MAX(price) AS maxprice, window_end as `dateTime`
          FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
          GROUP BY window_start, window_end
        ) B1
        ON B.price = B1.maxprice
        WHERE B.`dateTime` BETWEEN B1.`dateTime`  - INTERVAL '10' SECOND AND B1.`dateTime`;
    """
    from streamtable import StreamsBuilder
    from streamtable.dsl.stores import Stores

    b = StreamsBuilder()
    b.add_state_store(Stores.key_value_store_builder(
        Stores.in_memory_key_value_store(Q7_LOCAL_HIGHEST)))
    (b.stream(BID_TOPIC)
     .flat_map(q7_windows)
     .process_values(LocalHighest, Q7_LOCAL_HIGHEST)
     .group_by_key()
     .aggregate(no_bids, highest_bids)
     .map_values(window_top)
     .to_stream(lambda start, rows: [start, start + Q7_SIZE_MS])
     .to(output))
    return b.build()


Q8_SIZE_MS = 10_000


def q8_row(person: dict[str, Any], auction: dict[str, Any]) -> dict[str, Any] | None:
    """The person if they created the auction in the same tumbling window, else None."""
    start = person["dateTime"] - person["dateTime"] % Q8_SIZE_MS
    if auction["dateTime"] - auction["dateTime"] % Q8_SIZE_MS != start:
        return None
    return {"id": person["id"], "name": person["name"], "starttime": start}


def q8(params: Params, output: str) -> Any:
    """Query 8, monitor new users: the persons who registered and created an auction in the
    same 10-second tumbling window. Persons join the auctions re-keyed by seller within 10
    seconds either way, then the pairs in the same window are kept. Output (``table``):
    ``[id, window_start]`` -> ``{id, name, starttime}`` (one row, however many auctions).

    .. code-block:: sql

        SELECT P.id, P.name, P.starttime
        FROM (
          SELECT id, name, window_start AS starttime, window_end AS endtime
          FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
          GROUP BY id, name, window_start, window_end
        ) P
        JOIN (
          SELECT seller, window_start AS starttime, window_end AS endtime
          FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
          GROUP BY seller, window_start, window_end
        ) A
        ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;
    """
    from streamtable import JoinWindows, StreamsBuilder

    b = StreamsBuilder()
    by_seller = b.stream(AUCTION_TOPIC).select_key(lambda id_, a: a["seller"])
    within = JoinWindows.of_time_difference_and_grace(Q8_SIZE_MS, params.grace_ms)
    (b.stream(PERSON_TOPIC)
     .join(by_seller, q8_row, within)
     .filter(lambda id_, row: row is not None)
     .map(lambda id_, row: ([row["id"], row["starttime"]], row))
     .to(output))
    return b.build()


#: Flink's session windows merge records less than the gap apart, Kafka Streams' at most the
#: gap apart: in whole milliseconds, Flink's 10 s gap is Kafka Streams' 9,999 ms
Q11_GAP_MS = 10_000


def q11(params: Params, output: str) -> Any:
    """Query 11, user sessions: the number of bids of each bidder's session (10-second gap).
    Output (``table``): ``[bidder, session_start]`` -> ``{bidder, bid_count, starttime,
    endtime}``, ``endtime`` being the last bid's time plus the gap as in Flink's
    ``SESSION_END``; a session merged into another is deleted (a tombstone).

    .. code-block:: sql

        SELECT B.bidder, count(*) as bid_count,
            SESSION_START(B.`dateTime`, INTERVAL '10' SECOND) as starttime,
            SESSION_END(B.`dateTime`, INTERVAL '10' SECOND) as endtime
        FROM bid B
        GROUP BY B.bidder, SESSION(B.`dateTime`, INTERVAL '10' SECOND);
    """
    from streamtable import SessionWindows, StreamsBuilder

    b = StreamsBuilder()
    sessions = SessionWindows.of_inactivity_gap_and_grace(Q11_GAP_MS - 1, params.grace_ms)
    (b.stream(BID_TOPIC)
     .group_by(lambda auction, bid: bid["bidder"])
     .windowed_by(sessions)
     .count()
     .map_values(lambda w, n: {"bidder": w.key, "bid_count": n, "starttime": w.start,
                               "endtime": w.end + Q11_GAP_MS})
     .to_stream(lambda w, row: [w.key, w.start])
     .to(output))
    return b.build()


QUERIES = [
    Query("q5", "hot items", "table", q5, (BID_TOPIC,)),
    Query("q7", "highest bid", "table", q7, (BID_TOPIC,)),
    Query("q8", "monitor new users", "table", q8, (PERSON_TOPIC, AUCTION_TOPIC)),
    Query("q11", "user sessions", "table", q11, (BID_TOPIC,)),
]
