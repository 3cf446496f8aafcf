"""Table state at scale: Python-worker memory with 1,000,000 keys of state, and the time to
restart the application on that state and process the next batch.

    python -m bench.state_scale --keys 1000000 --store rocksDB,in_memory

For each kind of working copy (``default.dsl.store``) it loads ``--keys`` records with distinct
keys into a topic of the development broker, runs an application whose table
(``stream.group_by_key().reduce(latest)``) holds one entry per key until it has read them all,
sampling the memory (PSS) of Spark's Python workers; then it produces ``--more`` records and
starts the application again in a new process on the same state, timing from the start of
that process to the end of the batch that processes them. The same with ``--baseline-keys``
keys tells what the workers take without state, so the state's share can be read off. Results
go to stdout as JSON and, with ``--results``, as a Markdown section appended to that file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness import _kind, _pss_bytes, is_python_worker, load_topic, process_tree, say

ROOT = Path(__file__).resolve().parents[1]


def _topology(topic: str) -> Any:
    from streamtable import StreamsBuilder

    builder = StreamsBuilder()
    builder.stream(topic).group_by_key().reduce(lambda old, new: new, materialized="latest")
    return builder.build()


def run_app(args: argparse.Namespace) -> None:
    """The application process: run until caught up on ``args.topic``; print timings."""
    t0 = time.monotonic()
    import logging

    from streamtable import StreamsApp

    logging.basicConfig(level=logging.WARNING)
    config = {"default.dsl.store": args.store, "max.records.per.batch": args.batch,
              "commit.interval.ms": 0}
    app = StreamsApp(_topology(args.topic), f"state-scale-{args.store.lower()}",
                     args.bootstrap, state_dir=args.state_dir, config=config,
                     development_broker=True)
    app.spark  # noqa: B018 - start Spark now, to time it apart
    spark_ready = time.monotonic() - t0
    app.run_until_caught_up()
    print(json.dumps({"spark_s": round(spark_ready, 2),
                      "total_s": round(time.monotonic() - t0, 2),
                      "batches": app.batches,
                      "last_batch_s": round(app.last_batch_seconds, 2)}), flush=True)
    app.spark.stop()


class WorkerMemory(threading.Thread):
    """Peak PSS of the Python workers (``pyspark.daemon`` and its forks) under a process."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.peak = 0
        self.processes = 0  # Python worker processes at the peak
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            pids = [p for p in process_tree(self.root) if is_python_worker(_kind(p))]
            total = sum(_pss_bytes(p) for p in pids)
            if total > self.peak:
                self.peak, self.processes = total, len(pids)
            self.halt.wait(0.25)


def _launch(args: argparse.Namespace, store: str, topic: str,
            state_dir: str) -> tuple[dict[str, Any], WorkerMemory, float]:
    cmd = [sys.executable, "-m", "bench.state_scale", "app", "--topic", topic,
           "--store", store, "--bootstrap", args.bootstrap, "--state-dir", state_dir,
           "--batch", str(args.batch)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
               STREAMTABLE_SPARK_LOG_LEVEL="ERROR")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    sampler = WorkerMemory(proc.pid)
    sampler.start()
    out, _ = proc.communicate()
    wall = time.monotonic() - t0
    sampler.halt.set()
    if proc.returncode:
        raise RuntimeError(f"the application failed ({proc.returncode})")
    return json.loads(out.strip().splitlines()[-1]), sampler, wall


