"""Quix Streams (``quixstreams==3.28.1``, its own venv ``bench/.venvs/quix``): each query a
``StreamingDataFrame`` over the bid topic.

The application reads with a fresh consumer group from the earliest offset (the settings of
``bench/contenders/quix_app.py``: at-least-once, RocksDB state with changelog topics,
``session.timeout.ms=6000``, producer ``linger.ms=20``). A first ``update`` step counts the
records consumed, and for the queries that ``group_by`` (a repartition topic, read back by the
same application) the records sent there and read back are counted too: once it has the
runner's count and every repartitioned record came back, it stops the application, which
finishes the record in hand and commits its checkpoint (flushing the producer): then
``caught_up``. Keys and
values are written as compact JSON bytes (``peer.encode``). Record timestamps are the Kafka
timestamps, the events' ``dateTime``.

Queries:

* q0, q1, q2, q14, q21, q22: ``apply`` of the SQL's expressions (``rows.py``) and ``filter``.
* q5: ``hopping_window(10 s, 2 s).count().current()`` per auction (the message key), then
  ``group_by`` the window and a stateful step keeping each window's highest count and the
  auctions that have it (counts only grow), emitting them when they change.
* q7: each bid to its window (and the window before when it is at its end), ``group_by`` the
  window start, a stateful step keeping the highest-priced bids (``rows.q7_fold``).
* q15, q16: ``group_by`` the day (q16: channel and day), a stateful step counting bids and
  the distinct bidders and auctions, in all and per price rank (each member a key of the
  group's state, so a bid costs a few lookups, not a set's serialization).
* q17, q18, q19: ``group_by`` the SQL's ``GROUP BY``/``PARTITION BY`` key and a stateful step
  folding the bids (``rows.q17_fold``, ...): the key's new row on every bid.

* q20: ``join_interval`` of the bids with the auctions of category 10 (co-partitioned: both
  keyed by the auction's id), reaching 60 s back and forward: wider than any bid's distance
  from its auction in these events, so it is the SQL's regular join here.

* q9: the same join over all auctions, then a stateful step per auction keeping the best bid
  within the auction's time (the join's rows only come, so the top row only improves).

Not written: the other joins (q3, q8, q13): q3 and q8 an interval join after a ``group_by`` of
the auctions by seller; this contender covers the stateless and windowed queries. Not
expressed: q4 and q6 (an aggregate of an updating table: no changelog of an aggregate to
retract from), and q11: its session windows emit a merged session under the new start without
retracting the sessions it replaced (``current()``), or only when a session closes, which the
last sessions never do in a bounded run (``final()``).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from bench.nexmark import dates
from bench.nexmark.contenders import rows
from bench.nexmark.contenders.peer import (
    AUCTION,
    BID,
    HEARTBEAT_INTERVAL_MS,
    SESSION_TIMEOUT_MS,
    PeerContender,
    Status,
    encode,
    linger,
    log,
    parse_args,
)

STATEFUL = {"q5", "q7", "q9", "q15", "q16", "q17", "q18", "q19", "q20"}
#: q20's interval: wider than any bid's distance from its auction (events.py's ids "lead")
Q20_REACH_MS = 60_000
QUERIES = frozenset(rows.STATELESS) | STATEFUL
RETENTION = {"retention.ms": "-1", "retention.bytes": "-1"}


def q20_row(bid: Any, auction: Any) -> Any:
    """A bid and its auction as q20's output record."""
    row = {f: bid[f] for f in ("auction", "bidder", "price", "channel", "url")}
    row.update(bid_dateTime=bid["dateTime"], bid_extra=bid["extra"])
    row.update({f: auction[f] for f in rows.AUCTION_FIELDS})
    row.update(auction_dateTime=auction["dateTime"], auction_extra=auction["extra"])
    return bid["auction"], row


def q9_best(pair: Any, state: Any) -> Any:
    """q9's top row per auction (the message key) over the join's rows, which only come: the
    auction's record when a bid in its time beats the best so far (price, then earliest)."""
    bid, auction = pair
    if not auction["dateTime"] <= bid["dateTime"] <= auction["expires"]:
        return None
    best = state.get("best")
    if best is not None and (bid["price"], -bid["dateTime"]) <= tuple(best):
        return None
    state.set("best", [bid["price"], -bid["dateTime"]])
    row = dict(auction)
    row.update(auction=bid["auction"], bidder=bid["bidder"], price=bid["price"],
               bid_dateTime=bid["dateTime"], bid_extra=bid["extra"])
    return auction["id"], row


