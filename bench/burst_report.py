"""The figures of a burst run (``python -m bench.burst``) from what it recorded — the probes'
send and receive times, the memory samples, the application's log — and their Markdown
section (the per-second series and the plot: ``burst_series.py``).

Everything here is a pure function of recorded data (no broker, no Spark), so that the
definitions can be tested on synthetic data:

* **latency** of a probe = first receive time of its output key − its send time; a probe not
  seen when the run ends counts with the time waited, a lower bound (``≥`` in the report).
* **recovery time** — see :func:`recovery_seconds`.
* **backlog drained** — see :func:`drained_seconds`.
* **batches** — the application's progress log lines (``streamtable.progress``: one per
  micro-batch, with its records and seconds) and its memory budget's lines (``the next batch
  takes at most N``), see :func:`parse_app_log`; the records **waiting** at each batch's end
  (sent, not yet processed: the backlog), see :func:`with_waiting`.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bench.harness import TreeSample, percentile

MB = 2**20


# ---------------------------------------------------------------------------------- phases


@dataclass(frozen=True)
class Phase:
    """One phase of the paced input: its records ``[first, end)`` and its wall-clock span
    ``[start, stop)`` (epoch s, as sent)."""

    name: str
    rate: float
    first: int
    end: int
    start: float
    stop: float

    @property
    def achieved_rate(self) -> float | None:
        span = self.stop - self.start
        return (self.end - self.first) / span if span > 0 else None

    def holds(self, t: float) -> bool:
        return self.start <= t < self.stop


# --------------------------------------------------------------------------------- latency


def latency_stats(latencies: Sequence[float | None], bound: Sequence[float]) -> dict[str, Any]:
    """p50/p99/max (ms) of ``latencies`` (seconds; None: not seen) where each unseen probe
    counts with its ``bound`` (the time waited for it), in the same order as the Nones."""
    seen = [v for v in latencies if v is not None]
    values = seen + list(bound)
    out: dict[str, Any] = {"probes": len(latencies), "missing": len(latencies) - len(seen),
                           "lower_bound": bool(bound)}
    if values:
        out.update(p50_ms=round(percentile(values, 50) * 1000, 1),
                   p99_ms=round(percentile(values, 99) * 1000, 1),
                   max_ms=round(max(values) * 1000, 1))
    return out


def recovery_seconds(probes: Iterable[tuple[float, float | None]], burst_end: float,
                     threshold: float, window: float) -> float | None:
    """Seconds from the end of the burst until the probes' latency is back under
    ``threshold`` for good: the recovery time.

    ``probes`` are (send time, latency or None when never seen), in seconds. Of the probes
    sent at or after ``burst_end`` (the send time of the first record after the burst), the
    recovery point is the send time ``s`` of the first one such that every probe sent in
    ``[s, s + window]`` — itself included — was seen with a latency ``<= threshold``, and the
    probes go on to at least ``s + window`` (a window cut short by the end of the run does not
    count). The recovery time is ``s - burst_end``; None when no probe qualifies (not
    recovered within the run). It is measured on send times: input sent from ``s`` on is
    served within ``threshold`` again, so the backlog was gone by ``s + threshold`` at the
    latest.

    >>> probes = [(10.0, 5.0), (11.0, 4.0), (12.0, 0.2), (13.0, 0.3), (14.0, 0.2), (15.0, 0.2)]
    >>> recovery_seconds(probes, burst_end=10.0, threshold=0.5, window=2.0)
    2.0
    >>> recovery_seconds(probes, burst_end=10.0, threshold=0.5, window=5.0) is None
    True
    """
    after = sorted((s, lat) for s, lat in probes if s >= burst_end)
    if not after:
        return None

    def bad(lat: float | None) -> bool:
        return lat is None or lat > threshold

    # next_bad[j]: the send time of the first bad probe at or after position j
    next_bad = [math.inf] * (len(after) + 1)
    for j in range(len(after) - 1, -1, -1):
        next_bad[j] = after[j][0] if bad(after[j][1]) else next_bad[j + 1]
    last_sent = after[-1][0]
    for j, (s, _) in enumerate(after):
        if last_sent < s + window:
            return None  # no full window left
        if next_bad[j] > s + window:
            return s - burst_end
    return None


# --------------------------------------------------------------------------------- batches


@dataclass(frozen=True)
class Batch:
    """One micro-batch from the application's progress log: when its line was written (epoch
    s, about its end), its records and seconds, the records its source was behind after it as
    the log says (None: not said), and ``waiting``, set by :func:`with_waiting`."""

    t: float
    batch_id: int
    records: int
    seconds: float
    behind: int | None
    waiting: int | None = None


@dataclass(frozen=True)
class Limit:
    """A batch size the memory budget set: from a recent batch of ``records`` whose tasks grew
    by ``growth_mb`` (the most per record), the next batch takes at most ``limit`` records."""

    t: float
    growth_mb: int
    records: int
    budget_mb: int
    limit: int


_STAMP = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})"
_PROGRESS = re.compile(_STAMP + r" streamtable\.progress INFO \S+ batch (\d+): (\d+) records in "
                       r"([\d.]+) s \([\d.]+ records/s\)(?:, (\d+) behind)?")
_LIMIT = re.compile(_STAMP + r" streamtable\.app INFO (?:the last batch's tasks|the tasks) grew by "
                    r"up to (\d+) MB for (\d+) records \(budget (\d+) MB[^)]*\): the next "
                    r"batch takes at most (\d+)")


def _epoch(stamp: str, millis: str) -> float:
    """A log line's local time (``%Y-%m-%d %H:%M:%S`` and ms) as epoch seconds."""
    return time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(millis) / 1000


