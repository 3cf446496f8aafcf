"""A burst run's figures over time (``python -m bench.burst``): one CSV row a second — the
phase, the probes sent and their latency, the batches, the records waiting, the memory — and a
plot of the same (PNG, when matplotlib is installed: the ``bench`` extra)."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.burst_report import MB, Batch, Phase
from bench.harness import TreeSample, percentile

SERIES_COLUMNS = ("t_s", "phase", "scheduled_rate", "probes_sent", "probes_missing",
                  "latency_p50_ms", "latency_p99_ms", "latency_max_ms", "batches",
                  "batch_records", "max_waiting", "rss_mb", "pss_mb", "workers_pss_mb")


def per_second(t0: float, phases: Sequence[Phase], probes: Sequence[tuple[float, float | None]],
               batches: Sequence[Batch], timeline: Sequence[TreeSample],
               stop: float) -> list[dict[str, Any]]:
    """One row a second from ``t0`` (the pacer's start) to ``stop``: the phase, the probes
    sent in that second and their latencies, the batches ending in it, the memory peaks."""
    n = max(0, math.ceil(stop - t0))
    rows: list[dict[str, Any]] = []
    lat: list[list[float]] = [[] for _ in range(n)]
    sent, missing = [0] * n, [0] * n
    for s, v in probes:
        k = int(s - t0)
        if 0 <= k < n:
            sent[k] += 1
            if v is None:
                missing[k] += 1
            else:
                lat[k].append(v * 1000)
    nb, rec = [0] * n, [0] * n
    waiting: list[int | None] = [None] * n
    for b in batches:
        k = int(b.t - t0)
        if 0 <= k < n:
            nb[k] += 1
            rec[k] += b.records
            if b.waiting is not None:
                waiting[k] = max(waiting[k] or 0, b.waiting)
    mem: list[tuple[int, int, int] | None] = [None] * n
    for smp in timeline:
        k = int(smp.t - t0)
        if 0 <= k < n:
            old = mem[k] or (0, 0, 0)
            mem[k] = (max(old[0], smp.rss), max(old[1], smp.pss), max(old[2], smp.workers_pss))
    for k in range(n):
        t = t0 + k
        phase = next((p for p in phases if p.holds(t)), None)
        m = mem[k]
        rows.append({
            "t_s": k, "phase": phase.name if phase else "",
            "scheduled_rate": phase.rate if phase else "",
            "probes_sent": sent[k], "probes_missing": missing[k],
            "latency_p50_ms": round(percentile(lat[k], 50), 1) if lat[k] else "",
            "latency_p99_ms": round(percentile(lat[k], 99), 1) if lat[k] else "",
            "latency_max_ms": round(max(lat[k]), 1) if lat[k] else "",
            "batches": nb[k], "batch_records": rec[k],
            "max_waiting": "" if waiting[k] is None else waiting[k],
            "rss_mb": round(m[0] / MB, 1) if m else "",
            "pss_mb": round(m[1] / MB, 1) if m else "",
            "workers_pss_mb": round(m[2] / MB, 1) if m else "",
        })
    return rows


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(SERIES_COLUMNS))
        w.writeheader()
        w.writerows(rows)


def plot(path: Path, t0: float, phases: Sequence[Phase],
         probes: Sequence[tuple[float, float | None]], batches: Sequence[Batch],
         timeline: Sequence[TreeSample], threshold: float | None,
         recovered_at: float | None, title: str) -> Path | None:
    """A PNG of the probes' latency, the batches' sizes and the memory over time (seconds
    from ``t0``), the burst shaded; None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(8, 7), sharex=True,
                                        height_ratios=(3, 2, 2))
    for ax in (ax1, ax2, ax3):
        for p in phases:
            if p.name == "burst":
                ax.axvspan(p.start - t0, p.stop - t0, color="tab:orange", alpha=0.15, lw=0)
    seen = [(s - t0, v * 1000) for s, v in probes if v is not None]
    if seen:
        ax1.scatter(*zip(*seen, strict=True), s=2, color="tab:blue", label="probe latency")
    unseen = [s - t0 for s, v in probes if v is None]
    if unseen:
        ax1.scatter(unseen, [max((v for _, v in seen), default=1)] * len(unseen), s=4,
                    marker="x", color="tab:red", label="not seen")
    if threshold is not None:
        ax1.axhline(threshold * 1000, color="tab:green", lw=0.8, ls="--",
                    label="recovery threshold")
    if recovered_at is not None:
        ax1.axvline(recovered_at - t0, color="tab:green", lw=0.8, label="recovered")
    ax1.set_yscale("log")
    ax1.set_ylabel("latency (ms)")
    ax1.legend(loc="upper right", fontsize=7)
    ax1.set_title(title, fontsize=9)
    if batches:
        ax2.bar([b.t - t0 - b.seconds / 2 for b in batches], [b.records for b in batches],
                width=[max(b.seconds, 0.1) for b in batches], color="tab:purple",
                label="records per batch")
        lag = [(b.t - t0, b.waiting) for b in batches if b.waiting is not None]
        if lag:
            ax2.plot(*zip(*lag, strict=True), color="tab:gray", lw=0.8,
                     label="records waiting")
        ax2.legend(loc="upper right", fontsize=7)
    ax2.set_ylabel("records")
    if timeline:
        xs = [s.t - t0 for s in timeline]
        ax3.plot(xs, [s.rss / MB for s in timeline], lw=0.8, label="RSS (tree)")
        ax3.plot(xs, [s.pss / MB for s in timeline], lw=0.8, label="PSS (tree)")
        ax3.plot(xs, [s.workers_pss / MB for s in timeline], lw=0.8,
                 label="PSS (Python workers)")
        ax3.legend(loc="upper right", fontsize=7)
    ax3.set_ylabel("MB")
    ax3.set_xlabel("seconds from the start of the paced input")
    ax3.set_xlim(left=-2.0)  # the application's start-up before the paced input is not shown
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path