def _state_and_restart(args: argparse.Namespace, store: str, keys: int,
                       state_dir: str) -> dict[str, Any]:
    """Build ``keys`` keys of state, then restart on it with new records; the figures."""
    from streamtable.kafka.admin import ensure_topics

    topic = f"state-scale-{store.lower()}-{keys}"
    ensure_topics(args.bootstrap, {topic: 2})
    records = [(json.dumps(f"key-{i:07d}").encode(),
                json.dumps({"n": i, "v": "x" * 16}).encode()) for i in range(keys)]
    say(f"{store}: loading {keys:,} records with distinct keys")
    load_topic(args.bootstrap, topic, records)
    del records
    say(f"{store}: first run, building {keys:,} keys of state")
    first, first_mem, first_wall = _launch(args, store, topic, state_dir)
    more = [(json.dumps(f"key-{i:07d}").encode(), json.dumps({"n": -i}).encode())
            for i in range(0, keys, max(1, keys // args.more))]
    load_topic(args.bootstrap, topic, more)
    say(f"{store}: restart on that state, {len(more):,} new records")
    second, second_mem, second_wall = _launch(args, store, topic, state_dir)
    return {"store": store, "keys": keys, "fill_s": round(first_wall, 1),
            "fill_worker_pss_mb": round(first_mem.peak / 2**20),
            "restart_to_batch_done_s": second["total_s"],
            "restart_spark_s": second["spark_s"],
            "restart_batch_s": second["last_batch_s"],
            "restart_worker_pss_mb": round(second_mem.peak / 2**20),
            "restart_worker_processes": second_mem.processes}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.state_scale", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command")
    app = sub.add_parser("app")
    app.add_argument("--topic")
    app.add_argument("--store")
    app.add_argument("--bootstrap")
    app.add_argument("--state-dir")
    app.add_argument("--batch", type=int)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--more", type=int, default=1_000)
    p.add_argument("--baseline-keys", type=int, default=1_000)
    p.add_argument("--store", default="rocksDB,in_memory")
    p.add_argument("--batch", type=int, default=500_000, help="max.records.per.batch")
    p.add_argument("--results", default=None, help="append a Markdown section to this file")
    args = p.parse_args(argv)
    if args.command == "app":
        run_app(args)
        return 0

    from streamtable.kafka.broker import EmbeddedBroker

    rows: list[dict[str, Any]] = []
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        args.bootstrap = broker.bootstrap_servers
        for store in args.store.split(","):
            row = _state_and_restart(args, store, args.keys, os.path.join(tmp, store))
            # the same with almost no state: what the Python workers take anyway
            base = _state_and_restart(args, store, args.baseline_keys,
                                      os.path.join(tmp, f"{store}-base"))
            row["baseline_keys"] = args.baseline_keys
            row["baseline_restart_worker_pss_mb"] = base["restart_worker_pss_mb"]
            row["state_worker_pss_mb"] = (row["restart_worker_pss_mb"]
                                          - base["restart_worker_pss_mb"])
            row["baseline_restart_s"] = base["restart_to_batch_done_s"]
            say(json.dumps(row))
            rows.append(row)
    print(json.dumps(rows, indent=2))
    if args.results:
        _append(Path(args.results), rows, argv if argv is not None else sys.argv[1:])
    return 0


def _append(path: Path, rows: list[dict[str, Any]], argv: list[str]) -> None:
    lines = [
        "", f"## Table state at scale ({time.strftime('%Y-%m-%d')})", "",
        f"`python -m bench.state_scale {' '.join(argv)}` — one run, local[2], development "
        "broker. Python-worker memory is the peak PSS of Spark's Python workers while the "
        "application builds the state; restart is from the start of a new application process "
        "on that state to the end of the batch with the new records (Spark start included).", "",
        "| working copy | keys | build (s) | worker PSS building (MB) | restart to batch done "
        "(s) | of which Spark start (s) | batch (s) | worker PSS after restart (MB) | the same "
        "with 1,000 keys (MB) | state's share (MB) | restart with 1,000 keys (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['store']} | {r['keys']:,} | {r['fill_s']} | "
                     f"{r['fill_worker_pss_mb']:,} | {r['restart_to_batch_done_s']} | "
                     f"{r['restart_spark_s']} | {r['restart_batch_s']} | "
                     f"{r['restart_worker_pss_mb']:,} ({r['restart_worker_processes']} "
                     f"processes) | {r['baseline_restart_worker_pss_mb']:,} | "
                     f"{r['state_worker_pss_mb']:,} | {r['baseline_restart_s']} |")
    with open(path, "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