def parse_app_log(lines: Iterable[str]) -> tuple[list[Batch], list[Limit]]:
    """The batches and the memory budget's limits in an application's log (its Python logging
    with ``%(asctime)s %(name)s %(levelname)s %(message)s``).

    >>> batches, limits = parse_app_log([
    ...     "2026-01-02 03:04:05,250 streamtable.progress INFO app batch 7: 1200 records in "
    ...     "0.40 s (3000 records/s), 35 behind",
    ...     "2026-01-02 03:04:06,000 streamtable.app INFO the last batch's tasks grew by up to "
    ...     "600 MB for 900000 records (budget 512 MB): the next batch takes at most 768000",
    ...     "2026-01-02 03:04:07,000 streamtable.app INFO the tasks grew by up to 600 MB for "
    ...     "900000 records (budget 512 MB; the most per record of the last batches): the next "
    ...     "batch takes at most 768000"])
    >>> (batches[0].batch_id, batches[0].records, batches[0].seconds, batches[0].behind)
    (7, 1200, 0.4, 35)
    >>> limits[0].limit, round(limits[0].t - batches[0].t, 3), len(limits)
    (768000, 0.75, 2)
    """
    batches: list[Batch] = []
    limits: list[Limit] = []
    for line in lines:
        if (m := _PROGRESS.match(line)) is not None:
            batches.append(Batch(_epoch(m[1], m[2]), int(m[3]), int(m[4]), float(m[5]),
                                 None if m[6] is None else int(m[6])))
        elif (m := _LIMIT.match(line)) is not None:
            limits.append(Limit(_epoch(m[1], m[2]), int(m[3]), int(m[4]), int(m[5]),
                                int(m[6])))
    return batches, limits


def with_waiting(batches: Sequence[Batch], sent: Mapping[int, float],
                 since: float) -> list[Batch]:
    """The batches whose line was written after ``since`` (the pacer's start), each with
    ``waiting``: the records sent by its end less the records those batches processed up to
    and with it — the input waiting in the broker, the backlog. ``sent`` maps record indices
    to their send times (the probes'; records between them count from the last one sent).

    The progress log's own "behind" is measured when a batch is planned, so a batch that
    takes all there is (no cap reached) leaves 0 behind however long it then runs.

    >>> bs = [Batch(t, i, r, 0.5, 0) for i, (t, r) in enumerate([(1.0, 10), (2.0, 10)])]
    >>> [b.waiting for b in with_waiting(bs, {0: 0.0, 10: 0.9, 20: 1.5, 30: 1.95}, 0.0)]
    [1, 11]
    """
    order = sorted((t, i) for i, t in sent.items())
    out, done, k, count = [], 0, 0, 0
    for b in sorted((b for b in batches if b.t > since), key=lambda b: b.t):
        while k < len(order) and order[k][0] <= b.t:
            count = order[k][1] + 1
            k += 1
        done += b.records
        out.append(replace(b, waiting=max(0, count - done)))
    return out


