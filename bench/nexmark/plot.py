"""``python -m bench.nexmark.plot``: events/s per query and contender as grouped bars (PNG).

    python -m bench.nexmark.plot bench/.data/nexmark<time>/nexmark.json --out nexmark.png
    python -m bench.nexmark.plot bench/nexmark/RESULTS.md --section "1,000,000 events" \\
        --out bench/nexmark/RESULTS.png

The runner draws it at the end of every run from the rows it measured: ``nexmark.png`` beside
``nexmark.json`` in the run's directory, and, for a run of every query with ``--out FILE``,
``FILE`` with the suffix ``.png`` beside it (``bench/nexmark/RESULTS.png`` for
``--out bench/nexmark/RESULTS.md``).
From a file it takes the runner's ``nexmark.json`` or one section of a results Markdown file
(``--section``: a part of its heading; default the last section with a results table).

One group of bars per query, in Nexmark's order, one bar per contender. The y axis is
logarithmic when the fastest and the slowest rate drawn are more than :data:`LOG_SCALE_RATIO`
apart. A run whose output was wrong keeps its bar, hatched and labelled FAILED; a run without a
rate (timed out, stopped, failed before measuring) is a label at the foot of its slot; a query
a contender does not run is left empty.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: rates further apart than this are drawn on a logarithmic axis
LOG_SCALE_RATIO = 30.0


@dataclass(frozen=True)
class Bar:
    """One query on one contender: its status (OK, FAILED, TIMEOUT, UNSUPPORTED, or any
    other word the runner used) and its events/s, if measured."""

    query: str
    contender: str
    status: str
    rate: float | None


def bars_from_rows(rows: Iterable[Any]) -> list[Bar]:
    """Bars of the runner's rows: its ``Row`` objects or their dicts (``nexmark.json``)."""
    bars = []
    for row in rows:
        get = row.get if isinstance(row, Mapping) else lambda k, r=row: getattr(r, k, None)
        rate = get("rate")
        bars.append(Bar(str(get("query")), str(get("contender")), str(get("status") or "OK"),
                        None if rate is None else float(rate)))
    return bars


def _number(cell: str) -> float | None:
    cell = cell.strip().replace(",", "")
    try:
        return float(cell)
    except ValueError:
        return None  # "–": not measured


def bars_from_markdown(text: str, section: str | None = None) -> tuple[list[Bar], str]:
    """The bars of one section of a results Markdown file (the ``query | contender | ... |
    events/s | ... | check`` table the runner writes) and the section's heading: the last
    section whose heading holds ``section``, or the last one with a table.

    >>> md = '''## A run, 10 events
    ... | query | contender | events | events/s | check |
    ... |---|---|---|---|---|
    ... | q0 | streamtable | 10 | 1,250 | ok |
    ... | q4 | peer | 10 | – | **TIMEOUT** |'''
    >>> bars_from_markdown(md)[0][1]
    Bar(query='q4', contender='peer', status='TIMEOUT', rate=None)
    """
    found: tuple[list[Bar], str] | None = None
    heading = ""
    columns: list[str] | None = None
    bars: list[Bar] = []
    for line in [*text.splitlines(), "## end"]:
        if line.startswith("#"):
            if bars and (section is None or section in heading):
                found = (bars, heading)
            heading, columns, bars = line.lstrip("#").strip(), None, []
            continue
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if columns is None:
            if {"query", "contender", "events/s"} <= set(cells):
                columns = cells
            continue
        if len(cells) != len(columns) or set(cells[0]) <= set("-: "):
            continue  # the separator row
        row = dict(zip(columns, cells, strict=True))
        check = row.get("check", "ok").strip("* ")
        bars.append(Bar(row["query"], row["contender"],
                        "OK" if check.lower() == "ok" else check.upper(),
                        _number(row["events/s"])))
    if found is None:
        wanted = f"a section whose heading holds {section!r}" if section else "a section"
        raise ValueError(f"no results table in {wanted}")
    return found


def _query_order(name: str) -> tuple[int, str]:
    digits = re.sub(r"\D", "", name)
    return (int(digits) if digits else 10**6, name)


