"""The stateless queries: record-at-a-time maps and filters over the bids (q0, q1, q2, q14,
q21, q22). Each output is ``append``: one record per selected bid, keyed by its auction.
"""

from __future__ import annotations

import re
from typing import Any

from bench.nexmark import dates
from bench.nexmark.events import BID_TOPIC
from bench.nexmark.fields import Q0_FIELDS
from bench.nexmark.queries.base import Params, Query, euros, pick


def q0(params: Params, output: str) -> Any:
    """Query 0, pass through: every bid, projected.

    .. code-block:: sql

        SELECT auction, bidder, price, `dateTime`, extra FROM bid;
    """
    from streamtable import StreamsBuilder

    b = StreamsBuilder()
    b.stream(BID_TOPIC).map_values(lambda bid: pick(bid, Q0_FIELDS)).to(output)
    return b.build()


def q1_value(bid: dict[str, Any]) -> dict[str, Any]:
    out = pick(bid, Q0_FIELDS)
    out["price"] = euros(bid["price"])
    return out


def q1(params: Params, output: str) -> Any:
    """Query 1, currency conversion: every bid's price in euros.

    .. code-block:: sql

        SELECT auction, bidder, 0.908 * price as price, `dateTime`, extra FROM bid;
    """
    from streamtable import StreamsBuilder

    b = StreamsBuilder()
    b.stream(BID_TOPIC).map_values(q1_value).to(output)
    return b.build()


def q2(params: Params, output: str) -> Any:
    """Query 2, selection: the bids on every 123rd auction.

    .. code-block:: sql

        SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;
    """
    from streamtable import StreamsBuilder

    b = StreamsBuilder()
    (b.stream(BID_TOPIC)
     .filter(lambda auction, bid: bid["auction"] % 123 == 0)
     .map_values(lambda bid: {"auction": bid["auction"], "price": bid["price"]})
     .to(output))
    return b.build()


def bid_time_type(ms: int) -> str:
    hour = ms // dates.HOUR_MS % 24
    if 8 <= hour <= 18:
        return "dayTime"
    if hour <= 6 or hour >= 20:
        return "nightTime"
    return "otherTime"


def q14_selected(bid: dict[str, Any]) -> bool:
    # 0.908 * price between 1,000,000 and 50,000,000 (exclusive), in integers
    return 1_000_000_000 < bid["price"] * 908 < 50_000_000_000


def q14_value(bid: dict[str, Any]) -> dict[str, Any]:
    return {"auction": bid["auction"], "bidder": bid["bidder"], "price": euros(bid["price"]),
            "bidTimeType": bid_time_type(bid["dateTime"]), "dateTime": bid["dateTime"],
            "extra": bid["extra"], "c_counts": bid["extra"].count("c")}


def q14(params: Params, output: str) -> Any:
    """Query 14, calculation: expensive bids with the time of day and a user function (the
    number of ``c`` in ``extra``).

    .. code-block:: sql

        SELECT auction, bidder, 0.908 * price as price,
            CASE WHEN HOUR(`dateTime`) >= 8 AND HOUR(`dateTime`) <= 18 THEN 'dayTime'
                 WHEN HOUR(`dateTime`) <= 6 OR HOUR(`dateTime`) >= 20 THEN 'nightTime'
                 ELSE 'otherTime' END AS bidTimeType,
            `dateTime`, extra, count_char(extra, 'c') AS c_counts
        FROM bid
        WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000;
    """
    from streamtable import StreamsBuilder

    b = StreamsBuilder()
    (b.stream(BID_TOPIC)
     .filter(lambda auction, bid: q14_selected(bid))
     .map_values(q14_value)
     .to(output))
    return b.build()


CHANNEL_IDS = {"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}
CHANNEL_ID = re.compile(r"(&|^)channel_id=([^&]*)")


def channel_id(bid: dict[str, Any]) -> str | None:
    """The CASE of q21: a hot channel's number, else the url's ``channel_id``, else None."""
    known = CHANNEL_IDS.get(bid["channel"].lower())
    if known is not None:
        return known
    m = CHANNEL_ID.search(bid["url"])
    return m.group(2) if m else None


def q21(params: Params, output: str) -> Any:
    """Query 21, add a channel id (CASE WHEN and REGEXP_EXTRACT).

    .. code-block:: sql

        SELECT auction, bidder, price, channel,
            CASE WHEN lower(channel) = 'apple' THEN '0'
                 WHEN lower(channel) = 'google' THEN '1'
                 WHEN lower(channel) = 'facebook' THEN '2'
                 WHEN lower(channel) = 'baidu' THEN '3'
                 ELSE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) END AS channel_id
        FROM bid
        WHERE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) is not null or
              lower(channel) in ('apple', 'google', 'facebook', 'baidu');
    """
    from streamtable import StreamsBuilder

    b = StreamsBuilder()
    (b.stream(BID_TOPIC)
     .map_values(lambda bid: {"auction": bid["auction"], "bidder": bid["bidder"],
                              "price": bid["price"], "channel": bid["channel"],
                              "channel_id": channel_id(bid)})
     .filter(lambda auction, row: row["channel_id"] is not None)
     .to(output))
    return b.build()


def split_index(text: str, sep: str, index: int) -> str | None:
    """Flink's ``SPLIT_INDEX``: the ``index``-th (0-based) piece, or None."""
    parts = text.split(sep)
    return parts[index] if index < len(parts) else None


def q22_value(bid: dict[str, Any]) -> dict[str, Any]:
    url = bid["url"]
    return {"auction": bid["auction"], "bidder": bid["bidder"], "price": bid["price"],
            "channel": bid["channel"], "dir1": split_index(url, "/", 3),
            "dir2": split_index(url, "/", 4), "dir3": split_index(url, "/", 5)}


def q22(params: Params, output: str) -> Any:
    """Query 22, the directories of a bid's URL (SPLIT_INDEX).

    .. code-block:: sql

        SELECT auction, bidder, price, channel,
            SPLIT_INDEX(url, '/', 3) as dir1, SPLIT_INDEX(url, '/', 4) as dir2,
            SPLIT_INDEX(url, '/', 5) as dir3
        FROM bid;
    """
    from streamtable import StreamsBuilder

    b = StreamsBuilder()
    b.stream(BID_TOPIC).map_values(q22_value).to(output)
    return b.build()


QUERIES = [
    Query("q0", "pass through", "append", q0, (BID_TOPIC,)),
    Query("q1", "currency conversion", "append", q1, (BID_TOPIC,)),
    Query("q2", "selection", "append", q2, (BID_TOPIC,)),
    Query("q14", "calculation", "append", q14, (BID_TOPIC,)),
    Query("q21", "add channel id", "append", q21, (BID_TOPIC,)),
    Query("q22", "URL directories", "append", q22, (BID_TOPIC,)),
]