def last_error(lines: Sequence[str]) -> str | None:
    """The last exception message in an application's log (``SomeError: reason``), for an
    application that stopped.

    >>> last_error(["ok", "ValueError: one", "  at x", "pkg.KafkaSourceError: two", "bye"])
    'pkg.KafkaSourceError: two'
    """
    found = [ln.strip() for ln in lines if re.match(r"\s*[\w.]+(Error|Exception): ", ln)]
    return found[-1][:400] if found else None


def batch_stats(batches: Sequence[Batch], start: float, stop: float) -> dict[str, Any]:
    """The batches whose line was written in ``[start, stop)``: how many, their records
    (median, max), seconds (median, max), the most records waiting at a batch's end (see
    :func:`with_waiting`), and the records they processed per wall-clock second of the
    span."""
    inside = [b for b in batches if start <= b.t < stop]
    out: dict[str, Any] = {"batches": len(inside)}
    if inside:
        records = [b.records for b in inside]
        waiting = [b.waiting for b in inside if b.waiting is not None]
        out.update(records=sum(records), median_records=round(percentile(records, 50)),
                   max_records=max(records),
                   median_s=round(percentile([b.seconds for b in inside], 50), 2),
                   max_s=round(max(b.seconds for b in inside), 2),
                   max_waiting=max(waiting) if waiting else None,
                   processed_per_s=round(sum(records) / (stop - start), 1)
                   if stop > start else None)
    return out


def drained_seconds(batches: Sequence[Batch], burst_start: float, burst_end: float,
                    steady_waiting: int) -> float | None:
    """Seconds from the end of the burst to the end of the first batch after it that left at
    most ``steady_waiting`` records waiting (the most any batch of the steady period left):
    the backlog is gone. 0 when no batch from the burst's start on left more than that; None
    when no batch tells (no ``waiting``) or the backlog was never drained.

    >>> bs = [Batch(t, 0, 1, 0.1, None, w) for t, w in [(9.0, 50), (11.0, 900), (14.0, 40)]]
    >>> drained_seconds(bs, burst_start=8, burst_end=10, steady_waiting=60)
    4.0
    """
    during = [b for b in batches if b.t >= burst_start and b.waiting is not None]
    if not during:
        return None
    if all(b.waiting <= steady_waiting for b in during):  # type: ignore[operator]
        return 0.0
    for b in during:
        if b.t >= burst_end and b.waiting <= steady_waiting:  # type: ignore[operator]
            return round(b.t - burst_end, 1)
    return None


# ---------------------------------------------------------------------------------- memory


def memory_peaks(timeline: Sequence[TreeSample], start: float, stop: float) -> dict[str, Any]:
    """The peak RSS, PSS and Python workers' PSS (MB) of the samples taken in
    ``[start, stop)``."""
    inside = [s for s in timeline if start <= s.t < stop]
    if not inside:
        return {"samples": 0}
    return {"samples": len(inside),
            "rss_mb": round(max(s.rss for s in inside) / MB, 1),
            "pss_mb": round(max(s.pss for s in inside) / MB, 1),
            "workers_pss_mb": round(max(s.workers_pss for s in inside) / MB, 1)}


# --------------------------------------------------------------------------------- figures


PERIODS = ("steady", "burst", "after")
#: what the result check compares, by workload
EXPECTED = {"w1": "every count", "w2": "every client's set of US positions"}


