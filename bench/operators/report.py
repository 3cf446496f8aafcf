"""The operator suite's Markdown: a results table, the targets, and what each check compares.

>>> class R:
...     family, records, status, rate, peak_rss_mb = "w1", 1_000_000, "OK", 75_000.0, 1500.0
>>> targets_of([R()], [1_000_000])["w1"]
['met (75,000)', 'not run (needs 1,000,000 and 10,000,000)', 'met (1,500 MB)']
"""

from __future__ import annotations

import time
from typing import Any

from bench.operators.families import FAMILIES

RATE_TARGET = 60_000
RATE_AT = 1_000_000
SCALE_AT = 10_000_000
SCALE_TARGET = 0.9
RSS_TARGET_MB = 2048

TARGETS = [
    f"≥ {RATE_TARGET:,} input records/s at {RATE_AT:,} records",
    f"records/s at {SCALE_AT:,} records ≥ {SCALE_TARGET}× that at {RATE_AT:,}",
    f"peak RSS of the whole process tree ≤ {RSS_TARGET_MB / 1024:.0f} GB",
]


def _n(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def one_line(row: Any) -> str:
    """A row as one log line."""
    if row.status != "OK":
        return f"{row.status}: {row.reason}"
    return (f"OK, {row.records:,} records in {row.seconds:.1f}s = {row.rate:,.0f} records/s, "
            f"{row.batches} batches, first output after {_n(row.first_output_s, 1)}s, peak RSS "
            f"{row.peak_rss_mb:,.0f} MB (PSS {row.peak_pss_mb:,.0f} MB, Python workers "
            f"{row.workers_pss_mb:,.0f} MB), {row.output_records:,} output records, "
            f"checked against the {row.checked_against}")


def table(rows: list[Any]) -> str:
    """The results, one line per family and size."""
    lines = ["| family | records | records/s | wall s | batches | first output s | "
             "peak RSS MB | peak PSS MB | workers PSS MB | output records | check |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        verdict = (f"ok ({r.checked_against})" if r.status == "OK"
                   else f"**{r.status}**")
        lines.append(f"| {r.family} | {r.records:,} | {_n(r.rate)} | {_n(r.seconds, 1)} | "
                     f"{_n(r.batches)} | {_n(r.first_output_s, 1)} | {_n(r.peak_rss_mb)} | "
                     f"{_n(r.peak_pss_mb)} | {_n(r.workers_pss_mb)} | {r.output_records:,} | "
                     f"{verdict} |")
    return "\n".join(lines)


def targets_of(rows: list[Any], sizes: list[int]) -> dict[str, list[str]]:
    """Per family: the verdict on each of :data:`TARGETS` (a failed run meets none)."""
    out: dict[str, list[str]] = {}
    for name in dict.fromkeys(r.family for r in rows):
        mine = {r.records: r for r in rows if r.family == name}
        at = {n: r for n, r in mine.items() if r.status == "OK"}
        base, big = at.get(RATE_AT), at.get(SCALE_AT)
        if base is not None:
            rate = ("met" if base.rate >= RATE_TARGET else "**missed**") + f" ({base.rate:,.0f})"
        else:
            rate = "not met: the run failed" if RATE_AT in mine else f"not run at {RATE_AT:,}"
        if base is not None and big is not None:
            ratio = big.rate / base.rate
            scale = ("met" if ratio >= SCALE_TARGET else "**missed**") + f" ({ratio:.2f}×)"
        elif RATE_AT in mine and SCALE_AT in mine:
            scale = "not met: a run failed"
        else:
            scale = f"not run (needs {RATE_AT:,} and {SCALE_AT:,})"
        worst = max((r.peak_rss_mb or 0.0 for r in mine.values()), default=0.0)
        failed = any(r.status != "OK" for r in mine.values())
        if failed:
            rss = f"not met: a run failed ({worst:,.0f} MB)"
        else:
            rss = ("**missed**" if worst > RSS_TARGET_MB else "met") + f" ({worst:,.0f} MB)"
        out[name] = [rate, scale, rss]
    return out


def section(rows: list[Any], command: str, machine: dict[str, Any], sizes: list[int]) -> str:
    """The ``## Operator suite`` section appended to ``bench/RESULTS.md`` by ``--out``."""
    m = machine
    lines = [
        f"## Operator suite ({time.strftime('%Y-%m-%d %H:%M %Z')})", "",
        f"Command (from the repository root): `{command}`", "",
        f"Machine: {m.get('nproc')} CPUs ({m.get('cpu', '?')}), {m.get('memory_gb', '?')} GB "
        f"RAM, {m.get('platform', '?')}; Python {m.get('python', '?')}, PySpark "
        f"{m.get('pyspark', '?')}, {m.get('java', 'java ?')}.", "",
        f"Each family runs alone in a fresh process (Spark `local[*]`, {m.get('nproc')} cores; "
        "default settings unless the command gives `--config`) over its input, generated "
        "seeded into 2-partition topics of the development broker beforehand: "
        "`StreamsApp.run_until_caught_up()`. records/s = input records "
        "(all input topics) / (caught up − the app's start mark); first output = start mark "
        "→ first output record seen by the harness; memory = peak over the whole process "
        "tree (driver Python, Spark JVM, Python workers), sampled every 0.5 s; workers PSS = "
        "Spark's Python workers alone. The output topic is then read in full and compared "
        "with the test driver in batch mode and/or a plain-Python reference (column check); "
        "a mismatch is FAILED whatever its speed.", "",
        table(rows), "",
        "Targets: " + "; ".join(TARGETS) + ".", "",
        "| family | " + " | ".join(TARGETS) + " |",
        "|---|" + "---|" * len(TARGETS),
    ]
    for name, verdicts in targets_of(rows, sizes).items():
        lines.append(f"| {name} | " + " | ".join(verdicts) + " |")
    lines += ["", "What each family runs and what its check compares (batch-independent "
                  "results only; see `bench/operators/`):", ""]
    for name in dict.fromkeys(r.family for r in rows):
        f = FAMILIES[name]
        lines.append(f"* **{name}**, {f.title}: {f.check}.")
    failures = [r for r in rows if r.status != "OK"]
    if failures:
        lines.append("")
        for r in failures:
            lines.append(f"* **{r.family} at {r.records:,}: {r.status}** — {r.reason} "
                         f"(log: `{r.log}`)")
    details = [r for r in rows if r.rss_by_process]
    if details:
        lines.append("")
        for r in details:
            procs = ", ".join(f"{k} {v:,.0f}" for k, v in list(r.rss_by_process.items())[:4])
            lines.append(f"* {r.family} at {r.records:,}: peak RSS by process (MB): {procs}; "
                         f"start-up {_n(r.startup_s, 1)}s; input {r.input_stats}")
    return "\n".join(lines) + "\n"
