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
* q7, q17, q18, q19: ``stateful_map`` per key (the window start, ``(auction, day)``,
  ``(bidder, auction)``, the auction): the SQL's aggregate or ``ROW_NUMBER`` as a fold, emitting
  the key's new row on every bid (the ``table`` output: the last value per key).

Not expressed here:

* q3, q8, q20 (stream joins): Bytewax's ``join`` keeps one value per side and key (the
  latest), so an inner join of streams with many rows per key (a seller's auctions, an
  auction's bids) that come before their match loses rows; it needs a hand-written stateful
  join.
* q4, q6, q9 (winning bids): aggregates over an updating join, which need retractions; Bytewax
  has no changelog semantics.
* q5 and q11: Bytewax's window operators emit a window's value when it closes, with its
  start in a separate metadata stream joined by window id; not written in the time of this
  contender (q5 also needs a second aggregation per window over the first's results).
* q13: no side-input table read (it would be a second input and a join).
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterable
from typing import Any

from bench.nexmark.contenders import rows
from bench.nexmark.contenders.peer import (
    BID,
    PeerContender,
    Status,
    encode,
    linger,
    log,
    parse_args,
)

STATEFUL = {"q7", "q17", "q18", "q19"}
QUERIES = frozenset(rows.STATELESS) | STATEFUL


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

    class TopicPart(StatelessSourcePartition):  # type: ignore[misc,type-arg]
        def __init__(self, topic: str) -> None:
            self.topic, self.left = topic, want[topic]
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
                    out.append(json.loads(m.value()))
            self.left -= len(out)
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
    bids = op.input("bids", flow, TopicSource(BID))
    q = args.query
    if q in rows.STATELESS:
        out = op.filter_map("query", bids, rows.STATELESS[q])
    elif q == "q7":
        cands = op.flat_map("windows", bids, rows.q7_candidates)
        keyed = op.key_on("by_window", cands, lambda c: str(c[0]))
        out = op.filter_map("changed", op.stateful_map("top", keyed, rows.q7_fold),
                            lambda kv: kv[1])
    else:
        key, fold = {"q17": (lambda b: f"{b['auction']}/{b['dateTime'] // rows.DAY_MS}",
                             rows.q17_fold),
                     "q18": (lambda b: f"{b['bidder']}/{b['auction']}", rows.q18_fold),
                     "q19": (lambda b: str(b["auction"]), rows.q19_fold)}[q]
        keyed = op.key_on("key", bids, key)
        folded = op.stateful_map("fold", keyed, fold)
        out = op.filter_map("changed", folded, lambda kv: kv[1])
    msgs = op.map("encode", out, lambda kv: KafkaSinkMessage(encode(kv[0]), encode(kv[1])))
    kop.output("out", msgs, brokers=[bootstrap], topic=args.output,
               add_config={"partitioner": "murmur2_random", "linger.ms": "20"})

    def interrupt(*_: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    status.event("started")
    cli_main(flow, workers_per_process=int(args.settings.get("workers", "1")))
    status.event("caught_up")
    log(f"bytewax {q}: caught up")
    linger()
    return 0


CONTENDER = PeerContender("bytewax", "bytewax", "bench.nexmark.contenders.bytewax_flow",
                          QUERIES)

if __name__ == "__main__":
    sys.exit(main())
