"""Memory and latency under a burst: ``python -m bench.burst [--rate R] [--out bench/RESULTS.md]``.

streamtable runs W1, the main bench's word count (``--workload w1,w2`` adds W2, the
share-holders table), as a live application on the development broker — the latency mode of
``python -m bench``: ``StreamsApp.start()`` with commit.interval.ms 100 ms, in a process of its
own — while the harness paces its input on a schedule:

    warm-up   --warmup s at R         not measured
    steady    --steady s at R         the steady latency and memory
    burst     --burst s at 10 × R     (--burst-factor) above streamtable's throughput: a
                                      backlog builds, batches grow
    after     --recover s at R        the backlog drains, latency comes back

then waits up to ``--drain`` s for the last probes. Every ``--probe-every``-th record is a probe
whose effect is a new output key; its latency = the harness's first receive time of that key −
its send time (the machinery of the main bench's latency runs: ``bench/live.py``,
``bench/harness.py``). The default R is the main bench's latency rate, 10,000 records/s, which
streamtable keeps up with on 2 cores (batches of a few thousand records, each shorter than the
time their records took to come); 10 × R, 100,000 records/s, is more than it processes live on
the same 2 cores with the pacer and the broker beside it, so a backlog builds.

Reported per workload (definitions in ``bench/burst_report.py``): peak RSS and PSS of the
application's process tree and its Python workers' PSS in the steady period and during and
after the burst; probe latency p50/p99/max per period (steady, burst, after: by send time);
the recovery time (from the end of the burst until probe latency is back within
``--recovery-factor`` × the steady p99 for ``--recovery-window`` s in a row); the batches
(count, records per batch, records behind) from the application's progress log and the
batches its memory budget (``worker.memory.budget.bytes``) shrank; and the result — the output
topic and the queryable store against the expected counts (nothing lost, nothing doubled).

Files go to ``bench/.data/burst-<time>/``: the application's log, ``burst.json``,
``burst.md``, and per workload a per-second series (CSV) and a plot (PNG, when matplotlib is
installed: the ``bench`` extra). ``--out FILE`` appends the Markdown section to FILE and writes
the series and plots to ``burst/`` beside it.
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
from pathlib import Path
from typing import Any

from bench import burst_report, burst_series
from bench.burst_report import Phase
from bench.harness import (
    BENCH,
    ROOT,
    PacerResult,
    RateSchedule,
    create_topics,
    delete_matching,
    pace_in_subprocess,
    say,
)
from bench.live import LiveRun, probe_latencies
from bench.runner import CONTENDERS, PARTITIONS, check_store, contender_cmd
from bench.workloads import dataset

log = logging.getLogger("bench.burst")

PHASES = ("warm-up", "steady", "burst", "after")


def schedule_of(rate: float, factor: float, warmup: float, steady: float, burst: float,
                recover: float) -> RateSchedule:
    """The input's schedule: the phases of :data:`PHASES`, at ``rate`` but for the burst at
    ``factor`` × ``rate``.

    >>> s = schedule_of(100, 10, warmup=1, steady=2, burst=1, recover=3)
    >>> s.total_records, [s.first_index(k) for k in range(4)]
    (1600, [0, 100, 300, 1300])
    """
    return RateSchedule(((warmup, rate), (steady, rate), (burst, rate * factor),
                         (recover, rate)))


def phases_of(schedule: RateSchedule, pr: PacerResult) -> list[Phase]:
    """The phases as the pacer sent them: each from the send time of its first record (kept by
    the pacer) to the next one's, the last to the pacer's last send."""
    n = schedule.total_records
    firsts = [schedule.first_index(k) for k in range(len(PHASES))] + [n]
    starts = [pr.send_times.get(f, pr.started + schedule.time_of(f)) for f in firsts[:-1]]
    stops = [*starts[1:], pr.started + pr.seconds]
    return [Phase(name, schedule.phases[k][1], firsts[k], firsts[k + 1], starts[k], stops[k])
            for k, name in enumerate(PHASES)]


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    """The application settings the run used: the latency runs' trigger interval, the batch
    cap and the memory budget (streamtable's defaults unless ``--config`` changes them)."""
    from streamtable.config import DEFAULTS

    lat = CONTENDERS["streamtable"].latency_args
    overrides = dict(kv.split("=", 1) for kv in args.config)
    out: dict[str, Any] = {
        "commit.interval.ms": int(lat[lat.index("--commit-interval-ms") + 1]),
        "sample_interval": args.sample_interval,
        "overrides": [f"{k} {v}" for k, v in overrides.items()],
    }
    for key in ("max.records.per.batch", "worker.memory.budget.bytes"):
        out[key] = int(overrides.get(key, DEFAULTS[key]))
    return out


def run_workload(wl: str, bootstrap: str, run_dir: Path, args: argparse.Namespace,
                 out_dir: Path | None) -> dict[str, Any]:
    """One burst run of workload ``wl``: its figures (see :func:`burst_report.figures`), the
    result check, and where its series and plot were written."""
    schedule = schedule_of(args.rate, args.burst_factor, args.warmup, args.steady, args.burst,
                           args.recover)
    n = schedule.total_records
    t0 = time.time()
    ds = dataset(wl, n, args.seed, probe_every=args.probe_every)
    expected = dict(ds.expected)
    tag = f"{run_dir.name}-{wl}"
    in_topic, out_topic = f"{tag}-in", f"{tag}-out"
    create_topics(bootstrap, {in_topic: PARTITIONS, out_topic: PARTITIONS})
    say(f"{wl}: {n:,} records generated in {time.time() - t0:.1f}s; schedule "
        + ", ".join(f"{name} {sec:.0f}s at {rate:,.0f}/s"
                    for name, (sec, rate) in zip(PHASES, schedule.phases, strict=True)))
    status = run_dir / "status" / f"{tag}.jsonl"
    log_path = run_dir / "logs" / f"{tag}.log"
    cmd = contender_cmd(CONTENDERS["streamtable"], wl, "latency", bootstrap, in_topic, out_topic,
                        tag, run_dir, status, config=args.config, spark_conf=args.spark_conf)
    run: dict[str, Any] = {
        "workload": wl, "records": n, "log": str(log_path.relative_to(ROOT)),
        "schedule": {"rate": args.rate, "burst_rate": args.rate * args.burst_factor,
                     "probe_every": args.probe_every,
                     "phases": {name: {"seconds": sec, "rate": rate}
                                for name, (sec, rate) in zip(PHASES, schedule.phases,
                                                             strict=True)}}}
    live = LiveRun.launch("streamtable", cmd, wl, bootstrap, out_topic, log_path, status,
                          args.sample_interval)
    try:
        run["live_after_s"] = live.prime(in_topic, expected, args.start_timeout)
        probe_keys = dict(ds.probe_at)
        # the phases' first records' send times too: when each phase really began
        keep = set(probe_keys) | {schedule.first_index(k) for k in range(len(PHASES))}
        say(f"{wl}: live after {run['live_after_s']}s; pacing {n:,} records")
        pr = pace_in_subprocess(bootstrap, in_topic, ds.records, schedule, keep)
        say(f"{wl}: {pr.sent:,} sent in {pr.seconds:.1f}s (at most {pr.max_lag:.2f}s behind "
            f"the schedule); waiting up to {args.drain:.0f}s for the last probes")
        live.wait_for(list(probe_keys.values()), args.drain)
        ended = time.time()
        latency = probe_latencies(probe_keys, pr.send_times, live.watcher.probes)
        topic_check: str = "not checked: the application stopped"
        reread_ok: bool | None = None
        if live.proc.proc.poll() is None:
            topic_check, reread_ok = live.check_result(expected, timeout=args.check_timeout)
        exit_code = live.proc.proc.poll()
        started = live.proc.events().get("started") or {}
        store_check = "not checked: no store"
        if topic_check == "ok" and started.get("serving_db"):
            store_check = check_store(wl, started["serving_db"], started["store"], expected,
                                      timeout=30) or "ok"
        run["output_records"] = live.watcher.messages
    finally:
        live.stop()
    log_lines = log_path.read_text(errors="replace").splitlines()
    batches, limits = burst_report.parse_app_log(log_lines)
    processed = sum(b.records for b in batches if b.t > pr.started)
    if topic_check != "ok" and processed < pr.sent:
        # a wrong count then says the application is behind, not that it lost records
        topic_check = (f"not caught up: the application processed {processed:,} of the "
                       f"{pr.sent:,} records sent")
        store_check = "not checked: not caught up"
    if exit_code is not None:
        run["app_stopped"] = {"exit_code": exit_code,
                              "error": burst_report.last_error(log_lines)}
        say(f"{wl}: the application stopped (exit code {exit_code}): "
            f"{run['app_stopped']['error']}")
    phases = phases_of(schedule, pr)
    probes = {i: (pr.send_times[i], v) for i, v in latency.items()}
    batches = burst_report.with_waiting(batches, pr.send_times, pr.started)
    run.update(burst_report.figures(phases, probes, ended, batches, limits,
                                    live.sampler.timeline, args.recovery_factor,
                                    args.recovery_window))
    run.update(sent=pr.sent, pacer_max_lag_ms=round(pr.max_lag * 1000, 1),
               result={"topic": topic_check, "store": store_check, "reread_ok": reread_ok})
    rows = burst_series.per_second(pr.started, phases, list(probes.values()), batches,
                                   live.sampler.timeline, ended)
    csv_path = run_dir / f"burst-{wl}.csv"
    burst_series.write_csv(csv_path, rows)
    png = burst_series.plot(
        run_dir / f"burst-{wl}.png", pr.started, phases, list(probes.values()), batches,
        live.sampler.timeline,
        (run["recovery"]["threshold_ms"] or 0) / 1000 or None, run["recovery"]["at"],
        f"streamtable {wl.upper()}: {args.rate:,.0f} → {args.rate * args.burst_factor:,.0f} → "
        f"{args.rate:,.0f} records/s")
    if png is None:
        say("  matplotlib is not installed (the bench extra): no plot")
    for path, key in ((csv_path, "csv"), (png, "png")):
        if path is None:
            continue
        if out_dir is not None:
            target = out_dir / "burst" / f"{run_dir.name}-{wl}{path.suffix}"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            path = target
        run[key] = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    delete_matching(bootstrap, [tag])
    return run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.burst", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", default="w1", help="comma separated: w1,w2 (default w1)")
    p.add_argument("--rate", type=float, default=10_000.0,
                   help="R, the steady input rate in records/s (default 10,000)")
    p.add_argument("--burst-factor", type=float, default=10.0,
                   help="the burst's rate as a multiple of R (default 10)")
    p.add_argument("--warmup", type=float, default=10.0, help="seconds at R, not measured")
    p.add_argument("--steady", type=float, default=60.0, help="measured seconds at R")
    p.add_argument("--burst", type=float, default=60.0, help="seconds at the burst's rate")
    p.add_argument("--recover", type=float, default=120.0,
                   help="seconds at R after the burst")
    p.add_argument("--drain", type=float, default=60.0,
                   help="seconds to wait for the last probes after the input ends")
    p.add_argument("--check-timeout", type=float, default=120.0,
                   help="seconds to wait for the output topic to match the expected result")
    p.add_argument("--probe-every", type=int, default=20,
                   help="every Nth record is a probe (default 20, as the latency runs)")
    p.add_argument("--recovery-factor", type=float, default=1.5,
                   help="recovered: probe latency within this × the steady p99 ...")
    p.add_argument("--recovery-window", type=float, default=10.0,
                   help="... for every probe sent in this many seconds (default 10)")
    p.add_argument("--sample-interval", type=float, default=0.5,
                   help="seconds between memory samples of the process tree")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a StreamsApp setting (e.g. worker.memory.budget.bytes=268435456)")
    p.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting for the application (experiments)")
    p.add_argument("--start-timeout", type=float, default=240.0)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--out", default=None,
                   help="append the Markdown section to this file (e.g. bench/RESULTS.md)")
    args = p.parse_args(argv)
    args.workloads = [w.strip().lower() for w in args.workload.split(",") if w.strip()]
    for w in args.workloads:
        if w not in ("w1", "w2"):
            p.error(f"unknown workload {w!r}")
    for kv in args.config + args.spark_conf:
        if "=" not in kv:
            p.error(f"not KEY=VALUE: {kv!r}")
    if args.rate <= 0 or args.burst_factor <= 0:
        p.error("--rate and --burst-factor must be > 0")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    os.chdir(ROOT)
    run_dir = BENCH / ".data" / time.strftime("burst%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    command = "python -m bench.burst " + " ".join(shlex.quote(a) for a in argv)
    say(f"{command}\n  data and logs in {run_dir.relative_to(ROOT)}")
    from bench.runner import _machine
    from streamtable.kafka.broker import EmbeddedBroker

    load = {"start": list(os.getloadavg())}
    out = Path(args.out).resolve() if args.out else None
    runs: list[dict[str, Any]] = []
    failed = False
    broker = EmbeddedBroker(log_path=run_dir / "broker.log")
    broker.start()
    try:
        for wl in args.workloads:
            try:
                runs.append(run_workload(wl, broker.bootstrap_servers, run_dir, args,
                                         out.parent if out else None))
            except Exception:  # noqa: BLE001 - reported; the other workloads still run
                log.exception("%s: the burst run failed", wl)
                failed = True
            (run_dir / "burst.json").write_text(json.dumps(runs, indent=2, default=str))
    finally:
        broker.stop()
    load["end"] = list(os.getloadavg())
    if not runs:
        return 1
    text = burst_report.section(runs, command, _machine(), load, settings_of(args))
    (run_dir / "burst.md").write_text(text)
    if out is not None:
        with open(out, "a", encoding="utf-8") as fh:
            fh.write("\n" + text)
        say(f"appended to {args.out}")
    print(text)
    ok = all(r["result"]["topic"] == "ok" and r["result"]["store"] == "ok" for r in runs)
    return 0 if ok and not failed else 1


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                        datefmt="%H:%M:%S")
    raise SystemExit(main())
