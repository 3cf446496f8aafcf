"""``python -m bench.operators``: run and check every operator family on the Spark runtime.

For each family (and each ``--records`` size) the input is generated (seeded) into topics of
2 partitions on one development broker, then a fresh process runs the family's topology with
``StreamsApp.run_until_caught_up()`` (``bench/operators/app.py``) while the harness samples the
memory of its process tree and watches the output topic. After it exits, the whole output
topic is read and compared with the expected result (see ``check.py``); a mismatch is FAILED,
whatever its speed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import (
    BENCH,
    ROOT,
    OutputWatcher,
    TreeSampler,
    create_topics,
    delete_matching,
    launch,
    load_topic,
    read_topic,
)
from bench.operators import check, report
from bench.operators.families import ALIASES, FAMILIES
from bench.operators.family import Family
from bench.operators.inputs import PARTITIONS, Input
from bench.state_scale import WorkerMemory

log = logging.getLogger("bench.operators")


@dataclass
class Row:
    """One family at one size: what was measured and what the check found."""

    family: str
    records: int = 0
    status: str = "OK"  # OK, FAILED, TIMEOUT
    reason: str = ""
    seconds: float | None = None
    rate: float | None = None
    batches: int | None = None
    startup_s: float | None = None
    first_output_s: float | None = None
    output_records: int = 0
    peak_rss_mb: float | None = None
    peak_pss_mb: float | None = None
    workers_pss_mb: float | None = None
    checked_against: str = ""
    input_stats: dict[str, Any] = field(default_factory=dict)
    rss_by_process: dict[str, float] = field(default_factory=dict)
    cpu_by_process: dict[str, float] = field(default_factory=dict)
    log: str = ""


def load(bootstrap: str, inp: Input, topics: dict[str, str]) -> float:
    """Produce every role's records to its topic, with their partitions and timestamps."""
    seconds = 0.0
    for role, records in inp.topics.items():
        seconds += load_topic(bootstrap, topics[role], [(r.key, r.value) for r in records],
                              PARTITIONS, timestamps=[r.timestamp for r in records],
                              placement=[r.partition for r in records])
    return seconds


def run_family(family: Family, n: int, bootstrap: str, run_dir: Path,
               args: argparse.Namespace) -> Row:
    tag = f"{run_dir.name}-{family.name}-{n}"
    t0 = time.time()
    inp = family.generate(n, args.seed)
    row = Row(family.name, records=inp.records, input_stats=dict(inp.stats))
    topics = {role: f"{tag}-{role}" for role in inp.topics}
    output = f"{tag}-out"
    create_topics(bootstrap, {**{t: PARTITIONS for t in topics.values()}, output: PARTITIONS})
    load_s = load(bootstrap, inp, topics)
    log.info("%s: %s input records (%s) generated and loaded in %.1fs", family.name,
             f"{inp.records:,}", inp.stats, time.time() - t0)
    status = run_dir / "status" / f"{tag}.jsonl"
    log_path = run_dir / "logs" / f"{tag}.log"
    row.log = str(log_path.relative_to(ROOT))
    cmd = [sys.executable, "-m", "bench.operators.app", "--family", family.name,
           "--topics", json.dumps(topics), "--output", output, "--bootstrap", bootstrap,
           "--app-id", tag, "--state-dir", str(run_dir / "state"), "--status", str(status)]
    for kv in args.config:
        cmd += ["--config", kv]
    profile = run_dir / "profiles" / f"{tag}.txt" if args.profile else None
    if profile is not None:
        from bench import envs

        profile.parent.mkdir(parents=True, exist_ok=True)
        cmd = [str(envs.tool("tools", "py-spy")), "record", "--subprocesses", "--rate", "100",
               *(["--idle"] if args.profile == "idle" else []),
               "--format", "raw", "-o", str(profile), "--", *cmd]
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    watcher = OutputWatcher(bootstrap, output, family.name, check=None)
    watcher.start()
    proc = launch(family.name, cmd, log_path, status, env)
    tree = TreeSampler(proc.proc.pid)
    workers = WorkerMemory(proc.proc.pid)
    tree.start()
    workers.start()
    log.info("%s: running (load %.1fs), log %s", family.name, load_s, row.log)
    try:
        rc = _wait(proc, args.timeout, profile is not None)
    finally:
        tree.stop()
        workers.halt.set()
        tree.join(5)
        workers.join(5)
        tree.sample()
        proc.stop()
        watcher.stop()
        watcher.join(5)
    events = proc.events()
    started, done = events.get("started"), events.get("caught_up")
    t_start = started["t"] if started else proc.t_launch
    row.startup_s = round(t_start - proc.t_launch, 2)
    if watcher.t_first is not None:
        row.first_output_s = round(watcher.t_first - t_start, 2)
    row.peak_rss_mb = round(tree.peak_rss / 2**20, 1)
    row.peak_pss_mb = round(tree.peak_pss / 2**20, 1)
    row.workers_pss_mb = round(workers.peak / 2**20, 1)
    row.rss_by_process = {k: round(v / 2**20, 1) for k, v in
                          sorted(tree.peak_procs.items(), key=lambda kv: -kv[1])}
    row.cpu_by_process = tree.cpu_by_kind()
    if rc is None:
        row.status, row.reason = "TIMEOUT", f"not caught up after {args.timeout:.0f}s"
    elif done is None or (rc != 0 and profile is None):  # py-spy's own code when stopped
        row.status, row.reason = "FAILED", f"the application exited with code {rc}"
    else:
        row.seconds = round(done["t"] - t_start, 2)
        row.rate = round(inp.records / row.seconds, 1) if row.seconds > 0 else None
        row.batches = done.get("batches")
    if row.status == "OK":
        _check(family, inp, topics, output, bootstrap, row, args.check)
    else:
        log.error("%s: %s: %s; log tail:\n%s", family.name, row.status, row.reason,
                  proc.log_tail(15))
    delete_matching(bootstrap, [tag])
    log.info("%s: %s", family.name, report.one_line(row))
    if profile is not None:
        from bench.profile import summarize

        log.info("%s: where the time went (py-spy, %s):\n%s", family.name,
                 profile.relative_to(ROOT), summarize(profile) or "no samples")
    return row


