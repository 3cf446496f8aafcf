"""The bare loop: the practical limit of Python on the stateless queries. One process, one
confluent-kafka consumer assigned every partition of the bid topic from the beginning (no group,
no commits, no state, no delivery guarantee), each record decoded, passed through the query's
expression (``rows.py``, the same functions the Python peers run) and produced, compact JSON,
with ``linger.ms=20`` as the other peers. It is what the issue's "≥ 50% of the bare loop's
rate on the stateless queries" measures streamtable against: the cost of nothing but reading,
decoding, one function call, encoding and writing each record.

Queries: q0, q1, q2, q14, q21, q22 (``rows.STATELESS``).
"""

from __future__ import annotations

import json
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

QUERIES = frozenset(rows.STATELESS)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    status = Status(args.status)
    if args.query not in QUERIES:
        log(f"bare has no {args.query}")
        return 2
    from confluent_kafka import Consumer, Producer, TopicPartition

    query = rows.STATELESS[args.query]
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.run_id,
                         "enable.auto.commit": False, "fetch.wait.max.ms": 10,
                         "queued.min.messages": 200_000})
    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 20})
    parts = sorted(consumer.list_topics(BID, timeout=30).topics[BID].partitions)
    consumer.assign([TopicPartition(BID, p, 0) for p in parts])
    total = left = args.input_counts[BID]
    out, produce, loads = args.output, producer.produce, json.loads
    status.event("started")
    log(f"bare {args.query}: reading {BID} partitions {parts}, {left:,} records")
    while left > 0:
        msgs = consumer.consume(num_messages=10_000, timeout=0.05)
        for m in msgs:
            if m.error():
                continue
            left -= 1
            kv: Any = query(loads(m.value()))
            if kv is not None:
                while True:
                    try:
                        produce(out, key=encode(kv[0]), value=encode(kv[1]))
                        break
                    except BufferError:
                        producer.poll(0.05)
        producer.poll(0)
        status.progress(total - left, total)
    producer.flush(120)
    consumer.close()
    status.event("caught_up")
    linger()
    return 0


CONTENDER = PeerContender("bare", None, __name__, QUERIES)

if __name__ == "__main__":
    raise SystemExit(main())