def figures(phases: Sequence[Phase], probes: Mapping[int, tuple[float, float | None]],
            ended: float, batches: Sequence[Batch], limits: Sequence[Limit],
            timeline: Sequence[TreeSample], factor: float, window: float) -> dict[str, Any]:
    """Every figure of one burst run. ``phases``: warm-up, steady, burst, after (as sent);
    ``probes``: record index -> (send time, latency or None); ``ended``: when the run stopped
    waiting for probes (the bound of the unseen ones, and the end of the last period)."""
    by_name = {p.name: p for p in phases}
    steady, burst, after = (by_name[n] for n in PERIODS)
    spans = {"steady": (steady.start, burst.start), "burst": (burst.start, burst.stop),
             "after": (after.start, ended)}
    out: dict[str, Any] = {"phases": {}, "latency": {}, "batches": {}}
    for p in phases:
        out["phases"][p.name] = {"rate": p.rate, "records": p.end - p.first,
                                 "start_s": round(p.start - phases[0].start, 2),
                                 "seconds": round(p.stop - p.start, 2),
                                 "achieved_rate": round(p.achieved_rate or 0, 1)}
    for name in PERIODS:
        p = by_name[name]
        mine = [probes[i] for i in sorted(probes) if p.first <= i < p.end]
        out["latency"][name] = latency_stats([v for _, v in mine],
                                             [ended - s for s, v in mine if v is None])
        out["batches"][name] = batch_stats(batches, *spans[name])
    steady_p99 = out["latency"]["steady"].get("p99_ms")
    threshold = factor * steady_p99 / 1000 if steady_p99 is not None else None
    rec = (recovery_seconds(probes.values(), burst.stop, threshold, window)
           if threshold is not None else None)
    out["recovery"] = {"factor": factor, "window_s": window,
                       "threshold_ms": round(threshold * 1000, 1) if threshold else None,
                       "seconds": None if rec is None else round(rec, 1),
                       "at": None if rec is None else burst.stop + rec,
                       "observed_s": round(ended - burst.stop, 1)}
    steady_waiting = out["batches"]["steady"].get("max_waiting") or 0
    out["backlog"] = {
        "max_waiting": max((b.waiting for b in batches
                            if b.waiting is not None and b.t >= burst.start), default=None),
        "drained_s": drained_seconds(batches, burst.start, burst.stop, steady_waiting)}
    out["limits"] = {"count": len(limits),
                     "smallest": min((x.limit for x in limits), default=None),
                     "largest_growth_mb": max((x.growth_mb for x in limits), default=None)}
    out["memory"] = {"steady": memory_peaks(timeline, *spans["steady"]),
                     "burst_and_after": memory_peaks(timeline, burst.start, math.inf),
                     "whole_run": memory_peaks(timeline, -math.inf, math.inf)}
    return out


# -------------------------------------------------------------------------------- Markdown


def _n(v: Any, fmt: str = "{:,.0f}") -> str:
    return "–" if v is None or v == "" else fmt.format(v)


def _lat(stats: Mapping[str, Any], key: str) -> str:
    v = stats.get(key)
    if v is None:
        return "–"
    return ("≥ " if stats.get("lower_bound") and key != "p50_ms" else "") + _n(v)