def _wait(proc: Any, timeout: float, profiled: bool = False) -> int | None:
    """The process's exit code, or None if it was still running after ``timeout`` s.
    ``profiled``: the process is py-spy, which waits for every process it samples; a Python
    worker Spark left behind can keep it waiting, so a minute after the application caught up
    py-spy is told to stop (SIGINT: it writes its profile)."""
    deadline = time.time() + timeout
    interrupt_at: float | None = None
    while time.time() < deadline:
        rc: int | None = proc.proc.poll()
        if rc is not None:
            return rc
        if profiled and interrupt_at is None and "caught_up" in proc.events():
            interrupt_at = time.time() + 60
        if interrupt_at is not None and time.time() > interrupt_at:
            proc.proc.send_signal(signal.SIGINT)
            interrupt_at = deadline
        time.sleep(0.2)
    return None


def _check(family: Family, inp: Input, topics: dict[str, str], output: str, bootstrap: str,
           row: Row, how: str) -> None:
    """Read the whole output topic and compare it with the expected result(s)."""
    raw = [(m.key(), m.value()) for m in read_topic(bootstrap, output, timeout=600)]
    row.output_records = len(raw)
    if how == "none":
        row.checked_against = "not checked"
        return
    actual = family.result(raw)
    ways = {"auto": ["driver", "reference"] if inp.records <= check.DRIVER_LIMIT
            else ["reference"], "both": ["driver", "reference"]}.get(how, [how])
    problems = []
    for way in ways:
        _, want = check.expected(family, inp, way, topics, output)
        diff = check.verdict(want, actual)
        if diff is not None:
            problems.append(f"differs from the {way}: {diff}")
    row.checked_against = " + ".join(ways)
    if problems:
        row.status, row.reason = "FAILED", "; ".join(problems)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.operators", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", default="1000000",
                   help="input records per family; several sizes comma separated "
                        "(1000000,10000000 also checks the scaling target)")
    p.add_argument("--family", default="all",
                   help=f"comma separated, from: {', '.join(FAMILIES)} (default: all)")
    p.add_argument("--check", default="auto",
                   choices=("auto", "driver", "reference", "both", "none"),
                   help="what the output is compared with: the test driver in batch mode, "
                        "the plain-Python reference, both, or nothing (auto: both up to "
                        f"{check.DRIVER_LIMIT:,} input records, the reference above)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="append the results as a Markdown section to FILE "
                        "(e.g. bench/RESULTS.md)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--timeout", type=float, default=3600.0,
                   help="seconds one family may run")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="extra StreamsApp settings for every family (experiments)")
    p.add_argument("--profile", nargs="?", const="cpu", choices=("cpu", "idle"), default=None,
                   help="run each family under py-spy (sampling every process of its tree; "
                        "slower) and log where the time went; --profile idle also samples "
                        "threads while they wait (where the wall time goes)")
    args = p.parse_args(argv)
    try:
        args.sizes = [int(s) for s in args.records.split(",") if s.strip()]
    except ValueError:
        p.error(f"--records: whole numbers, comma separated, not {args.records!r}")
    names = list(FAMILIES) if args.family == "all" else [
        ALIASES.get(s.strip(), s.strip()) for s in args.family.split(",") if s.strip()]
    for name in names:
        if name not in FAMILIES:
            p.error(f"unknown family {name!r} (choose from {', '.join(FAMILIES)})")
    args.families = names
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                        datefmt="%H:%M:%S")
    os.chdir(ROOT)
    run_dir = BENCH / ".data" / time.strftime("ops%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    command = "python -m bench.operators " + " ".join(shlex.quote(a) for a in argv)
    log.info("%s\n  data and logs in %s", command, run_dir.relative_to(ROOT))
    from bench.runner import _machine, warm_up
    from streamtable.kafka.broker import EmbeddedBroker

    rows: list[Row] = []
    broker = EmbeddedBroker(log_path=run_dir / "broker.log")
    broker.start()
    try:
        bootstrap = broker.bootstrap_servers
        warm = f"{run_dir.name}-warm-up"
        create_topics(bootstrap, {warm: PARTITIONS})
        load_topic(bootstrap, warm, [(None, b"warm up")] * 1000, PARTITIONS)
        log.info("warm-up (Spark JVM start, one read of a topic): %.1fs",
                 warm_up(bootstrap, warm))
        delete_matching(bootstrap, [warm])
        for n in args.sizes:
            for name in args.families:
                try:
                    rows.append(run_family(FAMILIES[name], n, bootstrap, run_dir, args))
                except Exception as exc:  # noqa: BLE001 - one family's failure is reported
                    log.exception("%s: harness error", name)
                    rows.append(Row(name, records=n, status="FAILED",
                                    reason=f"harness error: {exc}"))
                (run_dir / "operators.json").write_text(
                    json.dumps([asdict(r) for r in rows], indent=2))
    finally:
        broker.stop()
    text = report.section(rows, command, _machine(), args.sizes)
    (run_dir / "operators.md").write_text(text)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as fh:
            fh.write("\n" + text)
        log.info("appended to %s", args.out)
    log.info("results:\n%s", report.table(rows))
    return 0 if all(r.status == "OK" for r in rows) else 1