def uses_log_scale(bars: Iterable[Bar]) -> bool:
    """Whether the rates drawn are more than :data:`LOG_SCALE_RATIO` apart."""
    rates = [b.rate for b in bars if b.rate is not None and b.rate > 0]
    return bool(rates) and max(rates) > LOG_SCALE_RATIO * min(rates)


def figure(bars: list[Bar], title: str) -> Any:
    """The matplotlib figure of ``bars`` (see the module's doc)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    queries = sorted({b.query for b in bars}, key=_query_order)
    contenders = list(dict.fromkeys(b.contender for b in bars))
    by_slot = {(b.query, b.contender): b for b in bars}
    log = uses_log_scale(bars)
    rates = [b.rate for b in bars if b.rate is not None and b.rate > 0]
    floor = min(rates) / 3 if log and rates else 0.0
    width = 0.8 / max(1, len(contenders))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.32 * len(queries) * max(2, len(contenders))),
                                    4.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    legend: list[Any] = []
    for i, contender in enumerate(contenders):
        color = colors[i % len(colors)]
        xs, heights, hatches = [], [], []
        for q, query in enumerate(queries):
            bar = by_slot.get((query, contender))
            if bar is None or bar.status == "UNSUPPORTED":
                continue
            x = q - 0.4 + width * (i + 0.5)
            if bar.rate is None or bar.rate <= 0:
                ax.text(x, floor if log else 0, bar.status, rotation=90, ha="center",
                        va="bottom", fontsize=7, color="firebrick")
                continue
            xs.append(x)
            heights.append(bar.rate)
            hatches.append(bar.status != "OK")
            if bar.status != "OK":
                ax.text(x, bar.rate, bar.status, rotation=90, ha="center", va="bottom",
                        fontsize=7, color="firebrick")
        drawn = ax.bar(xs, heights, width, color=color)
        for patch, failed in zip(drawn, hatches, strict=True):
            if failed:  # the contender's colour, hollow
                patch.set_hatch("//")
                patch.set_edgecolor(color)
                patch.set_facecolor("white")
        legend.append(Patch(facecolor=color, label=contender))
    if any(b.status != "OK" and b.rate for b in bars):
        legend.append(Patch(facecolor="white", edgecolor="grey", hatch="//",
                            label="wrong output (FAILED)"))
    top = max(rates, default=1.0)
    if log:
        ax.set_yscale("log")
        ax.set_ylim(floor or None, top * 4)  # room for the labels above the bars
    else:
        ax.set_ylim(0, top * 1.2)
        ax.yaxis.set_major_formatter(lambda value, _: f"{value:,.0f}")
    ax.set_xticks(range(len(queries)), queries)
    ax.set_xlim(-0.6, len(queries) - 0.4)
    ax.set_ylabel("events/s" + (" (log scale)" if log else ""))
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    if len(legend) > 1:
        ax.legend(handles=legend, fontsize=8)
    fig.tight_layout()
    return fig


def plot(bars: list[Bar], path: str | Path, title: str) -> Path:
    """Draw ``bars`` into the PNG ``path``; returns it.

    >>> plot([Bar("q0", "streamtable", "OK", 73260.1)], "nexmark.png",
    ...      "Nexmark, 1,000,000 events")                                   # doctest: +SKIP
    """
    import matplotlib.pyplot as plt

    fig = figure(bars, title)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.nexmark.plot", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", help="the runner's nexmark.json, or a results Markdown file")
    p.add_argument("--section", default=None,
                   help="Markdown: a part of the section's heading (default: the last)")
    p.add_argument("--out", required=True, help="the PNG to write")
    p.add_argument("--title", default=None, help="default: the section's heading")
    args = p.parse_args(argv)
    path = Path(args.results)
    if path.suffix == ".json":
        rows = json.loads(path.read_text())
        bars = bars_from_rows(rows)
        events = max((r.get("events", 0) for r in rows), default=0)
        heading = f"{events:,} events ({path.parent.name})"
    else:
        bars, heading = bars_from_markdown(path.read_text(), args.section)
    print(plot(bars, args.out, args.title or f"Nexmark: {heading}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
