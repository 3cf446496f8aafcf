"""The expected result of every query, computed in plain Python from the generated events,
independently of the DSL topologies (it shares only the event generator with them).

Each ``expected_qN(source)`` reads the events from ``source`` (``Events``: the generator
replayed, or a hand-made list in the tests) and yields what the query's output topic must hold:

* an ``append`` query yields every ``(key, value)`` record, compared as a multiset;
* a ``table`` query yields ``(key, value)`` once per key, the final table; where the SQL leaves
  a choice open (ties of ``ROW_NUMBER``), the value is an :class:`AnyOf` of the acceptable
  values, or a :class:`TopBids` for q19's top-10 with equal prices.

Keys and values are compared in canonical JSON (``canonical.py``): sorted object keys, lists
for tuples, non-integer numbers rounded to 3 decimals.

>>> src = Events(persons=[], auctions=[], bids=[
...     {"auction": 1000, "bidder": 1001, "price": 5, "channel": "Apple",
...      "url": "https://www.nexmark.com/a/b/c/item.htm?query=1", "dateTime": 0, "extra": ""}])
>>> list(expected_q2(src)), list(expected_q21(src))[0][1]["channel_id"]
([], '0')
"""

from __future__ import annotations

import bisect
import operator
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from bench.nexmark import dates
from bench.nexmark.canonical import canonical
from bench.nexmark.fields import BID_FIELDS, Q0_FIELDS
from bench.nexmark.generator import Generator

Row = dict[str, Any]


# --------------------------------------------------------------------------------- events


@dataclass
class Events:
    """The events a reference reads: either lists (tests) or ``generator`` replayed for
    ``count`` events, one chunk at a time (so 10M events need not fit in memory)."""

    persons: list[Row] = field(default_factory=list)
    auctions: list[Row] = field(default_factory=list)
    bids: list[Row] = field(default_factory=list)
    generator: Generator | None = None
    count: int = 0

    def _each(self, kind: str) -> Iterator[Row]:
        if self.generator is None:
            yield from getattr(self, kind)
            return
        for batch in self.generator.batches(self.count):
            yield from getattr(batch, kind)

    def each_person(self) -> Iterator[Row]:
        return self._each("persons")

    def each_auction(self) -> Iterator[Row]:
        return self._each("auctions")

    def each_bid(self) -> Iterator[Row]:
        return self._each("bids")


# --------------------------------------------------------------------------- comparison


@dataclass(frozen=True)
class AnyOf:
    """Any one of these values is right (rows tied in the SQL's ``ORDER BY``)."""

    values: tuple[Any, ...]

    def accepts(self, actual: str, decoded: Any) -> bool:
        return actual in {canonical(v) for v in self.values}

    def __str__(self) -> str:
        if len(self.values) == 1:
            return canonical(self.values[0])
        return "any of " + ", ".join(canonical(v) for v in self.values)


def expect(values: list[Any]) -> Any:
    """One value, or an :class:`AnyOf` when several are acceptable."""
    return values[0] if len(values) == 1 else AnyOf(tuple(values))


# ------------------------------------------------------------------------------- helpers


def _project(row: Row, fields: Iterable[str]) -> Row:
    return {f: row[f] for f in fields}


#: a bid's fields, in :data:`BID_FIELDS` order
_bid_fields = operator.itemgetter(*BID_FIELDS)


def _winners(src: Events) -> dict[int, tuple[Row, list[Row]]]:
    """auction id -> (auction, its best bids: highest price, then earliest; ties all kept),
    over the bids ``BETWEEN A.dateTime AND A.expires``."""
    auctions = {a["id"]: a for a in src.each_auction()}
    best: dict[int, tuple[Row, list[Row]]] = {}
    for b in src.each_bid():
        a = auctions.get(b["auction"])
        if a is None or not a["dateTime"] <= b["dateTime"] <= a["expires"]:
            continue
        entry = best.get(a["id"])
        if entry is None:
            best[a["id"]] = (a, [b])
            continue
        top = entry[1][0]
        if (b["price"], -b["dateTime"]) > (top["price"], -top["dateTime"]):
            best[a["id"]] = (a, [b])
        elif (b["price"], b["dateTime"]) == (top["price"], top["dateTime"]):
            entry[1].append(b)
    return best


# ------------------------------------------------------------------------------- queries


def expected_q0(src: Events) -> Iterator[tuple[Any, Any]]:
    for b in src.each_bid():
        yield b["auction"], _project(b, Q0_FIELDS)


