"""Share-holders: streamtable's runtime vs the transformWithStateInPandas-by-task variant.

    .venv/bin/python -m bench.tws.run --variant streamtable --records 200000 --batch 100000
    .venv/bin/python -m bench.tws.run --variant tws --records 200000 --batch 100000
    .venv/bin/python -m bench.tws.run --variant replay          # exactly-once check (TWS)
    .venv/bin/python -m bench.tws.run --variant all             # the above, one JVM each

Needs protobuf for Spark's transformWithState (not a project dependency; kept out of the shared
virtualenv): ``.venv/bin/python -m pip install --target /tmp/tws-deps "protobuf>=6.33.5,<7"``.

Each measurement runs in its own process (fresh JVM and Python workers), local[2], P tasks per
stage. Batch 0 is a small warm-up batch; rows/s is over the other batches. Every run checks the
final ``us-share-holders`` (and ``positions-store``) against a plain-Python recomputation.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for path in (os.path.join(ROOT, "src"), ROOT):
    if path not in sys.path:
        sys.path.insert(0, path)

# transformWithState's Python side needs protobuf, which the project does not depend on:
# ``pip install --target /tmp/tws-deps "protobuf>=6.33.5,<7"`` (or set TWS_DEPS) keeps the shared
# virtualenv untouched; the Python workers inherit the driver's import path.
DEPS = os.environ.get("TWS_DEPS", "/tmp/tws-deps")
if os.path.isdir(DEPS) and DEPS not in sys.path:
    sys.path.insert(0, DEPS)

from bench.tws import workload as W  # noqa: E402

KIND_STORE = 2
KIND_EXTERNAL = 1


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------- setup


def dataset(args: argparse.Namespace) -> tuple[list[str], list[tuple[int, int]], Any, Any]:
    events, final = W.generate(args.records, args.seed)
    bounds = W.batch_bounds(args.records, args.batch, args.warmup)
    directory = os.path.join(args.workdir, f"data-n{args.records}-b{args.batch}"
                             f"-w{args.warmup}-p{args.partitions}-s{args.seed}")
    marker = os.path.join(directory, "_complete")
    if os.path.exists(marker):
        paths = sorted(os.path.join(directory, f) for f in os.listdir(directory)
                       if f.endswith(".parquet"))
    else:
        shutil.rmtree(directory, ignore_errors=True)
        paths = W.write_batches(events, bounds, args.partitions, directory)
        open(marker, "w").close()
    return paths, bounds, events, final


def spark_session(args: argparse.Namespace) -> Any:
    from streamtable.runtime.spark.process.session import spark_session as make

    conf = {
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        "spark.sql.shuffle.partitions": str(args.partitions),
        "spark.sql.execution.arrow.transformWithStateInPandas.maxRecordsPerBatch": "200000",
        # commit a changelog per batch instead of uploading a RocksDB checkpoint every batch
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled":
            "false" if args.no_changelog else "true",
    }
    if not args.arrow_byte_limit:
        # Spark 4.3's TWS input writer (BaseStreamingArrowWriter) measures the Arrow batch's size
        # after every row unless this is Int.MaxValue; with an array column (headers) that
        # measure walks the whole ListVector: quadratic in the rows of a task (~80% of the
        # executor's samples at 50k rows per task). Both variants run with the same setting.
        conf["spark.sql.execution.arrow.maxBytesPerBatch"] = str(2**31 - 1)
    jfr = os.environ.get("TWS_JFR")  # profile the JVM: a Flight Recorder file to write
    if jfr:
        conf["spark.driver.extraJavaOptions"] = (
            f"-XX:StartFlightRecording=filename={jfr},settings=profile,dumponexit=true")
    return make(f"local[{args.cores}]", "tws-bench", conf)


def _fresh(path: str) -> str:
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path, exist_ok=True)
    return path


def check(holders: dict[Any, Any], positions: dict[Any, Any] | None,
          final: dict[int, dict[str, Any]]) -> dict[str, Any]:
    expected = W.expected_holders(final)
    got = {k: frozenset(v) for k, v in holders.items()}
    result: dict[str, Any] = {
        "holders_ok": got == expected, "holders": len(got), "holders_expected": len(expected),
    }
    if got != expected:
        bad = [k for k in set(got) | set(expected) if got.get(k) != expected.get(k)]
        result["holders_wrong_keys"] = len(bad)
        result["holders_example"] = repr([(k, got.get(k), expected.get(k)) for k in bad[:3]])
    if positions is not None:
        result["positions_ok"] = positions == final
        result["positions"] = len(positions)
        # and the holders recomputed from the runtime's own positions table
        result["holders_match_own_positions"] = got == W.expected_holders(positions)
    return result


def _rates(batches: list[dict[str, Any]]) -> dict[str, Any]:
    measured = [b for b in batches if b["batch"] > 0]
    rows = sum(b["rows"] for b in measured)
    secs = sum(b["seconds"] for b in measured)
    return {"measured_rows": rows, "measured_seconds": round(secs, 3),
            "rows_per_s": round(rows / secs) if secs else None,
            "warmup_seconds": round(sum(b["seconds"] for b in batches if b["batch"] == 0), 3)}


def dump_jfr(spark: Any) -> None:
    """With TWS_JFR, write the Flight Recording before the JVM goes away."""
    path = os.environ.get("TWS_JFR")
    if path:
        pid = spark._jvm.java.lang.ProcessHandle.current().pid()
        subprocess.run(["jcmd", str(pid), "JFR.dump", f"filename={path}"], check=False,
                       stdout=subprocess.DEVNULL)


def stage_metrics(spark: Any) -> list[dict[str, Any]]:
    """Spark's per-stage task metrics from the local UI's REST API (loopback)."""
    import urllib.request

    url = spark.sparkContext.uiWebUrl
    if not url:
        return []
    app = spark.sparkContext.applicationId
    try:
        with urllib.request.urlopen(f"{url}/api/v1/applications/{app}/stages", timeout=10) as r:
            stages = json.load(r)
    except OSError:
        return []
    out = []
    for st in sorted(stages, key=lambda x: (x["stageId"], x["attemptId"])):
        if st.get("status") != "COMPLETE":
            continue
        def ts(x: str | None) -> float:
            return datetime.strptime(x, "%Y-%m-%dT%H:%M:%S.%f%Z").timestamp() if x else 0.0
        out.append({
            "stage": st["stageId"], "tasks": st["numTasks"],
            "name": st["name"][:60],
            "submitted": ts(st.get("submissionTime")),
            "wall_s": round(ts(st.get("completionTime")) - ts(st.get("submissionTime")), 3),
            "run_s": round(st["executorRunTime"] / 1000, 3),
            "cpu_s": round(st["executorCpuTime"] / 1e9, 3),
            "in_rows": st.get("inputRecords"), "shuffle_read_rows": st.get("shuffleReadRecords"),
            "shuffle_write_rows": st.get("shuffleWriteRecords"),
        })
    return out


# ------------------------------------------------------------------------------- streamtable


class MemoryOutput:
    def __init__(self) -> None:
        self.batches: dict[int, int] = {}

    def write(self, batch_id: int, records: list[dict[str, Any]]) -> None:
        self.batches[batch_id] = len(records)


def run_streamtable(args: argparse.Namespace) -> dict[str, Any]:
    from streamtable import StreamsApp

    paths, bounds, _events, final = dataset(args)
    spark = spark_session(args)
    state_dir = _fresh(os.path.join(args.workdir, "st-state"))
    app = StreamsApp(W.topology(), "bench", state_dir=state_dir, spark=spark,
                     output=MemoryOutput())
    app.prepare({W.TOPIC: args.partitions})
    batches = []
    if args.st_driver == "direct":
        for b, path in enumerate(paths):
            df = spark.read.schema(W.SOURCE_DDL).parquet(path)
            t0 = time.perf_counter()
            app.process_batch(df, b)
            dt = time.perf_counter() - t0
            batches.append({"batch": b, "rows": bounds[b][1] - bounds[b][0],
                            "seconds": round(dt, 3)})
            log(f"streamtable batch {b}: {batches[-1]['rows']} rows in {dt:.2f}s")
    else:  # the same file stream the TWS variant reads, foreachBatch(process_batch)
        q = (spark.readStream.schema(W.SOURCE_DDL).option("maxFilesPerTrigger", 1)
             .parquet(os.path.dirname(paths[0])).writeStream
             .option("checkpointLocation", os.path.join(state_dir, "query"))
             .foreachBatch(app.process_batch).trigger(availableNow=True).start())
        q.awaitTermination()
        batches = _progress_batches(q)
    holders = app.store("us-share-holders").to_dict()
    positions = app.store("positions-store").to_dict()
    result = {"variant": f"streamtable-{args.st_driver}", "batches": batches,
              **_rates(batches), **check(holders, positions, final),
              "spark_stages": stage_metrics(spark)}
    dump_jfr(spark)
    spark.stop()
    return result


# ------------------------------------------------------------------------------- TWS


class ServingSink:
    """foreachBatch: the store changes into a SqliteServingStore, once per batch id (as
    the Spark runtime's MicroBatches does)."""

    def __init__(self, path: str) -> None:
        from streamtable.serving.sqlite import SqliteServingStore

        self.serving = SqliteServingStore(path)
        self.seconds: dict[int, float] = {}
        self.rows: dict[int, int] = {}

    def __call__(self, df: Any, batch_id: int) -> None:
        t0 = time.perf_counter()
        table = df.toArrow()
        kinds = table.column("kind").to_pylist()
        topics = table.column("topic").to_pylist()
        keys = table.column("key").to_pylist()
        values = table.column("value").to_pylist()
        parts = table.column("partition").to_pylist()
        changes = [(topics[i], keys[i], values[i], parts[i])
                   for i, k in enumerate(kinds) if k == KIND_STORE]
        if any(k == KIND_EXTERNAL for k in kinds):
            raise RuntimeError("this workload has no output topic")
        self.serving.apply(batch_id, changes)
        self.seconds[batch_id] = time.perf_counter() - t0
        self.rows[batch_id] = len(kinds)


def _progress_batches(query: Any) -> list[dict[str, Any]]:
    out = []
    for p in query.recentProgress:
        d = json.loads(p.json)
        if not d.get("numInputRows"):
            continue
        ops = d.get("stateOperators") or []
        out.append({
            "batch": d["batchId"], "rows": d["numInputRows"],
            "seconds": d["batchDuration"] / 1000,
            "start": datetime.fromisoformat(d["timestamp"].replace("Z", "+00:00")).timestamp(),
            "durationMs": d.get("durationMs"),
            "state_ops": [{k: o.get(k) for k in ("operatorName", "numRowsTotal",
                                                  "numRowsUpdated", "allUpdatesTimeMs",
                                                  "commitTimeMs", "memoryUsedBytes")}
                          | {"custom": {k: v for k, v in (o.get("customMetrics") or {}).items()
                                        if v}}
                          for o in ops],
        })
    return out


def _profile(path: str, batches: list[dict[str, Any]]) -> dict[str, Any]:
    """Handler time by stage and part, over the measured batches."""
    if not os.path.exists(path):
        return {}
    lines = [json.loads(x) for x in open(path)]
    windows = [(b["start"], b["start"] + b["seconds"] + 1e-3) for b in batches if b["batch"] > 0]
    out: dict[str, Any] = {}
    parts = ("handler_s", "recv_s", "convert_in_s", "state_load_s", "process_s", "commit_s",
             "convert_out_s")
    for ln in lines:
        if not any(lo <= ln["start"] <= hi for lo, hi in windows):
            continue
        s = out.setdefault(f"stage{ln['stage']}", {p: 0.0 for p in parts} | {
            "calls": 0, "rows_in": 0, "rows_processed": 0, "cache": {}, "wrote": {},
            "blob_bytes": 0, "rebuild_bytes": 0})
        s["calls"] += 1
        for p in parts:
            s[p] += ln.get(p, 0.0)
        s["rows_in"] += ln.get("rows_in", 0)
        s["rows_processed"] += ln.get("rows_processed", 0)
        s["blob_bytes"] += ln.get("blob_bytes", 0)
        s["rebuild_bytes"] += ln.get("rebuild_bytes", 0)
        for k in ("cache", "wrote"):
            if k in ln:
                s[k][ln[k]] = s[k].get(ln[k], 0) + 1
    for s in out.values():
        for p in parts:
            s[p] = round(s[p], 3)
    return out


def run_tws_query(spark: Any, topology: Any, source_dir: str, work: str, args: argparse.Namespace,
                  check_token: bool = True, profile: bool = True,
                  sink: ServingSink | None = None) -> tuple[Any, ServingSink]:
    from bench.tws.runtime import build_query

    sink = sink or ServingSink(os.path.join(work, "serving.db"))
    q = build_query(spark, topology, "bench", source_dir, W.SOURCE_DDL,
                    {W.TOPIC: args.partitions}, os.path.join(work, "checkpoint"), sink,
                    profile_path=os.path.join(work, "profile.jsonl") if profile else None,
                    check_token=check_token)
    q.awaitTermination()
    if q.exception():
        raise RuntimeError(str(q.exception()))
    return q, sink


def run_tws(args: argparse.Namespace) -> dict[str, Any]:
    paths, _bounds, _events, final = dataset(args)
    spark = spark_session(args)
    work = _fresh(os.path.join(args.workdir, "tws-state"))
    t0 = time.perf_counter()
    q, sink = run_tws_query(spark, W.topology(), os.path.dirname(paths[0]), work, args)
    wall = time.perf_counter() - t0
    batches = _progress_batches(q)
    for b in batches:
        b["sink_s"] = round(sink.seconds.get(b["batch"], 0.0), 3)
        log(f"tws batch {b['batch']}: {b['rows']} rows in {b['seconds']:.2f}s "
            f"(sink {b['sink_s']:.2f}s)")
    holders = sink.serving.view("us-share-holders").to_dict()
    positions = sink.serving.view("positions-store").to_dict()
    result = {"variant": "tws", "batches": batches, "wall_seconds": round(wall, 2),
              **_rates(batches), **check(holders, positions, final),
              "profile": _profile(os.path.join(work, "profile.jsonl"), batches),
              "spark_stages": stage_metrics(spark)}
    dump_jfr(spark)
    spark.stop()
    return result


# ------------------------------------------------------------------------------- replay check


def read_spark_state(spark: Any, checkpoint: str) -> dict[tuple[int, int], dict[str, Any]]:
    """Each task's stores as rebuilt from Spark's state store alone (state data source)."""
    import pickle

    states: dict[tuple[int, int], dict[str, Any]] = {}
    for op in (0, 1):
        rows = (spark.read.format("statestore").option("path", checkpoint)
                .option("operatorId", op).option("stateVarName", "log")
                .option("flattenCollectionTypes", "false").load().collect())
        by_label: dict[Any, list[Any]] = {}
        for r in rows:
            d = r.asDict(recursive=True)
            by_label.setdefault(d["key"]["st_label"], []).extend(d["list_value"] or [])
        for label, entries in by_label.items():
            stores: dict[str, dict[Any, Any]] = {}
            for e in entries:
                snapshot, blob = e["snapshot"], e["blob"]
                body = pickle.loads(blob)
                if snapshot:
                    stores = {}
                for name, changes in body.items():
                    s = stores.setdefault(name, {})
                    for k, v in changes.items():
                        if v is None:
                            s.pop(k, None)
                        else:
                            s[k] = v
            states[(op, label)] = stores
    return states


def _replay_run(spark: Any, topology: Any, paths: list[str], work: str, args: argparse.Namespace,
                replay_batch: int | None, check_token: bool) -> dict[str, Any]:
    """Run all batches; with ``replay_batch``, stop after it, drop its commit-log entry (a crash
    after the state commit, before the batch commit) and restart: Spark runs it again."""
    work = _fresh(work)
    src = _fresh(os.path.join(work, "source"))
    cutoff = len(paths) if replay_batch is None else replay_batch + 1

    def feed(lo: int, hi: int) -> None:
        for b in range(lo, hi):
            dst = os.path.join(src, os.path.basename(paths[b]))
            shutil.copy(paths[b], dst)
            os.utime(dst, (1_700_000_000 + b, 1_700_000_000 + b))

    feed(0, cutoff)
    q, sink = run_tws_query(spark, topology, src, work, args, check_token, profile=True)
    replayed = None
    if replay_batch is not None:
        commit = os.path.join(work, "checkpoint", "commits", str(replay_batch))
        os.remove(commit)
        crc = os.path.join(work, "checkpoint", "commits", f".{replay_batch}.crc")
        if os.path.exists(crc):
            os.remove(crc)
        feed(cutoff, len(paths))
        q, sink = run_tws_query(spark, topology, src, work, args, check_token, profile=True,
                                sink=sink)
        done = [json.loads(p.json)["batchId"] for p in q.recentProgress
                if json.loads(p.json).get("numInputRows")]
        replayed = done[:1]
    lines = [json.loads(x) for x in open(os.path.join(work, "profile.jsonl"))]
    cache = {}
    for ln in lines:
        if "cache" in ln:
            cache[ln["cache"]] = cache.get(ln["cache"], 0) + 1
    state = read_spark_state(spark, os.path.join(work, "checkpoint"))
    return {"state": state, "serving": sink.serving, "replayed_first": replayed,
            "cache": cache}


def run_replay(args: argparse.Namespace) -> dict[str, Any]:
    """State after a replayed batch == state without the replay (share-holders topology and a
    non-idempotent count topology); and the control without the version-token check."""
    paths, _bounds, events, final = dataset(args)
    spark = spark_session(args)
    k = max(1, len(paths) // 2)
    out: dict[str, Any] = {"variant": "replay", "replay_batch": k, "batches": len(paths)}
    for name, topo, store in (("share_holders", W.topology(), "us-share-holders"),
                              ("count", W.count_topology(), "client-events")):
        base = _replay_run(spark, topo, paths, os.path.join(args.workdir, f"rp-{name}-base"),
                           args, None, True)
        rep = _replay_run(spark, topo, paths, os.path.join(args.workdir, f"rp-{name}-replay"),
                          args, k, True)
        ctl = _replay_run(spark, topo, paths, os.path.join(args.workdir, f"rp-{name}-control"),
                          args, k, False)
        if name == "share_holders":
            expected: Any = W.expected_holders(final)
            def got(r: dict[str, Any], store: str = store) -> Any:
                return {c: frozenset(v) for c, v in r["serving"].view(store).to_dict().items()}
        else:
            expected = W.expected_counts(events)

            def got(r: dict[str, Any], store: str = store) -> Any:
                return r["serving"].view(store).to_dict()
        out[name] = {
            "base_serving_ok": got(base) == expected,
            "replay_first_batch": rep["replayed_first"],
            "replay_cache": rep["cache"],
            "replay_state_equal": rep["state"] == base["state"],
            "replay_serving_ok": got(rep) == expected,
            "control_cache": ctl["cache"],
            "control_state_equal": ctl["state"] == base["state"],
            "control_serving_ok": got(ctl) == expected,
            "tasks_in_state": len(base["state"]),
        }
        log(f"replay {name}: {out[name]}")
    spark.stop()
    return out


# ------------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", choices=("streamtable", "tws", "replay", "all"), default="all")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--batches", default=None,
                    help="with --variant all: comma-separated batch sizes (default --batch)")
    ap.add_argument("--warmup", type=int, default=2_000, help="rows of warm-up batch 0")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--st-driver", choices=("direct", "stream"), default="direct",
                    help="streamtable: process_batch on static DataFrames, or foreachBatch over "
                         "the same file stream as the TWS variant")
    ap.add_argument("--arrow-byte-limit", action="store_true",
                    help="keep Spark's default spark.sql.execution.arrow.maxBytesPerBatch "
                         "(slow per-row size checks in the TWS input writer)")
    ap.add_argument("--no-changelog", action="store_true",
                    help="RocksDB state store without changelog checkpointing")
    ap.add_argument("--workdir", default="/tmp/tws-bench")
    ap.add_argument("--repeat", type=int, default=1, help="with --variant all: runs per size")
    ap.add_argument("--skip-replay", action="store_true")
    ap.add_argument("--replay-records", type=int, default=40_000)
    ap.add_argument("--replay-batch", type=int, default=8_000)
    ap.add_argument("--out", default=None, help="append the result (JSON line) here")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    if args.variant == "all":
        return run_all(args)
    log(f"{args.variant}: {args.records} records, batches of {args.batch} "
        f"(+{args.warmup} warm-up), local[{args.cores}], P={args.partitions}")
    fn = {"streamtable": run_streamtable, "tws": run_tws, "replay": run_replay}[args.variant]
    result = fn(args)
    result.update(records=args.records, batch=args.batch, warmup=args.warmup,
                  partitions=args.partitions, cores=args.cores,
                  arrow_byte_limit=args.arrow_byte_limit, changelog=not args.no_changelog,
                  load_avg=os.getloadavg())
    text = json.dumps(result, default=str)
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")
    return 0


