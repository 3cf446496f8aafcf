"""Quix Streams (quixstreams 3.28.1, its own venv bench/.venvs/quix).

W1: split -> group_by(word) (a repartition topic) -> stateful count -> output topic.
W2: Quix has no KTable, so the table semantics are written by hand: a stateful step keyed by
position id keeps each position's (client, id) if it is a US position and emits a retraction
for the old client and an addition for the new one; group_by(client) (a repartition topic);
a stateful step per client keeps the set of ids and emits it (a tombstone when empty).

Settings: processing_guarantee (default at-least-once, Quix's default), RocksDB state with
changelog topics (Quix's defaults), session.timeout.ms=6000 (Tansu makes a group join wait
session.timeout.ms / 2; Quix's default 45 s would cost 22 s per join), producer linger.ms=20
(fewer, larger batches: Tansu's fetch slows down with the number of batches in a partition).
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import (  # noqa: E402
    HEARTBEAT_INTERVAL_MS,
    SESSION_TIMEOUT_MS,
    US_EXCHANGES,
    Status,
    encode_count,
    encode_ids,
    log,
    parse_args,
    split_words,
)

RETENTION = {"retention.ms": "604800000", "retention.bytes": "-1"}


def extra(p):  # type: ignore[no-untyped-def]
    p.add_argument("--guarantee", default="at-least-once",
                   choices=("at-least-once", "exactly-once"))
    p.add_argument("--linger-ms", type=int, default=20,
                   help="producer linger.ms (0: Quix's default); larger batches keep Tansu's "
                        "fetch fast")


def main() -> int:
    args = parse_args(extra=extra)
    status = Status(args.status)
    from quixstreams import Application
    from quixstreams.models import TopicConfig

    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.app_id,
        auto_offset_reset="earliest",
        state_dir=args.state_dir,
        processing_guarantee=args.guarantee,
        consumer_extra_config={"session.timeout.ms": SESSION_TIMEOUT_MS,
                               "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS},
        loglevel="WARNING",
        producer_extra_config={"linger.ms": args.linger_ms} if args.linger_ms else None,
    )
    # Topics the harness created carry retention.ms; Quix's own (repartition, changelog) get it
    # from the topic config below / its defaults.
    cfg = TopicConfig(num_partitions=args.partitions, replication_factor=1,
                      extra_config=dict(RETENTION))
    inp = app.topic(args.input, key_deserializer="bytes",
                    value_deserializer="bytes" if args.workload == "w1" else "json", config=cfg)
    out = app.topic(args.output, key_serializer="str" if args.workload == "w1" else "json",
                    value_serializer="bytes", config=cfg)
    sdf = app.dataframe(inp)
    if args.workload == "w1":
        sdf = sdf.apply(lambda line: split_words(line.decode()), expand=True)
        sdf = sdf.group_by(lambda word: word, name="word", key_serializer="str",
                           key_deserializer="str", value_serializer="str",
                           value_deserializer="str")

        def count(word, state):  # type: ignore[no-untyped-def]
            n = state.get("n", 0) + 1
            state.set("n", n)
            return encode_count(n)

        sdf = sdf.apply(count, stateful=True)
    else:
        def diff(value, state):  # type: ignore[no-untyped-def]
            old = state.get("p")
            new = None
            if value is not None and value["exchange"] in US_EXCHANGES:
                new = [value["client"], value["id"]]
            if old == new:
                return []
            if new is None:
                state.delete("p")
            else:
                state.set("p", new)
            changes = []
            if old is not None:
                changes.append({"client": old[0], "id": old[1], "op": -1})
            if new is not None:
                changes.append({"client": new[0], "id": new[1], "op": 1})
            return changes

        sdf = sdf.apply(diff, stateful=True, expand=True)
        sdf = sdf.group_by(lambda ch: ch["client"], name="client")

        def holders(change, state):  # type: ignore[no-untyped-def]
            ids = set(state.get("ids", ()))
            if change["op"] > 0:
                ids.add(change["id"])
            else:
                ids.discard(change["id"])
            if ids:
                state.set("ids", sorted(ids))
            else:
                state.delete("ids")
            return encode_ids(ids)

        sdf = sdf.apply(holders, stateful=True)
    sdf.to_topic(out)
    status.event("started")
    log(f"quix {args.workload}: running ({args.guarantee})")
    app.run()  # stops on SIGTERM
    return 0


if __name__ == "__main__":
    sys.exit(main())
