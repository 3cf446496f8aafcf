"""The measured streamtable process: one Nexmark query's topology on the Spark runtime, run
until it has caught up with the input topics (``StreamsApp.run_until_caught_up()``), then exit;
with ``--live`` (the latency mode), ``StreamsApp.start()`` until it is stopped (SIGTERM).

    python -m bench.nexmark.app --query q5 --output nexmark-q5-out --bootstrap 127.0.0.1:9092 \\
        --app-id nexmark-q5 --state-dir /tmp/s --status /tmp/s.jsonl --rate 10000

It appends status events to ``--status`` (``bench/contenders/common.py``): ``engine_ready``
(SparkSession up), ``started`` (the app made, about to start its query) and ``caught_up`` (with
the number of micro-batches).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time

from bench.contenders.common import Status, split_config
from bench.nexmark.generator import DEFAULT_RATE, Generator
from bench.nexmark.queries import QUERIES, Params


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.nexmark.app", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--query", required=True, choices=sorted(QUERIES))
    p.add_argument("--output", required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--app-id", required=True)
    p.add_argument("--state-dir", required=True)
    p.add_argument("--status", required=True)
    p.add_argument("--rate", type=int, default=DEFAULT_RATE,
                   help="the generator's events/s (bounds the auction-bid joins)")
    p.add_argument("--grace-ms", type=int, default=60_000)
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="extra StreamsApp settings (spark.* ones go to the Spark session)")
    p.add_argument("--input-counts", type=json.loads, default=None, metavar="JSON",
                   help="the records of each input topic: progress events for the runner")
    p.add_argument("--live", action="store_true",
                   help="run until stopped: the input arrives while it runs")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from streamtable.runtime.spark import StreamsApp
    from streamtable.runtime.spark.process.session import spark_session

    status = Status(args.status)
    config: dict[str, object] = {"bootstrap.servers": args.bootstrap,
                                 "application.id": args.app_id}
    settings, spark_conf = split_config(args.config)
    config.update(settings)
    params = Params.of(Generator(rate=args.rate), args.grace_ms)
    topology = QUERIES[args.query].topology(params, args.output)
    t0 = time.time()
    spark = spark_session(None, f"streamtable-{args.app_id}", conf=spark_conf)
    if args.input_counts:
        from bench.nexmark.contenders.spark_progress import InputProgress

        spark.streams.addListener(InputProgress(status, args.input_counts))
    status.event("engine_ready", seconds=time.time() - t0)
    app = StreamsApp(topology, config=config, state_dir=args.state_dir, spark=spark,
                     development_broker=True)
    if args.live:
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        app.start()
        status.event("started")
        while not stop.wait(0.5):
            if not app.is_running:
                logging.getLogger("bench.nexmark").error("%s: the query stopped", args.query)
                return 1
        app.stop()
        return 0
    status.event("started")
    app.run_until_caught_up()
    status.event("caught_up", batches=app.batches)
    logging.getLogger("bench.nexmark").info("%s: caught up after %d batches", args.query,
                                            app.batches)
    return 0


if __name__ == "__main__":
    sys.exit(main())