def run_all(args: argparse.Namespace) -> int:
    sizes = [int(x) for x in (args.batches or str(args.batch)).split(",")]
    out = args.out or os.path.join(args.workdir, "results.jsonl")
    base = [sys.executable, "-m", "bench.tws.run", "--records", str(args.records),
            "--warmup", str(args.warmup), "--partitions", str(args.partitions),
            "--cores", str(args.cores), "--seed", str(args.seed), "--workdir", args.workdir,
            "--out", out]
    if args.arrow_byte_limit:
        base.append("--arrow-byte-limit")
    if args.no_changelog:
        base.append("--no-changelog")
    runs = []
    for size in sizes:
        for _ in range(args.repeat):  # interleaved: the machine's load drifts
            for variant in ("streamtable", "tws"):
                runs.append([*base, "--variant", variant, "--batch", str(size),
                             "--st-driver", args.st_driver])
    if not args.skip_replay:
        runs.append([*base, "--variant", "replay", "--records", str(args.replay_records),
                     "--batch", str(args.replay_batch)])
    for cmd in runs:
        log(" ".join(cmd[1:]))
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    print(summary(out))
    return 0


def summary(path: str) -> str:
    lines = []
    for ln in open(path):
        r = json.loads(ln)
        if r["variant"] == "replay":
            for name in ("share_holders", "count"):
                x = r[name]
                lines.append(f"replay {name}: state equal after replay={x['replay_state_equal']} "
                             f"(control without token check: {x['control_state_equal']})")
            continue
        lines.append(f"{r['variant']:<20} batch={r['batch']:>7} rows/s={r['rows_per_s']} "
                     f"batches_s={[b['seconds'] for b in r['batches'] if b['batch'] > 0]} "
                     f"correct={r['holders_ok'] and r.get('positions_ok', True)} "
                     f"load={[round(x, 1) for x in r.get('load_avg', [])]}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
