"""Bytewax (``bytewax==0.21.1``, its own venv ``bench/.venvs/bytewax``): each query a dataflow.

Input: a ``DynamicSource`` of this module reading the topic's partitions with one
confluent-kafka consumer (assigned, from the beginning, no group) until it has the runner's
count of records, then it ends; the dataflow then runs to completion and the process reports
``caught_up``. (Bytewax's own Kafka input finds a partition's end from its high watermark,
which the development broker reports wrong for batched records, so it could only ``tail``
forever.) Output: ``bytewax.connectors.kafka`` ``operators.output`` (one flush per batch).
One worker (``--config workers=N``): two cores are shared with the broker and the harness.

Queries:

* q0, q1, q2, q14, q21, q22: ``filter_map`` of the SQL's expressions (``rows.py``).
* q5, q7, q11, q15, q16, q17, q18, q19: ``stateful_map`` per key (``(window, auction)`` then
  the window for q5's two aggregations, the window start, ``(auction, day)``, ``(bidder,
  auction)``, the auction, the day or channel and day, q15/q16's distinct counts keeping their
  sets in the fold): the SQL's aggregate or ``ROW_NUMBER`` as a fold, emitting the key's new row on
  every bid (the ``table`` output: the last value per key). Windows are computed from
  ``dateTime`` (event time); Bytewax's own window operators emit a window only when it closes,
  its start in a separate metadata stream.
* q3, q8, q9, q13, q20: the two topics merged, keyed by the join key, a ``stateful_map`` holding
  the one side's row and the other side's rows that came before it (``rows.q3_join``, ...;
  q8's key is the person and the 10-second window, q13's the side input's key; q9's state
  also keeps the auction's best bid: the join's rows only come, so its top row only improves,
  no retraction needed).
  Bytewax's ``join`` operator keeps only the latest value per side and key, which loses rows
  of an inner join with many rows per key (a seller's auctions, an auction's bids).

Not expressed here:

* q6 (the average of a seller's last 10 winning prices, over an updating table of winners):
  not written; q4 shows the way (below).
* (q4 is the winners of q9 as changes ``(category, (old price, new price))``, re-keyed by
  category and folded into a sum and a count: the retraction Bytewax has no notion of, written
  by hand, as Quix's W2 of the word-count bench does it.)
* (q11 is written as a fold too: ``rows.q11_fold`` keeps a bidder's sessions and merges
  those a bid bridges, deleting the merged-away keys. Bytewax's ``SessionWindower`` emits a
  session only when it closes, its start in the metadata stream.)
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterable
from typing import Any

from bench.nexmark import dates
from bench.nexmark.contenders import rows
from bench.nexmark.contenders.peer import (
    AUCTION,
    BID,
    PERSON,
    SIDE_INPUT,
    PeerContender,
    Status,
    encode,
    key_value,
    linger,
    log,
    parse_args,
)

STATEFUL = {"q5", "q7", "q11", "q15", "q16", "q17", "q18", "q19"}
KIND = {AUCTION: "auction", PERSON: "person", BID: "bid", SIDE_INPUT: "side"}
#: join query -> (fold, (topic, its join key, its WHERE), (topic, its join key, its WHERE))
JOINS: dict[str, tuple[Any, tuple[str, Any, Any], tuple[str, Any, Any]]] = {
    "q3": (rows.q3_join, (AUCTION, lambda a: a["seller"], lambda a: a["category"] == 10),
           (PERSON, lambda p: p["id"], lambda p: p["state"] in ("OR", "ID", "CA"))),
    "q20": (rows.q20_join, (AUCTION, lambda a: a["id"], None),
            (BID, lambda b: b["auction"], None)),
    "q9": (rows.q9_join, (AUCTION, lambda a: a["id"], None),
           (BID, lambda b: b["auction"], None)),
    "q4": (rows.q4_winners, (AUCTION, lambda a: a["id"], None),
           (BID, lambda b: b["auction"], None)),
    "q8": (rows.q8_join, (PERSON, lambda p: (p["id"], p["dateTime"] // 10_000), None),
           (AUCTION, lambda a: (a["seller"], a["dateTime"] // 10_000), None)),
    "q13": (rows.q13_join, (SIDE_INPUT, lambda kv: kv[0], None),
            (BID, lambda b: b["auction"] % 10_000, None)),
}
QUERIES = frozenset(rows.STATELESS) | STATEFUL | set(JOINS)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    status = Status(args.status)
    if args.query not in QUERIES:
        log(f"bytewax has no {args.query}")
        return 2
    import bytewax.operators as op
    from bytewax._bytewax import cli_main
    from bytewax.connectors.kafka import KafkaSinkMessage
    from bytewax.connectors.kafka import operators as kop
    from bytewax.dataflow import Dataflow
    from bytewax.inputs import DynamicSource, StatelessSourcePartition
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    bootstrap, want = args.bootstrap, args.input_counts
    read: dict[str, int] = {}  # input records read, by topic (Status.progress)

    class TopicPart(StatelessSourcePartition):  # type: ignore[misc,type-arg]
        def __init__(self, topic: str) -> None:
            self.topic, self.left = topic, want[topic]
            read[topic] = 0
            self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": args.run_id,
                                      "enable.auto.commit": False})
            parts = self.consumer.list_topics(topic, timeout=30).topics[topic].partitions
            self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])

        def next_batch(self) -> Iterable[Any]:
            if self.left <= 0:
                raise StopIteration
            out = []
            for m in self.consumer.consume(1000, 0.05):
                if m.error() is None:
                    key, value = key_value(m)
                    # the side input's records are a key and a JSON string, not an object
                    out.append((json.loads(key), json.loads(value))
                               if self.topic == SIDE_INPUT else json.loads(value))
            self.left -= len(out)
            read[self.topic] += len(out)
            status.progress(sum(read.values()), sum(want[t] for t in read))
            return out

        def close(self) -> None:
            self.consumer.close()

    class TopicSource(DynamicSource):  # type: ignore[misc,type-arg]
        def __init__(self, topic: str) -> None:
            self.topic = topic

        def build(self, step_id: str, worker_index: int, worker_count: int) -> TopicPart:
            # worker 0 reads every partition: one consumer, one worker by default
            return TopicPart(self.topic) if worker_index == 0 else Empty()

    class Empty(StatelessSourcePartition):  # type: ignore[misc,type-arg]
        def next_batch(self) -> Iterable[Any]:
            raise StopIteration

    flow = Dataflow(f"nexmark-{args.query}")
    q = args.query
    if q in JOINS:
        join, (left, left_key, left_where), (right, right_key, right_where) = JOINS[q]
        sides = []
        for topic, where in ((left, left_where), (right, right_where)):
            side = op.input(topic, flow, TopicSource(topic))
            if where is not None:
                side = op.filter(f"where-{topic}", side, where)
            sides.append(op.map(f"tag-{topic}", side, lambda r, t=topic: (t, r)))
        tagged = op.merge("tagged", *sides)
        keys = {left: left_key, right: right_key}
        keyed = op.key_on("key", tagged, lambda item: str(keys[item[0]](item[1])))
        joined = op.stateful_map("join", keyed, lambda s, item: join(s, (KIND[item[0]],
                                                                        item[1])))
        out = op.flat_map("rows", joined, lambda kv: kv[1])
        if q == "q4":
            by_category = op.key_on("by_category", out, lambda change: str(change[0]))
            out = op.map("unkey", op.stateful_map("average", by_category, rows.q4_average),
                         lambda kv: kv[1])
        _output(op, kop, KafkaSinkMessage, out, bootstrap, args.output)
        return _run(cli_main, flow, status, args)
    bids = op.input("bids", flow, TopicSource(BID))
    if q in rows.STATELESS:
        out = op.filter_map("query", bids, rows.STATELESS[q])
    elif q == "q5":
        windows = op.flat_map("windows", bids, rows.q5_windows)
        counts = op.stateful_map("count", op.key_on("by_window_auction", windows,
                                                    lambda wa: f"{wa[0]}/{wa[1]}"), rows.q5_count)
        by_window = op.key_on("by_window", op.map("unkey", counts, lambda kv: kv[1]),
                              lambda c: str(c[0]))
        out = op.filter_map("changed", op.stateful_map("hot", by_window, rows.q5_hot),
                            lambda kv: kv[1])
    elif q == "q11":
        keyed = op.key_on("by_bidder", bids, lambda b: str(b["bidder"]))
        out = op.flat_map("changes", op.stateful_map("sessions", keyed, rows.q11_fold),
                          lambda kv: kv[1])
    elif q == "q7":
        cands = op.flat_map("windows", bids, rows.q7_candidates)
        keyed = op.key_on("by_window", cands, lambda c: str(c[0]))
        out = op.filter_map("changed", op.stateful_map("top", keyed, rows.q7_fold),
                            lambda kv: kv[1])
    else:
        key, fold = {"q17": (lambda b: f"{b['auction']}/{b['dateTime'] // dates.DAY_MS}",
                             rows.q17_fold),
                     "q18": (lambda b: f"{b['bidder']}/{b['auction']}", rows.q18_fold),
                     "q19": (lambda b: str(b["auction"]), rows.q19_fold),
                     "q15": (lambda b: str(b["dateTime"] // dates.DAY_MS),
                             rows.report_fold("q15")),
                     "q16": (lambda b: f"{b['channel']}/{b['dateTime'] // dates.DAY_MS}",
                             rows.report_fold("q16"))}[q]
        keyed = op.key_on("key", bids, key)
        folded = op.stateful_map("fold", keyed, fold)
        out = op.filter_map("changed", folded, lambda kv: kv[1])
    _output(op, kop, KafkaSinkMessage, out, bootstrap, args.output)
    return _run(cli_main, flow, status, args)


def _output(op: Any, kop: Any, message: Any, out: Any, bootstrap: str, topic: str) -> None:
    """The stream of ``(key, value)`` records into the output topic, as JSON."""
    msgs = op.map("encode", out, lambda kv: message(
        encode(kv[0]), None if kv[1] is None else encode(kv[1])))
    kop.output("out", msgs, brokers=[bootstrap], topic=topic,
               add_config={"partitioner": "murmur2_random", "linger.ms": "20"})


def _run(cli_main: Any, flow: Any, status: Status, args: Any) -> int:
    def interrupt(*_: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    status.event("started")
    cli_main(flow, workers_per_process=int(args.settings.get("workers", "1")))
    status.event("caught_up")
    log(f"bytewax {args.query}: caught up")
    linger()
    return 0


CONTENDER = PeerContender("bytewax", "bytewax", "bench.nexmark.contenders.bytewax_flow",
                          QUERIES)

if __name__ == "__main__":
    sys.exit(main())
