"""Faust (faust-streaming 0.15.3, its own venv bench/.venvs/faust).

W1: an agent splits lines and sends every word to an internal repartition topic keyed by the
word; a second agent counts in a Table (changelog-backed, in-memory store) and sends the new
count to the output topic.
W2: table semantics by hand, as for Quix: an agent keyed by position id keeps (client, id) of
US positions in a Table and sends a retraction/addition keyed by client to an internal topic; a
second agent keeps each client's ids in a Table and sends the set (a tombstone when empty).

Settings for the Tansu broker (see RESULTS.md): broker_session_timeout=6 s, internal topics
declared with ``internal=True, partitions=N`` so Faust creates them itself, and a large
``stream_buffer_maxsize`` (with the default 4096, partitions paused by Faust's flow control
stopped being consumed: output stalled for minutes with input left).
"""

from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import (  # noqa: E402
    HEARTBEAT_INTERVAL_MS,
    SESSION_TIMEOUT_MS,
    US_EXCHANGES,
    Status,
    encode_client,
    encode_count,
    encode_ids,
    log,
    parse_args,
    split_words,
)


def extra(p):  # type: ignore[no-untyped-def]
    p.add_argument("--producer-max-batch-size", type=int, default=0,
                   help="0: Faust's default (the 64 'hack' makes every batch one record, which "
                        "Tansu's high watermark needs for table recovery after a restart only)")
    p.add_argument("--loglevel", default="WARNING")
    p.add_argument("--producer-linger", type=float, default=0.02,
                   help="seconds (Faust's default 0 makes tiny batches, which slow Tansu's "
                        "fetch down as a topic grows)")
    p.add_argument("--stream-buffer-maxsize", type=int, default=1_000_000,
                   help="Faust pauses a partition whose stream buffer is full; on this broker "
                        "paused partitions stalled for good with the default 4096")


def main() -> int:
    args = parse_args(extra=extra)
    status = Status(args.status)
    import faust

    settings = dict(
        broker=f"kafka://{args.bootstrap}",
        store="memory://",
        datadir=args.state_dir,
        topic_partitions=args.partitions,
        topic_replication_factor=1,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=SESSION_TIMEOUT_MS / 1000,
        broker_heartbeat_interval=HEARTBEAT_INTERVAL_MS / 1000,
        web_enabled=False,
        table_standby_replicas=0,
    )
    if args.producer_linger:
        settings["producer_linger"] = args.producer_linger
    if args.stream_buffer_maxsize:
        settings["stream_buffer_maxsize"] = args.stream_buffer_maxsize
    if args.producer_max_batch_size:
        settings["producer_max_batch_size"] = args.producer_max_batch_size
    app = faust.App(args.app_id, **settings)
    raw = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw",
           "value_serializer": "raw"}
    source = app.topic(args.input, **raw)
    out = app.topic(args.output, **raw)
    if args.workload == "w1":
        words = app.topic(f"{args.app_id}-words", internal=True, partitions=args.partitions,
                          **raw)
        counts = app.Table("counts", default=int, partitions=args.partitions,
                           key_type=str, value_type=int)

        @app.agent(source)
        async def split(stream):  # type: ignore[no-untyped-def]
            async for line in stream:
                for w in split_words(line.decode()):
                    await words.send(key=w.encode(), value=b"")

        @app.agent(words)
        async def count(stream):  # type: ignore[no-untyped-def]
            async for event in stream.events():
                w = event.key.decode()
                n = counts[w] + 1
                counts[w] = n
                await out.send(key=event.key, value=encode_count(n))
    else:
        changes = app.topic(f"{args.app_id}-changes", internal=True,
                            partitions=args.partitions, **raw)
        positions = app.Table("positions", default=None, partitions=args.partitions,
                              key_type=str)
        holders = app.Table("holders", default=None, partitions=args.partitions, key_type=str)

        @app.agent(source)
        async def diff(stream):  # type: ignore[no-untyped-def]
            async for event in stream.events():
                key = event.key.decode()
                raw_value = event.message.value
                new = None
                if raw_value is not None:
                    p = json.loads(raw_value)
                    if p["exchange"] in US_EXCHANGES:
                        new = [p["client"], p["id"]]
                old = positions.get(key)
                if old == new:
                    continue
                if new is None:
                    del positions[key]
                else:
                    positions[key] = new
                if old is not None:
                    await changes.send(key=old[0].encode(),
                                       value=json.dumps([old[1], -1]).encode())
                if new is not None:
                    await changes.send(key=new[0].encode(),
                                       value=json.dumps([new[1], 1]).encode())

        @app.agent(changes)
        async def apply(stream):  # type: ignore[no-untyped-def]
            async for event in stream.events():
                client = event.key.decode()
                pid, op = json.loads(event.value)
                ids = set(holders.get(client) or ())
                if op > 0:
                    ids.add(pid)
                else:
                    ids.discard(pid)
                if ids:
                    holders[client] = sorted(ids)
                elif client in holders:
                    del holders[client]
                await out.send(key=encode_client(client), value=encode_ids(ids))

    status.event("started")
    log(f"faust {args.workload}: starting worker")
    worker = faust.Worker(app, loglevel=args.loglevel, quiet=True)
    worker.execute_from_commandline()  # stops on SIGTERM
    return 0


if __name__ == "__main__":
    sys.exit(main())
