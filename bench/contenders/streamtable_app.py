"""streamtable on Spark: the project itself, run with the project's virtualenv.

W1 is the word-count topology of examples/word_count/app.py; W2 the share-holders topology
(table -> filter US -> group_by client -> reduce with adder/subtractor). Throughput mode runs
``StreamsApp.run_until_caught_up()`` (Trigger.AvailableNow in batches of
``max.records.per.batch``) and exits; latency mode runs ``start()`` until SIGTERM.
"""

from __future__ import annotations

import logging
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from common import (  # noqa: E402
    US_EXCHANGES,
    Status,
    log,
    parse_args,
    split_config,
    stop_event_on_signals,
)


def w2_topology(input_topic: str, output_topic: str):  # type: ignore[no-untyped-def]
    from streamtable import StreamsBuilder

    builder = StreamsBuilder()
    us_holders = (
        builder.table(input_topic)
        .filter(lambda key, p: p["exchange"] in US_EXCHANGES)
        .group_by(lambda key, p: (p["client"], frozenset([p["id"]])))
        .reduce(adder=lambda a, b: a | b,
                subtractor=lambda a, b: (a - b) or None,
                materialized="us-share-holders")
    )
    us_holders.to_stream().to(output_topic)
    return builder.build()


def extra(p):  # type: ignore[no-untyped-def]
    p.add_argument("--max-records-per-batch", type=int, default=None,
                   help="max.records.per.batch (default: streamtable's)")
    p.add_argument("--commit-interval-ms", type=int, default=None,
                   help="trigger interval in latency mode (default: streamtable's)")
    p.add_argument("--master", default=None)
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="extra StreamsApp settings")
    p.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark settings (experiments)")


def main() -> int:
    args = parse_args(extra=extra)
    stop = stop_event_on_signals()
    status = Status(args.status)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from streamtable import StreamsApp
    from streamtable.cli import load_app
    from streamtable.runtime.spark.process.session import spark_session

    config = {
        "bootstrap.servers": args.bootstrap,
        "application.id": args.app_id,
    }
    if args.max_records_per_batch is not None:
        config["max.records.per.batch"] = args.max_records_per_batch
    if args.workload == "w1":
        wc = load_app(os.path.join(ROOT, "examples", "word_count", "app.py"))
        topology = wc.build_topology(args.input, args.output)
        config = {**wc.config, **config}
        store = "counts-store"
    else:
        topology = w2_topology(args.input, args.output)
        store = "us-share-holders"
    settings, spark_conf = split_config(args.config)
    config.update(settings)
    if args.commit_interval_ms is not None:
        config["commit.interval.ms"] = args.commit_interval_ms
    t0 = time.time()
    spark_conf.update(kv.split("=", 1) for kv in args.spark_conf)
    spark = spark_session(args.master, f"streamtable-{args.app_id}", conf=spark_conf)
    status.event("engine_ready", seconds=time.time() - t0)
    app = StreamsApp(topology, config=config, state_dir=args.state_dir, spark=spark,
                     development_broker=True)
    status.event("started", store=store,
                 serving_db=str(app.app_dir / "serving.db"))
    if args.mode == "throughput":
        app.run_until_caught_up()
        status.event("caught_up", batches=app.batches)
        log(f"streamtable: caught up after {app.batches} batches")
        return 0
    app.start()
    while not stop.wait(0.5):
        if not app.is_running:
            log("streamtable: query stopped")
            return 1
    app.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
