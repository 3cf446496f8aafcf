"""The practical limit: a bare confluent-kafka consumer loop keeping its state in dicts.

No consumer group (partitions are assigned, read from the beginning), no state durability, no
offset commits. After every ``consume()`` call (up to 10,000 records) it produces the new value
of every key that call changed (the same "last change per key per commit" as a cache).
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (  # noqa: E402
    US_EXCHANGES,
    Status,
    encode_client,
    encode_count,
    encode_ids,
    log,
    parse_args,
    split_words,
    stop_event_on_signals,
)
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402


def main() -> int:
    args = parse_args()
    stop = stop_event_on_signals()
    status = Status(args.status)
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": args.app_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 10,
        "queued.min.messages": 200_000,
    })
    producer = Producer({
        "bootstrap.servers": args.bootstrap,
        "partitioner": "murmur2_random",
        # Tansu's fetch slows down with the number of record batches in a partition: fewer,
        # larger batches keep the broker (and everyone's latency) steady
        "linger.ms": 20,
    })
    meta = consumer.list_topics(args.input, timeout=30)
    parts = sorted(meta.topics[args.input].partitions)
    consumer.assign([TopicPartition(args.input, p, 0) for p in parts])
    status.event("started")
    log(f"bare {args.workload}: reading {args.input} partitions {parts}")
    out = args.output
    produce = producer.produce
    if args.workload == "w1":
        counts: dict[str, int] = {}
        while not stop.is_set():
            msgs = consumer.consume(num_messages=10_000, timeout=0.005)
            if not msgs:
                continue
            changed = set()
            for m in msgs:
                if m.error():
                    continue
                for w in split_words(m.value().decode()):
                    counts[w] = counts.get(w, 0) + 1
                    changed.add(w)
            for w in changed:
                produce(out, key=w.encode(), value=encode_count(counts[w]))
            producer.poll(0)
    else:
        positions: dict[bytes, tuple[str, int] | None] = {}  # key -> (client, id) if US
        holders: dict[str, set[int]] = {}
        while not stop.is_set():
            msgs = consumer.consume(num_messages=10_000, timeout=0.005)
            if not msgs:
                continue
            changed = set()
            for m in msgs:
                if m.error():
                    continue
                key = m.key()
                raw = m.value()
                new = None
                if raw is not None:
                    p = json.loads(raw)
                    if p["exchange"] in US_EXCHANGES:
                        new = (p["client"], p["id"])
                old = positions.get(key)
                if old == new:
                    continue
                if old is not None:
                    ids = holders[old[0]]
                    ids.discard(old[1])
                    if not ids:
                        del holders[old[0]]
                    changed.add(old[0])
                if new is not None:
                    holders.setdefault(new[0], set()).add(new[1])
                    changed.add(new[0])
                    positions[key] = new
                else:
                    positions.pop(key, None)
            for c in changed:
                produce(out, key=encode_client(c), value=encode_ids(holders.get(c)))
            producer.poll(0)
    producer.flush(10)
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
