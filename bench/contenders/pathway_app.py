"""Pathway (pathway 0.33.0, its own venv bench/.venvs/pathway).

Both workloads read with ``pw.io.kafka.read`` (consumer group ``--app-id``, from the earliest
offset) and write with ``pw.io.kafka.write`` (format ``raw``: key and value columns as bytes).
Pathway tables are collections with retractions: a changed or deleted row of an aggregate
is a -1 of its old value and a +1 of the new one at the same logical time, written to Kafka in
no particular order (the writer marks them with a ``pathway_diff`` header, which the harness
does not read). So both outputs go through ``Table.to_stream()``: one upsert (or delete) row
per changed key per minibatch, the new value only, which is the "last value per key" format of
the other contenders.

W1: ``format="plaintext"`` lines -> split into words (a UDF) -> ``flatten`` -> ``groupby(word)``
``.reduce(count())`` -> ``to_stream()`` -> key = word, value = 8-byte count.
W2: ``format="raw"`` with metadata. The Kafka reader has no upsert mode (a record with a
repeated key is another row; a tombstone is a row whose data is None, and in the same minibatch
records of one key come in no particular order), so the table keyed by position id is built
in Pathway: ``groupby(key).reduce(max((offset, data)))`` keeps each key's newest record (one
key stays in one partition, so its offsets are ordered). Then: parse, filter US exchanges
(a UDF; deleted positions drop out of the table, which retracts them downstream),
``groupby(client).reduce(sorted_tuple(id))`` (Pathway's reducers retract: a position that
moves or leaves the US is subtracted from its old client), ``to_stream()`` -> key = the client
as a JSON string, value = JSON list of ids. A client whose last US position goes is written as
``[]``, not as a tombstone: Pathway's Kafka writer rejects a None payload
(``UnsupportedValueType``); the harness's checker reads an empty list as "no positions".

Settings: ``autocommit_duration_ms`` (how often the reader closes a minibatch; Pathway's default
1500 ms for throughput, 100 ms for latency via ``--autocommit-ms``), one engine thread
(``--threads``), consumer ``session.timeout.ms=6000`` (Tansu makes a group join wait
session.timeout.ms / 2), producer ``linger.ms=20`` and ``partitioner=murmur2_random`` (as the
other contenders; Tansu's fetch slows down with the number of batches), no persistence,
monitoring off. The reader runs in ``mode="streaming"`` (the default): ``"static"`` stops at
the partition's high watermark, which Tansu reports wrong for multi-record batches (a static read
of 8 records in 2 batches returned 2). Pathway stops gracefully on SIGTERM/SIGINT by itself.
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
    log,
    parse_args,
    split_words,
)


def extra(p):  # type: ignore[no-untyped-def]
    p.add_argument("--autocommit-ms", type=int, default=1500,
                   help="reader's autocommit_duration_ms: the longest a minibatch stays open "
                        "(Pathway's default 1500)")
    p.add_argument("--threads", type=int, default=1, help="Pathway engine threads")


def main() -> int:
    args = parse_args(extra=extra)
    status = Status(args.status)
    if args.threads > 1:
        os.environ["PATHWAY_THREADS"] = str(args.threads)
    import pathway as pw

    consumer = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.app_id,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": str(SESSION_TIMEOUT_MS),
        "heartbeat.interval.ms": str(HEARTBEAT_INTERVAL_MS),
    }
    producer = {
        "bootstrap.servers": args.bootstrap,
        "linger.ms": "20",
        "partitioner": "murmur2_random",
    }

    if args.workload == "w1":
        @pw.udf(deterministic=True)
        def words_of(line: str) -> list[str]:
            return split_words(line)

        @pw.udf(deterministic=True)
        def encode_n(n: int) -> bytes:
            return encode_count(n)

        @pw.udf(deterministic=True)
        def utf8(s: str) -> bytes:
            return s.encode()

        lines = pw.io.kafka.read(consumer, topic=args.input, format="plaintext",
                                 autocommit_duration_ms=args.autocommit_ms,
                                 autogenerate_key=True, name="lines")
        words = lines.select(word=words_of(pw.this.data)).flatten(pw.this.word)
        counts = words.groupby(pw.this.word).reduce(pw.this.word, n=pw.reducers.count())
        out = counts.select(k=utf8(pw.this.word), v=encode_n(pw.this.n)).to_stream()
    else:
        @pw.udf(deterministic=True)
        def us_position(data: bytes | None) -> tuple[str, int] | None:
            if data is None:
                return None
            p = json.loads(data)
            if p["exchange"] not in US_EXCHANGES:
                return None
            return p["client"], p["id"]

        @pw.udf(deterministic=True)
        def client_key(client: str) -> bytes:
            return encode_client(client)

        @pw.udf(deterministic=True)
        def ids_value(ids: tuple[int, ...]) -> bytes:
            return json.dumps(list(ids), separators=(",", ":")).encode()

        raw = pw.io.kafka.read(consumer, topic=args.input, format="raw", with_metadata=True,
                               autocommit_duration_ms=args.autocommit_ms, name="positions")
        records = raw.select(pw.this.key, last=pw.make_tuple(
            pw.this._metadata["offset"].as_int(), pw.this.data))
        # the table keyed by position id: the newest record of every key
        positions = records.groupby(pw.this.key).reduce(
            pw.this.key, last=pw.reducers.max(pw.this.last))
        us = positions.select(cp=us_position(pw.this.last[1])).filter(pw.this.cp.is_not_none())
        us = us.select(client=pw.unwrap(pw.this.cp)[0], pid=pw.unwrap(pw.this.cp)[1])
        holders = us.groupby(pw.this.client).reduce(
            pw.this.client, ids=pw.reducers.sorted_tuple(pw.this.pid))
        changes = holders.select(k=client_key(pw.this.client),
                                 v=ids_value(pw.this.ids)).to_stream()
        # a deleted client: "[]" (the Kafka writer cannot write a null payload)
        out = changes.select(pw.this.k, v=pw.if_else(pw.this.is_upsert, pw.this.v, b"[]"))
    pw.io.kafka.write(out, producer, args.output, format="raw", key=out.k, value=out.v,
                      name="output")

    status.event("started")
    log(f"pathway {args.workload}: running (autocommit {args.autocommit_ms} ms, "
        f"{args.threads} thread(s))")
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
