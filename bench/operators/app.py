"""The measured process: one family's topology on the Spark runtime, run until it has caught up
with its input topics (``StreamsApp.run_until_caught_up()``: Trigger.AvailableNow in batches
of ``max.records.per.batch``), then exit.

    python -m bench.operators.app --family tumbling --topics '{"in": "t-in"}' --output t-out \\
        --bootstrap 127.0.0.1:9092 --app-id ops-tumbling --state-dir /tmp/s --status /tmp/s.jsonl

It appends the main benchmark's status events to ``--status`` (``bench/contenders/common.py``):
``engine_ready`` (SparkSession up), ``started`` (the app made, about to start its query) and
``caught_up`` (with the number of micro-batches).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from bench.contenders.common import Status, split_config
from bench.operators.families import FAMILIES


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.operators.app", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--family", required=True, choices=sorted(FAMILIES))
    p.add_argument("--topics", required=True, help="JSON: input topic per role")
    p.add_argument("--output", required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--app-id", required=True)
    p.add_argument("--state-dir", required=True)
    p.add_argument("--status", required=True)
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="extra StreamsApp settings")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from streamtable.runtime.spark import StreamsApp
    from streamtable.runtime.spark.process.session import spark_session

    family = FAMILIES[args.family]
    status = Status(args.status)
    config = {**family.settings, "bootstrap.servers": args.bootstrap,
              "application.id": args.app_id}
    settings, spark_conf = split_config(args.config)
    config.update(settings)
    topology = family.topology(json.loads(args.topics), args.output)
    t0 = time.time()
    spark = spark_session(None, f"streamtable-{args.app_id}", conf=spark_conf)
    status.event("engine_ready", seconds=time.time() - t0)
    app = StreamsApp(topology, config=config, state_dir=args.state_dir, spark=spark,
                     development_broker=True)
    status.event("started")
    app.run_until_caught_up()
    status.event("caught_up", batches=app.batches)
    logging.getLogger("bench.operators").info("%s: caught up after %d batches", args.family,
                                              app.batches)
    return 0


if __name__ == "__main__":
    sys.exit(main())
