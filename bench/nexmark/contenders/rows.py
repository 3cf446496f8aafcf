"""The record-at-a-time expressions of the Nexmark SQL, in plain Python, for the peers whose
queries are Python functions over records (Quix Streams, Bytewax, Pathway's UDFs). Standard
library only (the peers import it in their own virtual environments).

Each ``qN(bid)`` of a stateless query returns the output record ``(key, value)`` of one bid, or
None when the query's ``WHERE`` drops it.

>>> q2({"auction": 246, "bidder": 1, "price": 7, "channel": "c", "url": "u", "dateTime": 0,
...     "extra": ""})
(246, {'auction': 246, 'price': 7})
>>> split_index("https://www.nexmark.com/a/b", "/", 5)
"""

from __future__ import annotations

import re
from typing import Any

from bench.nexmark import dates
from bench.nexmark.fields import BID_FIELDS

Row = dict[str, Any]


def q0(bid: Row) -> tuple[int, Row]:
    """``SELECT auction, bidder, price, dateTime, extra FROM bid``."""
    return bid["auction"], {"auction": bid["auction"], "bidder": bid["bidder"],
                            "price": bid["price"], "dateTime": bid["dateTime"],
                            "extra": bid["extra"]}


def q1(bid: Row) -> tuple[int, Row]:
    """``0.908 * price`` (a DECIMAL in the SQL: exact to 3 decimals here)."""
    key, row = q0(bid)
    row["price"] = bid["price"] * 908 / 1000
    return key, row


def q2(bid: Row) -> tuple[int, Row] | None:
    """``WHERE MOD(auction, 123) = 0``."""
    if bid["auction"] % 123:
        return None
    return bid["auction"], {"auction": bid["auction"], "price": bid["price"]}


def bid_time_type(ms: int) -> str:
    hour = ms // dates.HOUR_MS % 24
    if 8 <= hour <= 18:
        return "dayTime"
    if hour <= 6 or hour >= 20:
        return "nightTime"
    return "otherTime"


def q14(bid: Row) -> tuple[int, Row] | None:
    """``WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000`` (in integers)."""
    if not 1_000_000_000 < bid["price"] * 908 < 50_000_000_000:
        return None
    return bid["auction"], {
        "auction": bid["auction"], "bidder": bid["bidder"], "price": bid["price"] * 908 / 1000,
        "bidTimeType": bid_time_type(bid["dateTime"]), "dateTime": bid["dateTime"],
        "extra": bid["extra"], "c_counts": bid["extra"].count("c")}


