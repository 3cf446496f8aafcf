"""The Nexmark results as Markdown: one row per query and contender.

>>> class R:
...     query, contender, events, status, reason = "q0", "streamtable", 1000, "OK", ""
...     rate, rate_per_core, seconds, cpu_seconds = 500.0, 400.0, 2.0, 2.5
...     peak_rss_mb, peak_pss_mb = 900.0, 800.0
...     batches, output_records = 1, 920
>>> print(table([R()]).splitlines()[2])
| q0 | streamtable | 1,000 | 500 | 400 | 2.0 | 2.5 | 900 | 800 | 1 | 920 | ok |
"""

from __future__ import annotations

import time
from typing import Any

from bench.nexmark.queries import QUERIES


def _n(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def one_line(row: Any) -> str:
    if row.status != "OK":
        return f"{row.status}: {row.reason}"
    return (f"OK, {row.events:,} events in {row.seconds:.1f}s = {row.rate:,.0f} events/s, "
            f"{_n(row.rate_per_core)} events/s per core ({_n(row.cpu_seconds, 1)} CPU s), "
            f"{row.batches} batches, peak RSS {row.peak_rss_mb:,.0f} MB (PSS "
            f"{row.peak_pss_mb:,.0f} MB), {row.output_records:,} output records, checked")


def cpu_line(row: Any) -> str:
    """One row's CPU seconds by process, and its JVM's by thread where it has one.

    >>> class R:
    ...     query, contender = "q4", "streamtable"
    ...     cpu_by_process = {"daemon": 17.1, "java (Spark JVM)": 8.5}
    ...     cpu_by_jvm_thread = {"tasks": 4.0, "JIT compiler": 2.5}
    >>> cpu_line(R())
    '- q4, streamtable: daemon 17.1, java (Spark JVM) 8.5; JVM threads: tasks 4.0, JIT compiler 2.5'
    """
    line = (f"- {row.query}, {row.contender}: "
            + ", ".join(f"{k} {v:,.1f}" for k, v in list(row.cpu_by_process.items())[:5]))
    if row.cpu_by_jvm_thread:
        line += "; JVM threads: " + ", ".join(f"{k} {v:,.1f}"
                                               for k, v in row.cpu_by_jvm_thread.items())
    return line


def table(rows: list[Any]) -> str:
    lines = ["| query | contender | events | events/s | events/s per core | wall s | CPU s | "
             "peak RSS MB | peak PSS MB | batches | output records | check |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        verdict = "ok" if r.status == "OK" else f"**{r.status}**"
        lines.append(f"| {r.query} | {r.contender} | {r.events:,} | {_n(r.rate)} | "
                     f"{_n(r.rate_per_core)} | {_n(r.seconds, 1)} | {_n(r.cpu_seconds, 1)} | "
                     f"{_n(r.peak_rss_mb)} | {_n(r.peak_pss_mb)} | {_n(r.batches)} | "
                     f"{r.output_records:,} | {verdict} |")
    return "\n".join(lines)


def _matrix(queries: list[str], names: list[str], cell: Any) -> str:
    lines = ["| query | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    lines += [f"| {q} | " + " | ".join(cell(q, n) for n in names) + " |" for q in queries]
    return "\n".join(lines)


def ratios(rows: list[Any], base: str = "streamtable") -> str:
    """Each contender's events/s over ``base``'s, per query (a checked run of both only).

    >>> class R:
    ...     def __init__(self, contender, rate, status="OK"):
    ...         self.query, self.contender, self.rate, self.status = "q1", contender, rate, status
    >>> print(ratios([R("streamtable", 100.0), R("bare", 150.0), R("quix", 5.0, "FAILED")]))
    | query | bare | quix |
    |---|---|---|
    | q1 | 1.50× | FAILED |
    """
    queries = list(dict.fromkeys(r.query for r in rows))
    names = [n for n in dict.fromkeys(r.contender for r in rows) if n != base]
    by = {(r.query, r.contender): r for r in rows}

    def cell(q: str, n: str) -> str:
        r, b = by.get((q, n)), by.get((q, base))
        if r is None or r.status == "UNSUPPORTED":
            return "–"
        if r.status != "OK":
            return r.status
        if b is None or b.status != "OK" or not b.rate:
            return "no base"
        return f"{r.rate / b.rate:.2f}×"
    return _matrix(queries, names, cell)


def coverage(queries: list[str], engines: dict[str, Any]) -> str:
    """Which contender can express which query (has an implementation of it).

    >>> class E:
    ...     def supports(self, q): return q == "q0"
    >>> print(coverage(["q0", "q4"], {"bare": E()}))
    | query | bare |
    |---|---|
    | q0 | yes |
    | q4 | – |
    """
    return _matrix(queries, list(engines),
                   lambda q, n: "yes" if engines[n].supports(q) else "–")


def section(rows: list[Any], command: str, machine: dict[str, Any],
            loaded: dict[str, Any], engines: dict[str, Any] | None = None) -> str:
    """A Markdown section: the command, the machine, the table, each contender's ratio to
    streamtable, which contender expresses which query (``engines``: the contenders run, by
    name), and what failed."""
    out = [f"## Nexmark, {time.strftime('%Y-%m-%d %H:%M')}", "", f"`{command}`", "",
           "Machine: " + ", ".join(f"{k} {v}" for k, v in machine.items()), "",
           f"Input: {loaded['counts']} generated into Kafka in {loaded['seconds']}s.", "",
           table(rows), ""]
    if len({r.contender for r in rows}) > 1:
        out += ["Events/s of each contender over streamtable's, per query (a checked run of "
                "both):", "", ratios(rows), ""]
    if engines:
        queries = list(dict.fromkeys(r.query for r in rows))
        out += ["Which contender expresses which query:", "", coverage(queries, engines), ""]
    spent = [r for r in rows if r.status == "OK" and r.cpu_by_process]
    if spent:
        out += ["Where the CPU seconds went, by process (the largest five) and, for a Spark "
                "JVM, by thread (tasks: moving the Python workers' Arrow batches and the "
                "shuffles):", ""]
        out += [cpu_line(r) for r in spent]
        out.append("")
    problems = [r for r in rows if r.status not in ("OK",)]
    if problems:
        out.append("Not OK:")
        out.append("")
        for r in problems:
            title = QUERIES[r.query].title if r.query in QUERIES else r.query
            out.append(f"- {r.query} ({title}) on {r.contender}: {r.status}: {r.reason}")
        out.append("")
    return "\n".join(out)