def table(fig: Mapping[str, Any]) -> str:
    """The per-period table of one run."""
    head = ("| period | seconds | input records/s (scheduled / sent) | probes (not seen) | "
            "latency p50 ms | p99 ms | max ms | batches | records per batch (median / max) | "
            "processed records/s | most waiting | peak RSS MB | peak PSS MB | "
            "Python workers PSS MB |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name in PERIODS:
        ph, lat, b = fig["phases"][name], fig["latency"][name], fig["batches"][name]
        mem = fig["memory"]["steady" if name == "steady" else "burst_and_after"]
        mem_cells = [_n(mem.get(k)) for k in ("rss_mb", "pss_mb", "workers_pss_mb")]
        if name == "after":
            mem_cells = ["(with the burst)"] * 3
        lines.append(
            f"| {name} | {ph['seconds']:.0f} | {_n(ph['rate'])} / {_n(ph['achieved_rate'])} | "
            f"{lat['probes']:,} ({lat['missing']:,}) | {_lat(lat, 'p50_ms')} | "
            f"{_lat(lat, 'p99_ms')} | {_lat(lat, 'max_ms')} | {b['batches']:,} | "
            f"{_n(b.get('median_records'))} / {_n(b.get('max_records'))} | "
            f"{_n(b.get('processed_per_s'))} | {_n(b.get('max_waiting'))} | "
            + " | ".join(mem_cells) + " |")
    return "\n".join(lines)


def reading(fig: Mapping[str, Any], settings: Mapping[str, Any]) -> list[str]:
    """A few sentences on what the figures say: the backlog, the batches, the latency, the
    memory, the result."""
    ph, lat, bat, mem = fig["phases"], fig["latency"], fig["batches"], fig["memory"]
    rec, backlog, limits = fig["recovery"], fig["backlog"], fig["limits"]
    out = []
    if fig.get("app_stopped"):
        out.append("The application stopped before the run ended (see above): nothing was "
                   "processed after its last batch, so the latency after it is only a "
                   "lower bound and there is no recovery.")
    steady_waiting = bat["steady"].get("max_waiting") or 0
    came, done = ph["burst"]["achieved_rate"], bat["burst"].get("processed_per_s")
    most = backlog["max_waiting"]
    held = (f"up to {_n(most)} records sent and not yet processed at a batch's end ("
            + (f"{most / came:.1f} s of burst input; " if most and came else "")
            + f"at most {_n(steady_waiting)} in the steady period)")
    if done is not None and done < 0.9 * came:
        out.append(f"The burst came at {_n(came)} records/s and streamtable processed "
                   f"{_n(done)} records/s meanwhile: the backlog grew through the burst, "
                   f"{held}.")
    else:
        out.append(f"The burst came at {_n(came)} records/s and streamtable processed "
                   f"{_n(done)} records/s meanwhile, nearly keeping up: {held} — a higher "
                   "`--rate` or `--burst-factor` makes the backlog grow.")
    cap = settings.get("max.records.per.batch")
    largest = max((bat[n].get("max_records") or 0) for n in PERIODS)
    budget_mb = (settings.get("worker.memory.budget.bytes") or 0) // MB
    text = (f"Batches grew from a median of {_n(bat['steady'].get('median_records'))} records "
            f"in the steady period to {_n(bat['burst'].get('median_records'))} in the burst "
            f"(largest {_n(largest)}; max.records.per.batch {_n(cap)}"
            + (", reached" if cap is not None and largest >= cap else "") + "). ")
    if limits["count"]:
        text += (f"The memory budget ({budget_mb:,} MB per worker) shrank the next batch "
                 f"{limits['count']} times (smallest limit {_n(limits['smallest'])} records, "
                 f"largest task growth {_n(limits['largest_growth_mb'])} MB).")
    else:
        text += (f"The memory budget ({budget_mb:,} MB per worker) never shrank a batch: no "
                 "task grew past it for the batch sizes reached.")
    out.append(text)
    text = (f"Latency p99 went from {_lat(lat['steady'], 'p99_ms')} ms (steady) to "
            f"{_lat(lat['burst'], 'p99_ms')} ms for probes sent in the burst (max "
            f"{_lat(lat['burst'], 'max_ms')} ms) and {_lat(lat['after'], 'p99_ms')} ms for "
            f"those sent after it (max {_lat(lat['after'], 'max_ms')} ms). ")
    if rec["seconds"] is not None:
        text += (f"It was back under {_n(rec['threshold_ms'])} ms ({rec['factor']}× the steady "
                 f"p99) for good {rec['seconds']:.1f} s after the burst ended")
    else:
        text += (f"It was not back under {_n(rec['threshold_ms'])} ms for "
                 f"{rec['window_s']:.0f} s in a row within the {rec['observed_s']:.0f} s "
                 "observed after the burst")
    if backlog["drained_s"] is not None:
        text += f"; the backlog was gone {backlog['drained_s']:.1f} s after it."
    else:
        text += "."
    out.append(text)
    s, b = mem["steady"], mem["burst_and_after"]
    if s.get("samples") and b.get("samples"):
        out.append(
            f"Peak memory of the process tree: RSS {_n(s['rss_mb'])} → {_n(b['rss_mb'])} MB, "
            f"PSS {_n(s['pss_mb'])} → {_n(b['pss_mb'])} MB, Python workers' PSS "
            f"{_n(s['workers_pss_mb'])} → {_n(b['workers_pss_mb'])} MB (steady → during and "
            "after the burst).")
    return out


def section(runs: Sequence[Mapping[str, Any]], command: str, machine: Mapping[str, Any],
            load: Mapping[str, Sequence[float]], settings: Mapping[str, Any]) -> str:
    """The ``## Burst`` section appended to ``bench/RESULTS.md`` by ``--out``."""
    m = machine
    first = runs[0]
    sched = first["schedule"]
    rate, burst = sched["rate"], sched["burst_rate"]
    lines = [
        f"## Burst: {_n(rate)} → {_n(burst)} → {_n(rate)} records/s "
        f"({time.strftime('%Y-%m-%d %H:%M %Z')})", "",
        f"Command (from the repository root): `{command}` (`make bench-burst ARGS=...` runs "
        "the same).", "",
        f"Machine: {m.get('nproc')} CPUs ({m.get('cpu', '?')}), {m.get('memory_gb', '?')} GB "
        f"RAM, {m.get('platform', '?')}; Python {m.get('python', '?')}, PySpark "
        f"{m.get('pyspark', '?')}, {m.get('java', 'java ?')}. Load average (1, 5, 15 min) "
        f"at the start {', '.join(f'{x:.1f}' for x in load['start'])}, at the end "
        f"{', '.join(f'{x:.1f}' for x in load['end'])}"
        + ("; the machine is shared and other work was running during the run, so the "
           "figures are pessimistic." if max(load["start"][0], load["end"][0])
           > 0.5 * (m.get("nproc") or 1) else "."), "",
        "streamtable runs the workload as a live application (`StreamsApp.start()`, "
        f"commit.interval.ms {settings['commit.interval.ms']} as in the main bench's latency "
        f"runs; max.records.per.batch {_n(settings['max.records.per.batch'])}, "
        f"worker.memory.budget.bytes {_n(settings['worker.memory.budget.bytes'])}"
        + (f"; {', '.join(settings['overrides'])}" if settings.get("overrides") else "")
        + f") on Spark local[{m.get('nproc')}] and the development broker, from its own "
        "process. The input is paced: "
        + ", then ".join(f"{p['seconds']:.0f} s at {_n(p['rate'])} records/s ({name})"
                         for name, p in sched["phases"].items())
        + f"; every {sched['probe_every']}th record is a probe whose effect is a new output "
        "key, its latency = the harness's first receive time of that key − its send time. "
        "Periods go by send time (a probe sent in the burst counts for the burst); 'after' "
        "runs to the end of the wait for the last probes. Memory: the process tree (driver "
        "Python, Spark JVM, Python workers), sampled every "
        f"{settings['sample_interval']} s; 'burst' = the burst and after it. Batches: the "
        "application's progress log (a line per micro-batch); waiting = records sent by a "
        "batch's end less the records processed by then (the backlog). Recovery time: from "
        "the end of the burst to the send time of the first probe from which every probe "
        f"sent in the next {first['recovery']['window_s']:.0f} s "
        f"was seen within {first['recovery']['factor']}× the steady p99 "
        "(`bench/burst_report.py`, `recovery_seconds`).", "",
    ]
    for run in runs:
        lines += [f"### {run['workload'].upper()}: {run['records']:,} records", "",
                  table(run), ""]
        rec = run["recovery"]
        lines.append(
            "* Recovery: "
            + (f"{rec['seconds']:.1f} s after the burst" if rec["seconds"] is not None
               else f"not within the {rec['observed_s']:.0f} s observed")
            + f" (threshold {_n(rec['threshold_ms'])} ms); backlog drained: "
            + (f"{run['backlog']['drained_s']:.1f} s after the burst"
               if run["backlog"]["drained_s"] is not None else "not seen in the log")
            + f"; most records waiting {_n(run['backlog']['max_waiting'])}.")
        stopped = run.get("app_stopped")
        if stopped:
            lines.append(f"* **The application stopped** (exit code {stopped['exit_code']}) "
                         f"before the run ended: {stopped['error'] or 'see its log'} "
                         f"(log: `{run['log']}`).")
        res = run["result"]
        lines.append(
            f"* Result after the run: output topic {res['topic']}, queryable store "
            f"{res['store']}" + (f" — {EXPECTED[run['workload']]} as expected: nothing lost, "
                                 "nothing doubled." if res["topic"] == res["store"] == "ok"
                                 else "."))
        lines.append(f"* Input: {run['sent']:,} of {run['records']:,} records sent, the pacer "
                     f"at most {run['pacer_max_lag_ms']:,.0f} ms behind its schedule; live "
                     f"{run['live_after_s']} s after the first prime.")
        files = [f"`{f}`" for f in (run.get("csv"), run.get("png")) if f]
        if files:
            lines.append("* Per second: " + " and ".join(files) + ".")
        lines += ["", "Reading: " + " ".join(reading(run, settings)), ""]
    return "\n".join(lines)
