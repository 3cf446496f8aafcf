"""``python -m bench.nexmark``: Nexmark on every contender, each result checked.

    python -m bench.nexmark --events 100000 --queries q0,q5 --contenders streamtable
    python -m bench.nexmark --events 1000000 --out bench/nexmark/RESULTS.md

The events are generated once (seeded) into the input topics of a development broker; then,
per query and contender, a fresh process runs the query (``contenders/``) while the harness
samples the CPU time and memory of its process tree (``bench/harness.py``). After it has caught
up, the whole output topic is read and compared with the reference (``reference.py``,
``check.py``): a mismatch is FAILED, whatever its speed.

Measured per run: events/s (all N generated events over the time from the contender's
``started`` to its ``caught_up``, as Nexmark counts them, whichever topics the query reads),
events/s per core used (N over the CPU seconds the process tree used in that time), and the
peak RSS and PSS of the process tree.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import (
    BENCH,
    ROOT,
    TreeSampler,
    create_topics,
    delete_matching,
    launch,
)
from bench.nexmark import check, report
from bench.nexmark.contenders import Contender, Run, contenders
from bench.nexmark.events import (
    PARTITIONS,
    SIDE_INPUT_TOPIC,
    TOPIC_CONFIG,
    TOPICS,
    generate_into,
    output_topic,
)
from bench.nexmark.generator import DEFAULT_RATE, Generator
from bench.nexmark.latency import LATENCY_QUERIES
from bench.nexmark.queries import ORDER, QUERIES
from bench.nexmark.reference import EXPECTED, Events

log = logging.getLogger("bench.nexmark")

#: the grace period of every window and join of the streamtable queries (see README.md)
DEFAULT_GRACE_MS = 60_000


@dataclass
class Row:
    """One query on one contender: what was measured and what the check found."""

    query: str
    contender: str
    events: int = 0
    status: str = "OK"  # OK, FAILED, TIMEOUT, UNSUPPORTED
    reason: str = ""
    seconds: float | None = None
    rate: float | None = None
    cpu_seconds: float | None = None
    rate_per_core: float | None = None
    peak_rss_mb: float | None = None
    peak_pss_mb: float | None = None
    startup_s: float | None = None
    batches: int | None = None
    output_records: int = 0
    rss_by_process: dict[str, float] = field(default_factory=dict)
    cpu_by_process: dict[str, float] = field(default_factory=dict)
    cpu_by_jvm_thread: dict[str, float] = field(default_factory=dict)
    log: str = ""


def _wait(proc: Any, tree: TreeSampler, timeout: float) -> tuple[int | None, float | None]:
    """``(exit code or None after timeout, CPU seconds of the tree when it started)``."""
    deadline = time.time() + timeout
    cpu_at_start = None
    while time.time() < deadline:
        if cpu_at_start is None and "started" in proc.events():
            tree.sample()
            cpu_at_start = tree.cpu_seconds()
        rc: int | None = proc.proc.poll()
        if rc is not None:
            return rc, cpu_at_start
        if "caught_up" in proc.events():
            # a contender that stays up after catching up is stopped here
            return 0, cpu_at_start
        time.sleep(0.2)
    return None, cpu_at_start


def partial_rate(progress: dict[str, Any] | None, t_start: float, events: int,
                 timeout: float) -> tuple[float | None, float | None, str]:
    """``(seconds, events/s, reason)`` of a contender stopped at its timeout: the rate its last
    ``progress`` event shows (the share of its input it had read, of the run's ``events``).

    >>> partial_rate({"t": 110.0, "done": 250, "total": 1000}, 100.0, 1_000_000, 600)[:2]
    (10.0, 25000.0)
    >>> partial_rate(None, 100.0, 1_000_000, 600)
    (None, None, 'stopped at the 600 s timeout; it reported no progress')
    """
    if not progress or not progress.get("total") or progress["t"] <= t_start:
        return None, None, f"stopped at the {timeout:.0f} s timeout; it reported no progress"
    seconds = round(progress["t"] - t_start, 2)
    share = min(1.0, progress["done"] / progress["total"])
    return seconds, round(events * share / seconds, 1), (
        f"stopped at the {timeout:.0f} s timeout; {progress['done']:,} of "
        f"{progress['total']:,} input records read in {seconds:.0f} s: a partial rate")


def run_one(query: str, contender: Contender, args: argparse.Namespace, bootstrap: str,
            run_dir: Path, expected: Callable[[], Iterable[tuple[Any, Any]]],
            input_counts: dict[str, int]) -> Row:
    row = Row(query, contender.name, events=args.events)
    if not contender.supports(query):
        row.status, row.reason = "UNSUPPORTED", f"{contender.name} has no {query}"
        return row
    output = output_topic(query)
    run_id = f"{run_dir.name}-{contender.name}-{query}"
    delete_matching(bootstrap, [output])
    create_topics(bootstrap, {output: PARTITIONS}, TOPIC_CONFIG)  # results carry 2015 times
    status = run_dir / "status" / f"{run_id}.jsonl"
    log_path = run_dir / "logs" / f"{run_id}.log"
    row.log = str(log_path.relative_to(ROOT))
    run = Run(query=query, output=output, bootstrap=bootstrap, run_id=run_id,
              state_dir=run_dir / "state" / run_id, status=status, events=args.events,
              rate=args.rate, seed=args.seed, grace_ms=args.grace_ms,
              input_counts=input_counts, extra=tuple(args.config))
    cmd, env = contender.command(run)
    proc = launch(f"{contender.name}-{query}", cmd, log_path, status, env)
    tree = TreeSampler(proc.proc.pid)
    tree.start()
    log.info("%s on %s: running, log %s", query, contender.name, row.log)
    try:
        rc, cpu_at_start = _wait(proc, tree, args.timeout)
        tree.sample()
        cpu_at_end = tree.cpu_seconds()
    finally:
        tree.stop()
        tree.join(5)
        proc.stop()
    events = proc.events()
    started, done = events.get("started"), events.get("caught_up")
    t_start = started["t"] if started else proc.t_launch
    row.startup_s = round(t_start - proc.t_launch, 2)
    row.peak_rss_mb = round(tree.peak_rss / 2**20, 1)
    row.peak_pss_mb = round(tree.peak_pss / 2**20, 1)
    row.rss_by_process = {k: round(v / 2**20, 1) for k, v in
                          sorted(tree.peak_procs.items(), key=lambda kv: -kv[1])}
    row.cpu_by_process = tree.cpu_by_kind()
    row.cpu_by_jvm_thread = tree.cpu_by_jvm_thread()
    if rc is None:
        row.status = "TIMEOUT"
        row.seconds, row.rate, row.reason = partial_rate(proc.last_event("progress"), t_start,
                                                         args.events, args.timeout)
    elif rc != 0 or done is None:
        row.status, row.reason = "FAILED", f"exited with code {rc} before catching up"
    else:
        row.seconds = round(done["t"] - t_start, 2)
        row.rate = round(args.events / row.seconds, 1) if row.seconds > 0 else None
        row.batches = done.get("batches")
        if cpu_at_start is not None:
            row.cpu_seconds = round(cpu_at_end - cpu_at_start, 1)
            if row.cpu_seconds > 0:
                row.rate_per_core = round(args.events / row.cpu_seconds, 1)
    if row.status == "OK":
        t0 = time.time()
        diff, row.output_records = check.check_topic(bootstrap, output, QUERIES[query].kind,
                                                     expected, timeout=1800)
        log.info("%s on %s: output checked in %.1fs", query, contender.name, time.time() - t0)
        if diff is not None:
            row.status, row.reason = "FAILED", diff
    else:
        log.error("%s on %s: %s: %s; log tail:\n%s", query, contender.name, row.status,
                  row.reason, proc.log_tail(15))
    delete_matching(bootstrap, [run_id])
    if not args.keep_state:  # a 10,000,000-event query leaves gigabytes of it
        shutil.rmtree(run.state_dir, ignore_errors=True)
    log.info("%s on %s: %s", query, contender.name, report.one_line(row))
    return row


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.nexmark", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=1_000_000, help="events to generate")
    p.add_argument("--queries", default="all",
                   help=f"comma separated, from: {', '.join(ORDER)} (default: all)")
    p.add_argument("--contenders", default="streamtable",
                   help="comma separated (default: streamtable)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="append the results as a Markdown section to FILE")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--rate", type=int, default=DEFAULT_RATE,
                   help="events per second of event time (default: the spec's 10,000)")
    p.add_argument("--grace-ms", type=int, default=DEFAULT_GRACE_MS,
                   help="grace period of the windows and joins (streamtable)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds one query may run on one contender (default 600): one still "
                        "running then is stopped, and shown with the rate it had reached")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="extra settings for the streamtable app (experiments)")
    p.add_argument("--keep-state", action="store_true",
                   help="keep each run's state directory (bench/.data/<run>/state/...) after "
                        "its query; by default it is deleted once the query is checked")
    p.add_argument("--latency", action="store_true",
                   help="the latency mode instead of throughput (latency.py): the input paced "
                        "at --latency-rate while each contender runs; queries by default "
                        + ", ".join(LATENCY_QUERIES))
    p.add_argument("--latency-rate", type=int, default=10_000,
                   help="events per second of the latency mode (default 10,000)")
    p.add_argument("--latency-seconds", type=float, default=30.0,
                   help="how long the latency mode paces the input (default 30)")
    p.add_argument("--latency-warmup", type=float, default=10.0,
                   help="results completed this many seconds into the pacing are left out")
    args = p.parse_args(argv)
    if args.latency and args.queries == "all":
        args.queries = ",".join(LATENCY_QUERIES)
    args.query_list = ORDER if args.queries == "all" else [
        q.strip() for q in args.queries.split(",") if q.strip()]
    for q in args.query_list:
        if q not in QUERIES:
            p.error(f"unknown query {q!r} (choose from {', '.join(ORDER)})")
    known = contenders()
    args.contender_list = [c.strip() for c in args.contenders.split(",") if c.strip()]
    for c in args.contender_list:
        if c not in known:
            p.error(f"unknown contender {c!r} (choose from {', '.join(known)})")
    return args


def _write_results(run_dir: Path, out: str | None, name: str, text: str) -> None:
    """The run's Markdown section: ``name`` in its directory, and appended to ``out``."""
    (run_dir / name).write_text(text)
    if out:
        with open(out, "a", encoding="utf-8") as fh:
            fh.write("\n" + text)
        log.info("appended to %s", out)


def plot_targets(args: argparse.Namespace, run_dir: Path) -> list[Path]:
    """Where a run's plot goes: ``nexmark.png`` in the run's directory, and, for a run of every
    query with ``--out FILE``, ``FILE`` with the suffix ``.png``. A run of some queries (a
    rerun, a 10,000,000-event part) leaves the plot beside ``FILE`` as it is: it is the plot of
    a whole run.

    >>> args = parse_args(["--out", "RESULTS.md"])
    >>> [str(p) for p in plot_targets(args, Path("run"))]
    ['run/nexmark.png', 'RESULTS.png']
    >>> [str(p) for p in plot_targets(parse_args(["--out", "R.md", "--queries", "q1"]),
    ...                               Path("run"))]
    ['run/nexmark.png']
    """
    targets = [run_dir / "nexmark.png"]
    if args.out and args.queries == "all":  # (--latency names its queries: not all)
        targets.append(Path(args.out).with_suffix(".png"))
    return targets


def draw_plots(rows: list[Row], args: argparse.Namespace, run_dir: Path) -> None:
    """events/s per query and contender (``plot.py``) at :func:`plot_targets`. A plot that
    cannot be drawn (matplotlib missing: the ``bench`` extra) is a warning, not a failed run."""
    targets = plot_targets(args, run_dir)
    title = f"Nexmark, {args.events:,} events, {time.strftime('%Y-%m-%d %H:%M')}"
    try:
        from bench.nexmark import plot

        bars = plot.bars_from_rows(rows)
        for target in targets:
            log.info("plot: %s", plot.plot(bars, target, title))
    except Exception as exc:  # noqa: BLE001 - the results are written already
        log.warning("could not draw the plot of events/s (pip install -e '.[bench]'): %s", exc)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                        datefmt="%H:%M:%S")
    os.chdir(ROOT)
    run_dir = BENCH / ".data" / time.strftime("nexmark%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    command = "python -m bench.nexmark " + " ".join(shlex.quote(a) for a in argv)
    log.info("%s\n  data and logs in %s", command, run_dir.relative_to(ROOT))
    from bench.runner import _machine, warm_up
    from streamtable.kafka.broker import EmbeddedBroker

    if args.latency:
        return latency_main(args, command, run_dir)
    generator = Generator(args.seed, rate=args.rate)
    engines = contenders()
    rows: list[Row] = []
    broker = EmbeddedBroker(log_path=run_dir / "broker.log")
    broker.start()
    try:
        bootstrap = broker.bootstrap_servers
        loaded = generate_into(bootstrap, generator, args.events)
        counts = {TOPICS[k][0]: n for k, n in loaded["counts"].items() if k in TOPICS}
        counts[SIDE_INPUT_TOPIC] = loaded["counts"]["side-input"]
        log.info("warm-up (Spark JVM start, one read of a topic): %.1fs",
                 warm_up(bootstrap, SIDE_INPUT_TOPIC))
        for query in args.query_list:
            def expected(query: str = query) -> Iterable[tuple[Any, Any]]:
                return EXPECTED[query](Events(generator=generator, count=args.events))

            for name in args.contender_list:
                try:
                    rows.append(run_one(query, engines[name], args, bootstrap, run_dir,
                                        expected, counts))
                except Exception as exc:  # noqa: BLE001 - one run's failure is reported
                    log.exception("%s on %s: harness error", query, name)
                    rows.append(Row(query, name, events=args.events, status="FAILED",
                                    reason=f"harness error: {exc}"))
                (run_dir / "nexmark.json").write_text(
                    json.dumps([asdict(r) for r in rows], indent=2))
    finally:
        broker.stop()
    text = report.section(rows, command, _machine(), loaded,
                          {name: engines[name] for name in args.contender_list})
    _write_results(run_dir, args.out, "nexmark.md", text)
    draw_plots(rows, args, run_dir)
    log.info("results:\n%s", report.table(rows))
    return 0 if all(r.status in ("OK", "UNSUPPORTED") for r in rows) else 1


def latency_main(args: argparse.Namespace, command: str, run_dir: Path) -> int:
    """The latency mode (``--latency``, ``latency.py``): every query on every contender."""
    from bench.nexmark import latency
    from bench.runner import _machine
    from streamtable.kafka.broker import EmbeddedBroker

    engines = contenders()
    rows: list[latency.LatencyRow] = []
    broker = EmbeddedBroker(log_path=run_dir / "broker.log")
    broker.start()
    try:
        for query in args.query_list:
            for name in args.contender_list:
                try:
                    rows.append(latency.run_latency(query, engines[name], args,
                                                    broker.bootstrap_servers, run_dir))
                except Exception as exc:  # noqa: BLE001 - one run's failure is reported
                    log.exception("%s on %s: harness error", query, name)
                    rows.append(latency.LatencyRow(query, name, status="FAILED",
                                                   reason=f"harness error: {exc}"))
                (run_dir / "latency.json").write_text(
                    json.dumps([asdict(r) for r in rows], indent=2))
    finally:
        broker.stop()
    text = latency.section(rows, command, _machine(), args)
    _write_results(run_dir, args.out, "latency.md", text)
    log.info("results:\n%s", latency.table(rows))
    return 0 if all(r.status in ("OK", "UNSUPPORTED") for r in rows) else 1