def fold_step(fold: Any) -> Any:
    """A stateful ``apply`` running ``fold(state, value)`` with the key's state."""
    def step(value: Any, state: Any) -> Any:
        new, out = fold(state.get("s"), value)
        state.set("s", new)
        return out
    return step


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    status = Status(args.status)
    if args.query not in QUERIES:
        log(f"quix has no {args.query}")
        return 2
    from quixstreams import Application
    from quixstreams.models import TopicConfig
    from quixstreams.models.serializers import Serializer

    class SecondAsJson(Serializer):  # type: ignore[misc]
        """The value of an output record ``(key, value)``, as compact JSON."""

        def __call__(self, kv: Any, ctx: Any) -> bytes:
            return encode(kv[1])

    app = Application(
        broker_address=args.bootstrap, consumer_group=args.run_id,
        auto_offset_reset="earliest", state_dir=args.state_dir,
        consumer_extra_config={"session.timeout.ms": SESSION_TIMEOUT_MS,
                               "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS},
        producer_extra_config={"linger.ms": 20}, loglevel="WARNING")
    cfg = TopicConfig(num_partitions=2, replication_factor=1, extra_config=dict(RETENTION))
    inp = app.topic(BID, key_deserializer="json", value_deserializer="json", config=cfg)
    out = app.topic(args.output, key_serializer="bytes", value_serializer=SecondAsJson(),
                    config=cfg)
    sdf = app.dataframe(inp)
    # [input records left, records sent to the repartition topic, records read back from it]
    left = [args.input_counts[BID], 0, 0]
    total = [left[0]]  # the input records it reads

    regrouped = args.query not in rows.STATELESS and args.query not in ("q9", "q20")

    def count(_: Any) -> None:
        left[0] -= 1
        status.progress(total[0] - left[0], total[0])
        if not regrouped:  # else the record's items are still on their way
            stop_when_done()

    def sent(_: Any) -> None:
        left[1] += 1

    def received(_: Any) -> None:
        left[2] += 1
        stop_when_done()

    def stop_when_done() -> None:
        if left[0] <= 0 and left[1] == left[2]:
            app.stop()

    def regroup(sdf: Any, key: Any, name: str) -> Any:
        """``group_by`` counting what goes through the repartition topic: the application
        stops once every record sent there has come back and been processed."""
        return sdf.update(sent).group_by(key, name=name).update(received)

    sdf = sdf.update(count)
    q = args.query
    if q in ("q9", "q20"):
        left[0] += args.input_counts[AUCTION]
        total[0] += args.input_counts[AUCTION]
        auctions = app.dataframe(app.topic(AUCTION, key_deserializer="json",
                                           value_deserializer="json", config=cfg))
        auctions = auctions.update(count)
        if q == "q20":
            auctions = auctions.filter(lambda a: a["category"] == 10)
        # bids and auctions are keyed by the auction's id: co-partitioned, as the join needs
        sdf = sdf.join_interval(auctions, how="inner",
                                on_merge=q20_row if q == "q20" else lambda b, a: [b, a],
                                grace_ms=Q20_REACH_MS, backward_ms=Q20_REACH_MS,
                                forward_ms=Q20_REACH_MS)
        if q == "q9":
            sdf = sdf.apply(q9_best, stateful=True).filter(lambda kv: kv is not None)
    elif q in rows.STATELESS:
        sdf = sdf.apply(rows.STATELESS[q]).filter(lambda kv: kv is not None)
    elif q == "q5":
        sdf = (sdf.hopping_window(rows.Q5_SIZE_MS, rows.Q5_ADVANCE_MS, grace_ms=60_000)
               .count().current())
        sdf = sdf.apply(lambda w, key, ts, headers: [w["start"], w["end"], key, w["value"]],
                        metadata=True)
        sdf = regroup(sdf, lambda w: f"{w[0]}", "window")

        def hot(w: Any, state: Any) -> Any:
            # an auction's count in a window only grows, one step at a time, in order (one
            # input partition): the window's state is its highest count and the auctions
            # that have it
            auction, n = w[2], w[3]
            top_n, top = state.get("max", 0), state.get("top", [])
            if n > top_n:
                top_n, top = n, [auction]
            elif n == top_n:
                top = [*top, auction]
            else:
                return None
            state.set("max", top_n)
            state.set("top", top)
            return [w[0], w[1]], sorted([a, top_n] for a in top)

        sdf = sdf.apply(hot, stateful=True).filter(lambda kv: kv is not None)
    elif q == "q7":
        sdf = sdf.apply(rows.q7_candidates, expand=True)
        sdf = regroup(sdf, lambda c: str(c[0]), "window")
        sdf = sdf.apply(fold_step(rows.q7_fold), stateful=True).filter(
            lambda kv: kv is not None)
    elif q in ("q15", "q16"):
        sdf = regroup(sdf, lambda b: json.dumps(rows.report_group(q, b)[0]), "group")

        def report(bid: Any, state: Any) -> Any:
            def new(kind: str, slot: str, id_: int) -> bool:
                # each distinct count's members are keys of the group's state
                member = f"{kind}/{slot}/{id_}"
                if state.exists(member):
                    return False
                state.set(member, 1)
                return True

            row = rows.report_add(q, state.get("row"), bid, new)
            state.set("row", row)
            return rows.report_group(q, bid)[0], row

        sdf = sdf.apply(report, stateful=True)
    else:
        key, fold = {"q17": (lambda b: f"{b['auction']}/{b['dateTime'] // dates.DAY_MS}",
                             rows.q17_fold),
                     "q18": (lambda b: f"{b['bidder']}/{b['auction']}", rows.q18_fold),
                     "q19": (lambda b: str(b["auction"]), rows.q19_fold)}[q]
        sdf = regroup(sdf, key, "key")
        sdf = sdf.apply(fold_step(fold), stateful=True).filter(lambda kv: kv is not None)
    # each step above ends with the output record (key, value): the key is taken from it,
    # the value serializer writes its second half
    sdf.to_topic(out, key=lambda kv: encode(kv[0]))
    def progress() -> None:
        while True:
            time.sleep(10)
            log(f"quix {q}: {left[0]:,} input records to go, {left[1]:,} repartitioned, "
                f"{left[2]:,} read back")

    threading.Thread(target=progress, daemon=True).start()
    status.event("started")
    log(f"quix {q}: running")
    app.run()
    status.event("caught_up")
    log(f"quix {q}: caught up")
    linger()
    return 0


CONTENDER = PeerContender("quix", "quix", "bench.nexmark.contenders.quix_streams", QUERIES)

if __name__ == "__main__":
    sys.exit(main())