HOT_CHANNELS = {"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}
CHANNEL_ID = re.compile(r"(&|^)channel_id=([^&]*)")


def q21(bid: Row) -> tuple[int, Row] | None:
    """The CASE of a hot channel's number, else ``REGEXP_EXTRACT(url, ..., 2)``; rows with
    neither are dropped."""
    cid = HOT_CHANNELS.get(bid["channel"].lower())
    if cid is None:
        m = CHANNEL_ID.search(bid["url"])
        if m is None:
            return None
        cid = m.group(2)
    return bid["auction"], {"auction": bid["auction"], "bidder": bid["bidder"],
                            "price": bid["price"], "channel": bid["channel"],
                            "channel_id": cid}


def split_index(text: str, sep: str, index: int) -> str | None:
    """Flink's ``SPLIT_INDEX``: the ``index``-th (0-based) piece, or None."""
    parts = text.split(sep)
    return parts[index] if index < len(parts) else None


def q22(bid: Row) -> tuple[int, Row]:
    url = bid["url"]
    return bid["auction"], {"auction": bid["auction"], "bidder": bid["bidder"],
                            "price": bid["price"], "channel": bid["channel"],
                            "dir1": split_index(url, "/", 3), "dir2": split_index(url, "/", 4),
                            "dir3": split_index(url, "/", 5)}


STATELESS = {"q0": q0, "q1": q1, "q2": q2, "q14": q14, "q21": q21, "q22": q22}

Q5_SIZE_MS, Q5_ADVANCE_MS = 10_000, 2_000
Q7_SIZE_MS = 10_000
Q11_GAP_MS = 10_000


def hottest(counts: dict[int, int]) -> list[list[int]]:
    """q5's value: the auctions with the most bids, ``[[auction, num], ...]`` by auction."""
    top = max(counts.values())
    return [[a, n] for a, n in sorted(counts.items()) if n == top]


def q7_candidates(bid: Row) -> list[tuple[int, str, Row]]:
    """``(window_start, slot, row)`` for each window a bid may be the top of: its own tumbling
    window (slot ``in``) and, when it is exactly at a window's end, the window before (slot
    ``end``: the SQL's ``BETWEEN window_end - 10 s AND window_end`` includes the end)."""
    ts = bid["dateTime"]
    start = ts - ts % Q7_SIZE_MS
    row = {"auction": bid["auction"], "price": bid["price"], "bidder": bid["bidder"],
           "dateTime": ts, "extra": bid["extra"]}
    own = [(start, "in", row)]
    return own + [(start - Q7_SIZE_MS, "end", row)] if ts == start else own


def q7_add(best: Row | None, slot: str, row: Row) -> Row:
    """A window's state: the highest price of its own bids with their rows, and the same of
    the bids exactly at its end."""
    best = dict(best) if best else {"in_price": None, "in": [], "end_price": None, "end": []}
    price = best[f"{slot}_price"]
    if price is None or row["price"] > price:
        best[f"{slot}_price"], best[slot] = row["price"], [row]
    elif row["price"] == price:
        best[slot] = best[slot] + [row]
    return best


def q7_value(best: Row) -> list[Row] | None:
    """The window's top bids (its own, and those at its end at the same price), sorted."""
    if best["in_price"] is None:
        return None
    rows = best["in"] + (best["end"] if best["end_price"] == best["in_price"] else [])
    return sorted(rows, key=lambda r: (r["dateTime"], r["auction"], r["bidder"]))


# The folds of the stateful queries: ``fold(state, item) -> (new state, output record or
# None)``, the state None for a new key.


def q17_fold(state: dict[str, Any] | None, bid: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """``GROUP BY auction, DATE_FORMAT(dateTime, 'yyyy-MM-dd')`` with its aggregates."""
    p = bid["price"]
    if state is None:
        day = dates.day(bid["dateTime"])
        state = {"auction": bid["auction"], "day": day, "total_bids": 0, "rank1_bids": 0,
                 "rank2_bids": 0, "rank3_bids": 0, "min_price": p, "max_price": p,
                 "avg_price": 0, "sum_price": 0}
    else:
        state = dict(state)
    state["total_bids"] += 1
    rank = "rank1_bids" if p < 10_000 else "rank2_bids" if p < 1_000_000 else "rank3_bids"
    state[rank] += 1
    state["min_price"] = min(state["min_price"], p)
    state["max_price"] = max(state["max_price"], p)
    state["sum_price"] += p
    state["avg_price"] = state["sum_price"] // state["total_bids"]
    return state, ([state["auction"], state["day"]], state)


def q18_fold(state: dict[str, Any] | None, bid: dict[str, Any]) -> tuple[Any, Any]:
    """``ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY dateTime DESC) = 1``."""
    if state is not None and state["dateTime"] >= bid["dateTime"]:
        return state, None
    row = {f: bid[f] for f in BID_FIELDS}
    return row, ([bid["bidder"], bid["auction"]], row)


def q19_fold(state: list[dict[str, Any]] | None, bid: dict[str, Any]) -> tuple[Any, Any]:
    """``ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) <= 10``."""
    top = list(state or [])
    if len(top) == 10 and bid["price"] <= top[-1]["price"]:
        return top, None
    top.append({f: bid[f] for f in BID_FIELDS})
    top.sort(key=lambda r: -r["price"])
    top = top[:10]
    ranked = [{**r, "rank_number": i} for i, r in enumerate(top, 1)]
    return top, (bid["auction"], ranked)


def q7_fold(state: dict[str, Any] | None, cand: tuple[int, str, dict[str, Any]]
            ) -> tuple[Any, Any]:
    start, slot, row = cand
    best = q7_add(state, slot, row)
    value = q7_value(best)
    return best, None if value is None else ([start, start + Q7_SIZE_MS], value)


def q5_windows(bid: Row) -> list[tuple[int, int]]:
    """``(window_start, auction)`` for each 10-second window, every 2 seconds, that holds the
    bid (the SQL's ``HOP``)."""
    ts = bid["dateTime"]
    last = ts - ts % Q5_ADVANCE_MS
    return [(start, bid["auction"])
            for start in range(last - Q5_SIZE_MS + Q5_ADVANCE_MS, last + 1, Q5_ADVANCE_MS)]


def q5_count(state: int | None, window_auction: tuple[int, int]
             ) -> tuple[int, tuple[int, int, int]]:
    """``count(*) ... GROUP BY auction, window``: ``(window_start, auction, num)``."""
    n = (state or 0) + 1
    return n, (window_auction[0], window_auction[1], n)


def q5_hot(state: tuple[int, list[int]] | None, count: tuple[int, int, int]) -> tuple[Any, Any]:
    """A window's highest count and the auctions that have it: an auction's count only grows,
    by one, so the ``max`` and the join back (``num >= maxn``) are this running state."""
    start, auction, n = count
    top_n, top = state or (0, [])
    if n > top_n:
        top_n, top = n, [auction]
    elif n == top_n:
        top = [*top, auction]
    else:
        return (top_n, top), None
    return (top_n, top), ([start, start + Q5_SIZE_MS], sorted([a, top_n] for a in top))


AUCTION_FIELDS = ("itemName", "description", "initialBid", "reserve", "expires", "seller",
                  "category")


def q20_join(state: Row | None, item: tuple[str, Row]) -> tuple[Row, list[tuple[int, Row]]]:
    """``bid INNER JOIN auction ON B.auction = A.id WHERE A.category = 10``, keyed by the
    auction: its state is the auction (once seen) and the bids that came before it."""
    kind, row = item
    state = state or {"auction": None, "bids": []}
    if kind == "auction":
        bids, state = state["bids"], {"auction": row, "bids": []}
    elif state["auction"] is None:
        return {"auction": None, "bids": [*state["bids"], row]}, []
    else:
        bids = [row]
    a = state["auction"]
    if a["category"] != 10:
        return state, []
    out = []
    for b in bids:
        joined = {f: b[f] for f in ("auction", "bidder", "price", "channel", "url")}
        joined.update(bid_dateTime=b["dateTime"], bid_extra=b["extra"])
        joined.update({f: a[f] for f in AUCTION_FIELDS})
        joined.update(auction_dateTime=a["dateTime"], auction_extra=a["extra"])
        out.append((b["auction"], joined))
    return state, out


def q3_join(state: Row | None, item: tuple[str, Row]) -> tuple[Row, list[tuple[int, Row]]]:
    """``auction A INNER JOIN person P ON A.seller = P.id`` over the auctions of category 10
    and the persons of OR, ID and CA, keyed by the person: its state is the person (once seen)
    and the auctions that came before."""
    kind, row = item
    state = state or {"person": None, "auctions": []}
    if kind == "person":
        auctions, state = state["auctions"], {"person": row, "auctions": []}
    elif state["person"] is None:
        return {"person": None, "auctions": [*state["auctions"], row]}, []
    else:
        auctions = [row]
    p = state["person"]
    return state, [(a["id"], {"name": p["name"], "city": p["city"], "state": p["state"],
                              "id": a["id"]}) for a in auctions]


def q8_join(state: Row | None, item: tuple[str, Row]) -> tuple[Row, list[tuple[Any, Row]]]:
    """q8's join of the persons and the sellers of the same 10-second tumbling window, keyed by
    ``(id, window_start)``: one output row per person and window, however many auctions."""
    kind, row = item
    state = dict(state or {"person": None, "auction": False, "done": False})
    if kind == "person":
        state["person"] = row
    else:
        state["auction"] = True
    p = state["person"]
    if p is None or not state["auction"] or state["done"]:
        return state, []
    state["done"] = True
    start = p["dateTime"] - p["dateTime"] % Q7_SIZE_MS
    return state, [([p["id"], start], {"id": p["id"], "name": p["name"], "starttime": start})]


def q13_join(state: Row | None, item: tuple[str, Any]) -> tuple[Row, list[tuple[int, Row]]]:
    """``bid JOIN side_input ON mod(auction, 10000) = key``, keyed by that number: the state
    is the side input's value (once seen) and the bids that came before it."""
    kind, row = item
    state = state or {"value": None, "bids": []}
    if kind == "side":
        bids, state = state["bids"], {"value": row[1], "bids": []}
    elif state["value"] is None:
        return {"value": None, "bids": [*state["bids"], row]}, []
    else:
        bids = [row]
    return state, [(b["auction"], {"auction": b["auction"], "bidder": b["bidder"],
                                   "price": b["price"], "dateTime": b["dateTime"],
                                   "value": state["value"]}) for b in bids]


def q11_fold(state: list[list[int]] | None, bid: Row) -> tuple[list[list[int]], list[Any]]:
    """A bidder's sessions ``[start, last, count]``: records less than 10 s apart are one
    session (Flink's ``SESSION``). A bid joins every session it is less than the gap from
    (in any order of arrival), merging them; the merged-away sessions' keys are deleted
    (``None`` values). Output ``[bidder, start] -> {bidder, bid_count, starttime, endtime}``."""
    ts, bidder = bid["dateTime"], bid["bidder"]
    sessions = state or []
    near = [s for s in sessions if s[0] - Q11_GAP_MS < ts < s[1] + Q11_GAP_MS]
    rest = [s for s in sessions if not s[0] - Q11_GAP_MS < ts < s[1] + Q11_GAP_MS]
    merged = [min([ts] + [s[0] for s in near]), max([ts] + [s[1] for s in near]),
              1 + sum(s[2] for s in near)]
    out: list[Any] = [([bidder, s[0]], None) for s in near if s[0] != merged[0]]
    out.append(([bidder, merged[0]], {"bidder": bidder, "bid_count": merged[2],
                                      "starttime": merged[0],
                                      "endtime": merged[1] + Q11_GAP_MS}))
    return [*rest, merged], out


def q9_join(state: Row | None, item: tuple[str, Row]) -> tuple[Row, list[tuple[int, Row]]]:
    """q9's winning bid per auction: ``ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price
    DESC, B.dateTime ASC) <= 1`` over ``auction JOIN bid`` with ``B.dateTime BETWEEN
    A.dateTime AND A.expires``, keyed by the auction. The join's rows only come, never go, so
    the top row only improves: the state is the auction, its best bid, and the bids that came
    before the auction."""
    kind, row = item
    state = dict(state or {"auction": None, "best": None, "bids": []})
    if kind == "auction":
        state["auction"], bids, state["bids"] = row, state["bids"], []
    elif state["auction"] is None:
        state["bids"] = [*state["bids"], row]
        return state, []
    else:
        bids = [row]
    a, best, changed = state["auction"], state["best"], False
    for b in bids:
        if not a["dateTime"] <= b["dateTime"] <= a["expires"]:
            continue
        if best is None or (b["price"], -b["dateTime"]) > (best["price"], -best["dateTime"]):
            best, changed = b, True
    if not changed:
        return state, []
    state["best"] = best
    out = dict(a)
    out.update(auction=best["auction"], bidder=best["bidder"], price=best["price"],
               bid_dateTime=best["dateTime"], bid_extra=best["extra"])
    return state, [(a["id"], out)]


REPORT_SLOTS = ("total", "rank1", "rank2", "rank3")


def report_group(query: str, bid: Row) -> tuple[Any, Row]:
    """q15's and q16's group of a bid: its output key and the group's columns."""
    day = dates.day(bid["dateTime"])
    if query == "q15":
        return day, {"day": day}
    return [bid["channel"], day], {"channel": bid["channel"], "day": day}


def report_add(query: str, row: Row | None, bid: Row, new: Any) -> Row:
    """Add a bid to its group's row of q15 or q16: ``count(*)`` and ``count(distinct bidder)``,
    ``count(distinct auction)``, in all and per price rank (``FILTER``), and q16's latest
    ``HH:mm``. ``new(kind, slot, id)`` says whether the bidder or auction is new in that count
    (and remembers it): how the distinct sets are kept is the engine's."""
    if row is None:
        row = {**report_group(query, bid)[1], **{f"{s}_{k}": 0 for s in REPORT_SLOTS
                                                 for k in ("bids", "bidders", "auctions")}}
        if query == "q16":
            row["minute"] = ""
    row = dict(row)
    p = bid["price"]
    rank = "rank1" if p < 10_000 else "rank2" if p < 1_000_000 else "rank3"
    for slot in ("total", rank):
        row[f"{slot}_bids"] += 1
        for kind, id_ in (("bidders", bid["bidder"]), ("auctions", bid["auction"])):
            if new(kind, slot, id_):
                row[f"{slot}_{kind}"] += 1
    if query == "q16":
        row["minute"] = max(row["minute"], dates.minute(bid["dateTime"]))
    return row


def report_fold(query: str) -> Any:
    """q15's or q16's fold for an engine with Python objects as state (the distinct sets)."""
    def fold(state: Row | None, bid: Row) -> tuple[Row, tuple[Any, Row]]:
        state = state or {"row": None, "seen": set()}
        seen = state["seen"]

        def new(kind: str, slot: str, id_: int) -> bool:
            if (kind, slot, id_) in seen:
                return False
            seen.add((kind, slot, id_))
            return True

        row = report_add(query, state["row"], bid, new)
        return {"row": row, "seen": seen}, (report_group(query, bid)[0], row)
    return fold


def q4_winners(state: Row | None, item: tuple[str, Row]) -> tuple[Row, list[tuple[int, Any]]]:
    """q4's first half, keyed by the auction: q9's winning bid per auction, as changes
    ``(category, (old winning price or None, new winning price))`` (the retraction and the
    addition of the winners table's row, in one record)."""
    old = state["best"]["price"] if state and state["best"] else None
    state, out = q9_join(state, item)
    return state, [(row["category"], (old, row["price"])) for _, row in out]


def q4_average(state: list[int] | None, change: tuple[int, Any]) -> tuple[list[int], Any]:
    """``AVG(final) GROUP BY category`` over the winners: the old price subtracted, the new
    one added (Flink's ``AVG`` over ``BIGINT``: the integer quotient)."""
    category, (old, new) = change
    total, n = state or [0, 0]
    total, n = total + new - (old or 0), n + (old is None)
    return [total, n], (category, total // n)