def expected_q1(src: Events) -> Iterator[tuple[Any, Any]]:
    for b in src.each_bid():
        row = _project(b, Q0_FIELDS)
        row["price"] = 0.908 * b["price"]
        yield b["auction"], row


def expected_q2(src: Events) -> Iterator[tuple[Any, Any]]:
    for b in src.each_bid():
        if b["auction"] % 123 == 0:
            yield b["auction"], {"auction": b["auction"], "price": b["price"]}


def expected_q3(src: Events) -> Iterator[tuple[Any, Any]]:
    sellers = {p["id"]: p for p in src.each_person() if p["state"] in ("OR", "ID", "CA")}
    for a in src.each_auction():
        p = sellers.get(a["seller"])
        if a["category"] == 10 and p is not None:
            yield a["id"], {"name": p["name"], "city": p["city"], "state": p["state"],
                            "id": a["id"]}


def expected_q4(src: Events) -> Iterator[tuple[Any, Any]]:
    totals: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for a, bids in _winners(src).values():
        t = totals[a["category"]]
        t[0] += bids[0]["price"]
        t[1] += 1
    for category, (total, n) in totals.items():
        yield category, total // n


def expected_q5(src: Events) -> Iterator[tuple[Any, Any]]:
    # bids per auction in each 2 s slot; the window [start, start + 10 s) is 5 slots
    slots: dict[int, Counter[int]] = defaultdict(Counter)
    for b in src.each_bid():
        slots[b["dateTime"] // 2000][b["auction"]] += 1
    for first in sorted({s - k for s in slots for k in range(5)}):
        per_auction: Counter[int] = Counter()
        for s in range(first, first + 5):
            per_auction.update(slots.get(s, {}))
        top = max(per_auction.values())
        yield ([first * 2000, first * 2000 + 10_000],
               [[a, n] for a, n in sorted(per_auction.items()) if n == top])


def expected_q6(src: Events) -> Iterator[tuple[Any, Any]]:
    sales: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for a, bids in _winners(src).values():
        sales[a["seller"]].append((bids[0]["dateTime"], a["id"], bids[0]["price"]))
    for seller, rows in sales.items():
        latest = sorted(rows, reverse=True)[:11]
        yield seller, sum(p for _, _, p in latest) // len(latest)


def expected_q7(src: Events) -> Iterator[tuple[Any, Any]]:
    top: dict[int, tuple[int, list[Row]]] = {}
    at_end: dict[int, list[Row]] = defaultdict(list)  # window start -> bids at its end
    for b in src.each_bid():
        ts = b["dateTime"]
        start = ts - ts % 10_000
        row = {"auction": b["auction"], "price": b["price"], "bidder": b["bidder"],
               "dateTime": ts, "extra": b["extra"]}
        if ts == start:
            at_end[start - 10_000].append(row)
        best = top.get(start)
        if best is None or b["price"] > best[0]:
            top[start] = (b["price"], [row])
        elif b["price"] == best[0]:
            best[1].append(row)
    for start, (price, rows) in top.items():
        rows = rows + [r for r in at_end.get(start, []) if r["price"] == price]
        rows.sort(key=lambda r: (r["dateTime"], r["auction"], r["bidder"]))
        yield [start, start + 10_000], rows


def expected_q8(src: Events) -> Iterator[tuple[Any, Any]]:
    sold = {(a["seller"], a["dateTime"] - a["dateTime"] % 10_000) for a in src.each_auction()}
    for p in src.each_person():
        start = p["dateTime"] - p["dateTime"] % 10_000
        if (p["id"], start) in sold:
            yield [p["id"], start], {"id": p["id"], "name": p["name"], "starttime": start}


def expected_q9(src: Events) -> Iterator[tuple[Any, Any]]:
    for a, bids in _winners(src).values():
        rows = []
        for b in bids:
            row = dict(a)
            row.update(auction=b["auction"], bidder=b["bidder"], price=b["price"],
                       bid_dateTime=b["dateTime"], bid_extra=b["extra"])
            rows.append(row)
        yield a["id"], expect(rows)


def expected_q11(src: Events) -> Iterator[tuple[Any, Any]]:
    open_: dict[int, list[int]] = {}  # bidder -> [start, last, count]
    done: list[tuple[int, list[int]]] = []
    for b in src.each_bid():  # in event-time order
        s = open_.get(b["bidder"])
        ts = b["dateTime"]
        if s is not None and ts - s[1] < 10_000:
            s[1] = ts
            s[2] += 1
            continue
        if s is not None:
            done.append((b["bidder"], s))
        open_[b["bidder"]] = [ts, ts, 1]
    done.extend(open_.items())
    for bidder, (start, last, n) in done:
        yield [bidder, start], {"bidder": bidder, "bid_count": n, "starttime": start,
                                "endtime": last + 10_000}


def expected_q13(src: Events) -> Iterator[tuple[Any, Any]]:
    for b in src.each_bid():
        yield b["auction"], {"auction": b["auction"], "bidder": b["bidder"],
                             "price": b["price"], "dateTime": b["dateTime"],
                             "value": str(b["auction"] % 10_000)}


def expected_q14(src: Events) -> Iterator[tuple[Any, Any]]:
    for b in src.each_bid():
        euros = 0.908 * b["price"]
        if not 1_000_000 < euros < 50_000_000:
            continue
        hour = datetime.fromtimestamp(b["dateTime"] / 1000, timezone.utc).hour
        kind = ("dayTime" if 8 <= hour <= 18 else
                "nightTime" if hour <= 6 or hour >= 20 else "otherTime")
        yield b["auction"], {"auction": b["auction"], "bidder": b["bidder"], "price": euros,
                             "bidTimeType": kind, "dateTime": b["dateTime"],
                             "extra": b["extra"], "c_counts": b["extra"].count("c")}


def expected_q17(src: Events) -> Iterator[tuple[Any, Any]]:
    stats: dict[tuple[int, str], list[int]] = {}  # [n, rank1, rank2, rank3, min, max, sum]
    for b in src.each_bid():
        key = (b["auction"], dates.day(b["dateTime"]))
        p = b["price"]
        s = stats.get(key)
        if s is None:
            s = stats[key] = [0, 0, 0, 0, p, p, 0]
        s[0] += 1
        s[1 if p < 10_000 else 2 if p < 1_000_000 else 3] += 1
        s[4], s[5], s[6] = min(s[4], p), max(s[5], p), s[6] + p
    for (auction, day), (n, r1, r2, r3, low, high, total) in stats.items():
        yield [auction, day], {
            "auction": auction, "day": day, "total_bids": n, "rank1_bids": r1,
            "rank2_bids": r2, "rank3_bids": r3, "min_price": low, "max_price": high,
            "avg_price": total // n, "sum_price": total}


def expected_q18(src: Events) -> Iterator[tuple[Any, Any]]:
    # (bidder, auction) -> (time of the latest bids, the latest bids' fields)
    last: dict[tuple[int, int], tuple[int, list[tuple[Any, ...]]]] = {}
    for b in src.each_bid():
        pair = (b["bidder"], b["auction"])
        seen = last.get(pair)
        ts = b["dateTime"]
        if seen is None or ts > seen[0]:
            last[pair] = (ts, [_bid_fields(b)])
        elif ts == seen[0]:
            seen[1].append(_bid_fields(b))
    for pair, (_, bids) in last.items():
        yield list(pair), expect([dict(zip(BID_FIELDS, b, strict=True)) for b in bids])


@dataclass
class TopBids:
    """q19's acceptable values: the ten highest prices, in order, each with the bids of that
    price (any of equal-priced bids may fill their places), ranks 1, 2, ..."""

    prices: list[int]
    by_price: dict[int, set[str]]

    def accepts(self, actual: str, decoded: Any) -> bool:
        if not isinstance(decoded, list) or [r.get("price") for r in decoded] != self.prices:
            return False
        seen: set[str] = set()
        for rank, r in enumerate(decoded, 1):
            bid = dict(r)
            bid.pop("rank_number", None)
            c = canonical(bid)
            if r.get("rank_number") != rank or c not in self.by_price[r["price"]] or c in seen:
                return False
            seen.add(c)
        return True

    def __str__(self) -> str:
        return f"the top prices {self.prices} with their bids"


def expected_q19(src: Events) -> Iterator[tuple[Any, Any]]:
    # auction -> (-price, bid as JSON) of the bids that can still be in its top 10, highest
    # price first: the ten highest prices and every bid tied with the tenth (so each kept
    # bid has one of the ten prices)
    kept: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for b in src.each_bid():
        top = kept[b["auction"]]
        if len(top) >= 10 and -b["price"] > top[9][0]:
            continue
        bid = canonical(dict(zip(BID_FIELDS, _bid_fields(b), strict=True)))
        bisect.insort(top, (-b["price"], bid))
        if len(top) > 10:
            cut = top[9][0]
            while top[-1][0] > cut:
                top.pop()
    for auction, rows in kept.items():
        prices = [-p for p, _ in rows[:10]]
        by_price: dict[int, set[str]] = defaultdict(set)
        for p, bid in rows:
            by_price[-p].add(bid)
        yield auction, TopBids(prices, dict(by_price))


def expected_q20(src: Events) -> Iterator[tuple[Any, Any]]:
    auctions = {a["id"]: a for a in src.each_auction() if a["category"] == 10}
    for b in src.each_bid():
        a = auctions.get(b["auction"])
        if a is None:
            continue
        row = {f: b[f] for f in ("auction", "bidder", "price", "channel", "url")}
        row.update(bid_dateTime=b["dateTime"], bid_extra=b["extra"])
        for f in ("itemName", "description", "initialBid", "reserve", "expires", "seller",
                  "category"):
            row[f] = a[f]
        row.update(auction_dateTime=a["dateTime"], auction_extra=a["extra"])
        yield b["auction"], row


_CHANNEL_ID = re.compile(r"(&|^)channel_id=([^&]*)")
_HOT = {"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}


def expected_q21(src: Events) -> Iterator[tuple[Any, Any]]:
    for b in src.each_bid():
        m = _CHANNEL_ID.search(b["url"])
        cid = _HOT.get(b["channel"].lower(), m.group(2) if m else None)
        if cid is not None:
            yield b["auction"], {"auction": b["auction"], "bidder": b["bidder"],
                                 "price": b["price"], "channel": b["channel"],
                                 "channel_id": cid}


def expected_q22(src: Events) -> Iterator[tuple[Any, Any]]:
    for b in src.each_bid():
        parts = b["url"].split("/")
        dirs = [parts[i] if i < len(parts) else None for i in (3, 4, 5)]
        yield b["auction"], {"auction": b["auction"], "bidder": b["bidder"],
                             "price": b["price"], "channel": b["channel"], "dir1": dirs[0],
                             "dir2": dirs[1], "dir3": dirs[2]}


def _report(src: Events, group_of: Callable[[Row], tuple[Any, ...]],
            fields: tuple[str, ...], with_minute: bool) -> Iterator[tuple[Any, Any]]:
    """q15 and q16: per group, bids and distinct bidders and auctions, in all and per rank."""
    slots = ("total", "rank1", "rank2", "rank3")
    # group -> (bids, bidders, auctions: each per slot, the latest time)
    groups: dict[tuple[Any, ...], tuple[list[int], list[set[int]], list[set[int]],
                                        list[int]]] = {}
    for b in src.each_bid():
        g = group_of(b)
        s = groups.get(g)
        if s is None:
            s = groups[g] = ([0] * 4, [set() for _ in slots], [set() for _ in slots],
                             [b["dateTime"]])
        bids, bidders, auctions, latest = s
        p = b["price"]
        for i in (0, 1 if p < 10_000 else 2 if p < 1_000_000 else 3):  # total, its rank
            bids[i] += 1
            bidders[i].add(b["bidder"])
            auctions[i].add(b["auction"])
        latest[0] = max(latest[0], b["dateTime"])
    for g, (bids, bidders, auctions, latest) in groups.items():
        row: Row = dict(zip(fields, g, strict=True))
        if with_minute:  # a group is within one day: its latest minute is its latest bid's
            row["minute"] = dates.minute(latest[0])
        for i, slot in enumerate(slots):
            row[f"{slot}_bids"] = bids[i]
            row[f"{slot}_bidders"] = len(bidders[i])
            row[f"{slot}_auctions"] = len(auctions[i])
        yield (list(g) if len(g) > 1 else g[0]), row


def expected_q15(src: Events) -> Iterator[tuple[Any, Any]]:
    return _report(src, lambda b: (dates.day(b["dateTime"]),), ("day",), False)


def expected_q16(src: Events) -> Iterator[tuple[Any, Any]]:
    return _report(src, lambda b: (b["channel"], dates.day(b["dateTime"])), ("channel", "day"),
                   True)


EXPECTED: dict[str, Callable[[Events], Iterator[tuple[Any, Any]]]] = {
    name[len("expected_"):]: fn for name, fn in globals().items()
    if name.startswith("expected_q")
}
