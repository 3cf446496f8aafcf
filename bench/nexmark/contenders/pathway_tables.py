"""Pathway (``pathway==0.33.0``, its own venv ``bench/.venvs/pathway``): each query as Pathway
tables, which are collections with retractions (an aggregate that changes retracts its old
row), so the updating-aggregate queries (q4, q9) are expressible here as the SQL says them.

Input: ``pw.io.kafka.read`` per topic (``format="json"`` with the topic's schema, a fresh
consumer group, from the earliest offset, ``autocommit_duration_ms`` 1500, Pathway's default).
Output: ``pw.io.subscribe`` on the query's table of ``k``/``v`` (the output record's key and
value as JSON), produced with confluent-kafka: for an ``append`` query every added row, for a
``table`` query at the end of each of Pathway's logical times the key's new value, or a
tombstone when its row was only retracted (Pathway's own Kafka writer writes the retraction and
the addition of a changed row in no particular order). The subscribed table also carries one
progress row, the count of input rows read (concatenated to the output, so it is delivered in
the same logical times): when a time ends with every input row counted, every output row of
those inputs has been produced; the producer is flushed and the process reports
``caught_up`` and exits (a Kafka read never ends by itself).

Queries: q0, q1, q2, q14, q21, q22 (``select``/``filter``, UDFs for the string functions),
q3, q13 and q20 (``join``; q13's side input is a table read from its topic), q4 and q9 (the
winning bids: a join of auctions and bids with the SQL's time condition, the maximum per
auction (``argmax`` over ``(price, -dateTime)``), and for q4 the average per category over it),
q17 and q18 (``groupby().reduce()``), and the windowed q5, q7 and q8 written as the SQL's
relational plan: each record ``flatten``-ed into the windows that hold it (a window is its
start, a column), ``groupby`` window, ``join`` of the window's aggregate with its rows.

q11 is ``windowby`` with ``session(max_gap=10 s)`` per bidder (a merge of sessions retracts
the old ones: the writer deletes their keys).

q19 keeps each auction's bids in a ``sorted_tuple`` reducer and writes its first ten (an
unbounded, re-sorted reducer: the SQL's Top-N keeps ten rows). q15 and q16 use
``count_distinct`` with the ``FILTER`` written as a sentinel value (see there).

Not expressed: q6 (the average of each seller's last 10 winning prices, an ordered window
over an updating table).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from bench.nexmark import dates
from bench.nexmark.contenders import rows
from bench.nexmark.contenders.peer import (
    AUCTION,
    BID,
    HEARTBEAT_INTERVAL_MS,
    PERSON,
    SESSION_TIMEOUT_MS,
    SIDE_INPUT,
    PeerContender,
    Status,
    dumps,
    linger,
    log,
    parse_args,
)

APPEND = {"q0", "q1", "q2", "q3", "q13", "q14", "q20", "q21", "q22"}
TABLE = {"q4", "q5", "q7", "q8", "q9", "q11", "q15", "q16", "q17", "q18", "q19"}
QUERIES = frozenset(APPEND | TABLE)
INPUTS = {"q3": (AUCTION, PERSON), "q4": (AUCTION, BID), "q8": (PERSON, AUCTION),
          "q9": (AUCTION, BID), "q13": (BID, SIDE_INPUT), "q20": (AUCTION, BID)}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    status = Status(args.status)
    q = args.query
    if q not in QUERIES:
        log(f"pathway has no {q}")
        return 2
    import pathway as pw
    from confluent_kafka import Producer

    class Bid(pw.Schema):
        auction: int
        bidder: int
        price: int
        channel: str
        url: str
        dateTime: int  # noqa: N815 - the field's name in the topic
        extra: str

    # ``id`` names Pathway's row ids: the auction's and person's id are read as aid and pid
    class Auction(pw.Schema):
        aid: int
        itemName: str  # noqa: N815
        description: str
        initialBid: int  # noqa: N815
        reserve: int
        dateTime: int  # noqa: N815
        expires: int
        seller: int
        category: int
        extra: str

    class Person(pw.Schema):
        pid: int
        name: str
        emailAddress: str  # noqa: N815
        creditCard: str  # noqa: N815
        city: str
        state: str
        dateTime: int  # noqa: N815
        extra: str

    schemas = {BID: Bid, AUCTION: Auction, PERSON: Person}
    consumer = {"bootstrap.servers": args.bootstrap, "group.id": args.run_id,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": str(SESSION_TIMEOUT_MS),
                "heartbeat.interval.ms": str(HEARTBEAT_INTERVAL_MS)}
    autocommit = int(args.settings.get("autocommit.ms", "1500"))
    topics = INPUTS.get(q, (BID,))
    paths = {AUCTION: {"aid": "/id"}, PERSON: {"pid": "/id"}}
    tables = {t: pw.io.kafka.read(consumer, topic=t, format="json", schema=schemas[t],
                                  json_field_paths=paths.get(t),
                                  autocommit_duration_ms=autocommit, name=t)
              for t in topics if t != SIDE_INPUT}
    if SIDE_INPUT in topics:
        # keys and values are JSON numbers and strings, not objects: read raw
        tables[SIDE_INPUT] = pw.io.kafka.read(consumer, topic=SIDE_INPUT, format="raw",
                                              autocommit_duration_ms=autocommit,
                                              name=SIDE_INPUT)
    out = _query(pw, q, tables)
    expected = sum(args.input_counts[t] for t in topics)
    counts = [tables[t].reduce(n=pw.reducers.count()) for t in topics]
    progress = counts[0]
    for c in counts[1:]:
        progress = progress.join(c).select(n=pw.left.n + pw.right.n)
    # the progress row: "#<input rows read>"
    progress = progress.select(k=pw.apply_with_type(lambda n: f"#{n}", str, pw.this.n),
                               v=pw.declare_type(str | None, None))
    out = out.select(k=pw.this.k, v=pw.declare_type(str | None, pw.this.v))
    watched = out.concat_reindex(progress)

    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 20,
                         "partitioner": "murmur2_random"})
    topic = args.output
    table_kind = q in TABLE
    pending: dict[str, str | None] = {}
    seen = [0]

    def produce(k: str, v: str | None) -> None:
        while True:
            try:
                producer.produce(topic, key=k.encode(), value=None if v is None else v.encode())
                return
            except BufferError:
                producer.poll(0.05)

    def on_change(key: Any, row: dict[str, Any], time: int, is_addition: bool) -> None:
        k = row["k"]
        if k.startswith("#"):
            if is_addition:
                seen[0] = int(k[1:])
                status.progress(seen[0], expected)
            return
        if not table_kind:
            if is_addition:
                produce(k, row["v"])
        elif is_addition:
            pending[k] = row["v"]
        elif k not in pending:
            pending[k] = None

    def on_time_end(time: int) -> None:
        for k, v in pending.items():
            produce(k, v)
        pending.clear()
        producer.poll(0)
        if seen[0] >= expected:
            producer.flush(120)
            status.event("caught_up")
            log(f"pathway {q}: caught up ({seen[0]:,} input records)")
            linger()
            os._exit(0)

    pw.io.subscribe(watched, on_change=on_change, on_time_end=on_time_end)
    status.event("started")
    log(f"pathway {q}: running")
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    return 0


def _query(pw: Any, q: str, t: dict[str, Any]) -> Any:
    """The query's table of ``k`` and ``v`` (JSON strings)."""
    def udf(fn: Any) -> Any:
        return pw.udf(fn, deterministic=True)

    if q in rows.STATELESS:
        bids = t[BID]
        if q == "q2":
            bids = bids.filter(pw.this.auction % 123 == 0)
        elif q == "q14":
            bids = bids.filter((pw.this.price * 908 > 1_000_000_000)
                               & (pw.this.price * 908 < 50_000_000_000))
        fn = rows.STATELESS[q]

        @udf
        def record(auction: int, bidder: int, price: int, channel: str, url: str,
                   dateTime: int, extra: str) -> tuple[str, str | None]:  # noqa: N803
            kv = fn({"auction": auction, "bidder": bidder, "price": price, "channel": channel,
                     "url": url, "dateTime": dateTime, "extra": extra})
            return ("", None) if kv is None else (dumps(kv[0]), dumps(kv[1]))

        kv = bids.select(kv=record(*[pw.this[c] for c in rows.BID_FIELDS]))
        if q == "q21":
            kv = kv.filter(pw.this.kv[1].is_not_none())
        return kv.select(k=pw.this.kv[0], v=pw.this.kv[1])
    if q == "q3":
        a, p = t[AUCTION], t[PERSON]
        sellers = p.filter((p.state == "OR") | (p.state == "ID") | (p.state == "CA"))
        joined = a.filter(a.category == 10).join(sellers, pw.left.seller == pw.right.pid).select(
            pw.right.name, pw.right.city, pw.right.state, aid=pw.left.aid)

        @udf
        def q3v(name: str, city: str, state: str, id_: int) -> str:
            return dumps({"name": name, "city": city, "state": state, "id": id_})

        return joined.select(k=pw.apply_with_type(dumps, str, pw.this.aid),
                             v=q3v(pw.this.name, pw.this.city, pw.this.state, pw.this.aid))
    if q == "q20":
        a, b = t[AUCTION], t[BID]
        joined = b.join(a.filter(a.category == 10), pw.left.auction == pw.right.aid).select(
            auction=pw.left.auction, bidder=pw.left.bidder, price=pw.left.price,
            channel=pw.left.channel, url=pw.left.url, bid_dateTime=pw.left.dateTime,
            bid_extra=pw.left.extra, itemName=pw.right.itemName,
            description=pw.right.description, initialBid=pw.right.initialBid,
            reserve=pw.right.reserve, auction_dateTime=pw.right.dateTime,
            expires=pw.right.expires, seller=pw.right.seller, category=pw.right.category,
            auction_extra=pw.right.extra)
        return _as_json(pw, joined, "auction")
    if q in ("q4", "q9"):
        a, b = t[AUCTION], t[BID]
        # the SQL: bids BETWEEN A.dateTime AND A.expires, the highest price, then the earliest
        joined = a.join(b, pw.left.aid == pw.right.auction).select(
            *pw.left, bidder=pw.right.bidder, price=pw.right.price,
            bid_dateTime=pw.right.dateTime, bid_extra=pw.right.extra,
            rank=pw.make_tuple(pw.right.price, -pw.right.dateTime))
        joined = joined.filter((pw.this.bid_dateTime >= pw.this.dateTime)
                               & (pw.this.bid_dateTime <= pw.this.expires))
        winners = joined.groupby(pw.this.aid).reduce(
            best=pw.reducers.argmax(pw.this.rank))
        winners = joined.ix(winners.best)
        if q == "q9":
            return _as_json(pw, winners.without(pw.this.rank).select(
                *pw.this, auction=pw.this.aid), "aid")
        per_category = winners.groupby(pw.this.category).reduce(
            pw.this.category, total=pw.reducers.sum(pw.this.price),
            n=pw.reducers.count())
        return per_category.select(k=pw.apply_with_type(dumps, str, pw.this.category),
                                   v=pw.apply_with_type(lambda s, n: dumps(s // n), str,
                                                        pw.this.total, pw.this.n))
    if q == "q5":
        @udf
        def hops(ts: int) -> list[int]:
            """The starts of the 10 s windows, every 2 s, that hold ``ts``."""
            last = ts - ts % rows.Q5_ADVANCE_MS
            return list(range(last - rows.Q5_SIZE_MS + rows.Q5_ADVANCE_MS, last + 1,
                              rows.Q5_ADVANCE_MS))

        w = t[BID].select(pw.this.auction, w=hops(pw.this.dateTime)).flatten(pw.this.w)
        counts = w.groupby(pw.this.w, pw.this.auction).reduce(
            pw.this.w, pw.this.auction, num=pw.reducers.count())
        maxes = counts.groupby(pw.this.w).reduce(pw.this.w, maxn=pw.reducers.max(pw.this.num))
        hot = counts.join(maxes, pw.left.w == pw.right.w).select(
            pw.left.w, pw.left.auction, pw.left.num, maxn=pw.right.maxn)
        hot = hot.filter(pw.this.num >= pw.this.maxn)
        per_window = hot.groupby(pw.this.w).reduce(
            pw.this.w, top=pw.reducers.tuple(pw.make_tuple(pw.this.auction, pw.this.num)))
        return per_window.select(
            k=pw.apply_with_type(lambda s: dumps([s, s + rows.Q5_SIZE_MS]), str, pw.this.w),
            v=pw.apply_with_type(lambda top: dumps(sorted(list(r) for r in top)), str,
                                 pw.this.top))
    if q == "q7":
        @udf
        def windows(ts: int) -> list[int]:
            """The windows whose ``BETWEEN window_end - 10 s AND window_end`` holds ``ts``."""
            return [start for start, _, _ in rows.q7_candidates({
                "dateTime": ts, "auction": 0, "price": 0, "bidder": 0, "extra": ""})]

        b = t[BID]
        maxes = b.select(pw.this.price, start=pw.this.dateTime - pw.this.dateTime % 10_000)
        maxes = maxes.groupby(pw.this.start).reduce(
            pw.this.start, maxprice=pw.reducers.max(pw.this.price))
        cands = b.select(*pw.this, w=windows(pw.this.dateTime)).flatten(pw.this.w)
        top = cands.join(maxes, pw.left.w == pw.right.start,
                         pw.left.price == pw.right.maxprice).select(*pw.left)
        per_window = top.groupby(pw.this.w).reduce(pw.this.w, bids=pw.reducers.tuple(
            pw.make_tuple(pw.this.dateTime, pw.this.auction, pw.this.bidder, pw.this.price,
                          pw.this.extra)))

        def value(bids: Any) -> str:
            return dumps([{"auction": a, "price": p, "bidder": b, "dateTime": ts, "extra": e}
                          for ts, a, b, p, e in sorted(bids)])

        return per_window.select(
            k=pw.apply_with_type(lambda s: dumps([s, s + rows.Q7_SIZE_MS]), str, pw.this.w),
            v=pw.apply_with_type(value, str, pw.this.bids))
    if q == "q8":
        persons = t[PERSON].select(pw.this.pid, pw.this.name,
                                   start=pw.this.dateTime - pw.this.dateTime % 10_000)
        sellers = t[AUCTION].select(pw.this.seller,
                                    start=pw.this.dateTime - pw.this.dateTime % 10_000)
        joined = persons.join(sellers, pw.left.pid == pw.right.seller,
                              pw.left.start == pw.right.start).select(*pw.left)
        # the SQL's GROUP BYs: one row per person and window, however many auctions
        new = joined.groupby(pw.this.pid, pw.this.start).reduce(
            pw.this.pid, pw.this.start, name=pw.reducers.any(pw.this.name))
        return new.select(
            k=pw.apply_with_type(lambda i, s: dumps([i, s]), str, pw.this.pid, pw.this.start),
            v=pw.apply_with_type(lambda i, n, s: dumps({"id": i, "name": n, "starttime": s}),
                                 str, pw.this.pid, pw.this.name, pw.this.start))
    if q == "q11":
        # Pathway's session: adjacent records less than max_gap apart, as Flink's SESSION;
        # the window's start and end are its first and last record's times
        sessions = t[BID].windowby(
            pw.this.dateTime, window=pw.temporal.session(max_gap=rows.Q11_GAP_MS),
            instance=pw.this.bidder,
        ).reduce(bidder=pw.this._pw_instance, start=pw.this._pw_window_start,
                 last=pw.this._pw_window_end, n=pw.reducers.count())
        return sessions.select(
            k=pw.apply_with_type(lambda b, s: dumps([b, s]), str, pw.this.bidder,
                                 pw.this.start),
            v=pw.apply_with_type(
                lambda b, n, s, e: dumps({"bidder": b, "bid_count": n, "starttime": s,
                                          "endtime": e + rows.Q11_GAP_MS}),
                str, pw.this.bidder, pw.this.n, pw.this.start, pw.this.last))
    if q == "q13":
        side = t[SIDE_INPUT].select(
            key=pw.apply_with_type(lambda k: json.loads(k), int, pw.this.key),
            value=pw.apply_with_type(lambda v: json.loads(v), str, pw.this.data))
        b = t[BID].select(*pw.this, m=pw.this.auction % 10_000)
        joined = b.join(side, pw.left.m == pw.right.key).select(
            pw.left.auction, pw.left.bidder, pw.left.price, pw.left.dateTime, pw.right.value)
        return _as_json(pw, joined, "auction")
    if q in ("q15", "q16"):
        b = t[BID].select(*pw.this, day=pw.apply_with_type(dates.day, str, pw.this.dateTime),
                          minute=pw.apply_with_type(dates.minute, str, pw.this.dateTime))
        ranks = {"total": pw.this.price >= 0, "rank1": pw.this.price < 10_000,
                 "rank2": (pw.this.price >= 10_000) & (pw.this.price < 1_000_000),
                 "rank3": pw.this.price >= 1_000_000}
        aggregates: dict[str, Any] = {}
        for slot, cond in ranks.items():
            aggregates[f"{slot}_bids"] = pw.reducers.sum(pw.if_else(cond, 1, 0))
            # count(distinct x) FILTER (WHERE cond): the distinct x of the rows that match,
            # the others counted as one sentinel -1 (ids are positive), less that sentinel
            sentinel = pw.reducers.max(pw.if_else(cond, 0, 1))
            for kind, col in (("bidders", pw.this.bidder), ("auctions", pw.this.auction)):
                aggregates[f"{slot}_{kind}__n"] = pw.reducers.count_distinct(
                    pw.if_else(cond, col, -1))
            aggregates[f"{slot}__sentinel"] = sentinel
        group = (pw.this.day,) if q == "q15" else (pw.this.channel, pw.this.day)
        extra = {} if q == "q15" else {"minute": pw.reducers.max(pw.this.minute)}
        stats = b.groupby(*group).reduce(*group, **extra, **aggregates)
        columns = {c: pw.this[c] for c in stats.column_names() if "__" not in c}
        for slot in ranks:
            for kind in ("bidders", "auctions"):
                columns[f"{slot}_{kind}"] = (pw.this[f"{slot}_{kind}__n"]
                                             - pw.this[f"{slot}__sentinel"])
        stats = stats.select(**columns)
        out = _as_json(pw, stats, None)
        if q == "q15":
            return out.select(k=pw.apply_with_type(dumps, str, stats.day), v=pw.this.v)
        return out.select(k=pw.apply_with_type(lambda c, d: dumps([c, d]), str,
                                               stats.channel, stats.day), v=pw.this.v)
    if q == "q19":
        # ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) <= 10: Pathway keeps
        # each auction's bids sorted (sorted_tuple), the first ten are the rows
        top = t[BID].groupby(pw.this.auction).reduce(pw.this.auction, bids=pw.reducers.sorted_tuple(
            pw.make_tuple(-pw.this.price, pw.this.dateTime, pw.this.bidder, pw.this.channel,
                          pw.this.url, pw.this.extra)))

        def ranked(auction: int, bids: Any) -> str:
            return dumps([{"auction": auction, "bidder": b, "price": -p, "channel": c, "url": u,
                           "dateTime": ts, "extra": e, "rank_number": i}
                          for i, (p, ts, b, c, u, e) in enumerate(bids[:10], 1)])

        return top.select(k=pw.apply_with_type(dumps, str, pw.this.auction),
                          v=pw.apply_with_type(ranked, str, pw.this.auction, pw.this.bids))
    if q == "q17":
        b = t[BID].select(*pw.this, day=pw.apply_with_type(dates.day, str, pw.this.dateTime))
        stats = b.groupby(pw.this.auction, pw.this.day).reduce(
            pw.this.auction, pw.this.day, total_bids=pw.reducers.count(),
            rank1_bids=pw.reducers.sum(pw.if_else(pw.this.price < 10_000, 1, 0)),
            rank2_bids=pw.reducers.sum(pw.if_else(
                (pw.this.price >= 10_000) & (pw.this.price < 1_000_000), 1, 0)),
            rank3_bids=pw.reducers.sum(pw.if_else(pw.this.price >= 1_000_000, 1, 0)),
            min_price=pw.reducers.min(pw.this.price), max_price=pw.reducers.max(pw.this.price),
            sum_price=pw.reducers.sum(pw.this.price))
        stats = stats.select(*pw.this, avg_price=pw.this.sum_price // pw.this.total_bids)
        out = _as_json(pw, stats, None)
        return out.select(k=pw.apply_with_type(lambda a, d: dumps([a, d]), str,
                                               stats.auction, stats.day), v=pw.this.v)
    if q == "q18":
        b = t[BID]
        last = b.groupby(pw.this.bidder, pw.this.auction).reduce(
            best=pw.reducers.argmax(pw.this.dateTime))
        last = b.ix(last.best)
        out = _as_json(pw, last, None)
        return out.select(k=pw.apply_with_type(lambda x, y: dumps([x, y]), str,
                                               last.bidder, last.auction), v=pw.this.v)
    raise ValueError(q)


RENAMED = {"aid": "id", "pid": "id"}


def _as_json(pw: Any, table: Any, key: str | None) -> Any:
    """``k`` (the column ``key`` as JSON; empty when None) and ``v`` (the row as a JSON
    object)."""
    names = table.column_names()
    fields = [RENAMED.get(n, n) for n in names]

    def value(*vals: Any) -> str:
        return dumps(dict(zip(fields, vals, strict=True)))

    return table.select(
        k=pw.apply_with_type(dumps, str, table[key]) if key else "",
        v=pw.apply_with_type(value, str, *[table[c] for c in names]))


CONTENDER = PeerContender("pathway", "pathway", "bench.nexmark.contenders.pathway_tables",
                          QUERIES)

if __name__ == "__main__":
    sys.exit(main())
