"""Bytewax (bytewax 0.21.1, its own venv bench/.venvs/bytewax), W1 only.

W1: Bytewax's Kafka connector (``bytewax.connectors.kafka.operators.input``: one partition of
the source per Kafka partition, assigned, read from the beginning, no consumer group, ``tail``
so it never looks for the end of a partition, which Tansu's high watermark gets wrong) ->
``flat_map`` split into words -> ``key_on`` the word (Bytewax routes every keyed item to the
worker owning its key) -> ``stateful_batch`` count: one logic per word adds up the batch of
occurrences it is handed and emits the new count once per batch (not once per occurrence) ->
``KafkaSinkMessage(word, 8-byte count)`` -> the Kafka sink (``operators.output``).

W2 is n/a: Bytewax has no table/changelog semantics (no retractions); see runner.py.

Settings: no recovery (Bytewax's default: state in memory only, like the bare loop), one worker
(``--workers``; 2 cores are shared with the broker and the harness), the source's poll batch
``--batch-size`` (Bytewax's default 1000). The sink flushes the producer after every batch it
writes (Bytewax's code), so each batch becomes one produce request per partition whatever
linger.ms is; the producer gets ``partitioner=murmur2_random`` like the other contenders.
SIGTERM/SIGINT raise KeyboardInterrupt, which stops Bytewax's run loop (as Ctrl-C does).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import (  # noqa: E402
    Status,
    encode_count,
    log,
    parse_args,
    split_words,
)


def extra(p):  # type: ignore[no-untyped-def]
    p.add_argument("--workers", type=int, default=1, help="Bytewax workers (threads)")
    p.add_argument("--batch-size", type=int, default=1000,
                   help="records per poll of a Kafka source partition (Bytewax's default 1000)")


def main() -> int:
    args = parse_args(extra=extra)
    status = Status(args.status)
    if args.workload != "w1":
        log("bytewax: only W1 (word count) is implemented; W2 needs retractions")
        return 2

    stopping = []

    def interrupt(*_: Any) -> None:
        # what Ctrl-C does: Bytewax's run loop sees the KeyboardInterrupt, stops its workers
        # (a worker thread panics on the way out) and raises BytewaxRuntimeError
        stopping.append(True)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)

    import bytewax.operators as op
    from bytewax._bytewax import cli_main
    from bytewax.connectors.kafka import KafkaSinkMessage
    from bytewax.connectors.kafka import operators as kop
    from bytewax.dataflow import Dataflow
    from bytewax.operators import StatefulBatchLogic
    from confluent_kafka import OFFSET_BEGINNING

    class Count(StatefulBatchLogic):  # type: ignore[misc,type-arg]
        def __init__(self, resume: int | None) -> None:
            self.n = resume or 0

        def on_batch(self, values: list[Any]) -> tuple[list[int], bool]:
            self.n += len(values)
            return [self.n], StatefulBatchLogic.RETAIN

        def snapshot(self) -> int:
            return self.n

    brokers = [args.bootstrap]
    flow = Dataflow(f"bench-{args.workload}")
    inp = kop.input("in", flow, brokers=brokers, topics=[args.input], tail=True,
                    starting_offset=OFFSET_BEGINNING, batch_size=args.batch_size)
    op.inspect("errors", inp.errs).then(op.raises, "crash-on-err")
    words = op.flat_map("split", inp.oks, lambda m: split_words(m.value.decode()))
    keyed = op.key_on("word", words, lambda w: w)
    counts = op.stateful_batch("count", keyed, Count)
    msgs = op.map("encode", counts,
                  lambda kv: KafkaSinkMessage(kv[0].encode(), encode_count(kv[1])))
    kop.output("out", msgs, brokers=brokers, topic=args.output,
               add_config={"partitioner": "murmur2_random"})

    status.event("started")
    log(f"bytewax {args.workload}: running ({args.workers} worker(s), batch {args.batch_size})")
    try:
        cli_main(flow, workers_per_process=args.workers)
    except (KeyboardInterrupt, Exception):
        if not stopping:
            raise
        log("bytewax: stopped by signal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
