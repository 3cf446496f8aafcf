"""The Nexmark plot on small fake results: grouped bars per query and contender, a log axis
when the rates are orders of magnitude apart, failed and unmeasured runs marked."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from bench.nexmark import plot
from bench.nexmark.plot import Bar, bars_from_markdown, bars_from_rows, figure, uses_log_scale

RESULTS = """# Nexmark results

Some prose | with a bar.

## streamtable alone, 1,000 events (2026-01-01 10:00 UTC)

| query | contender | events | events/s | events/s per core | wall s | CPU s | peak RSS MB | peak PSS MB | batches | output records | check |
|---|---|---|---|---|---|---|---|---|---|---|---|
| q0 | streamtable | 1,000 | 100 | 80 | 10.0 | 12.5 | 900 | 800 | 1 | 920 | ok |

## Nexmark, 2026-01-02 10:00

| query | contender | events | events/s | events/s per core | wall s | CPU s | peak RSS MB | peak PSS MB | batches | output records | check |
|---|---|---|---|---|---|---|---|---|---|---|---|
| q0 | streamtable | 1,000 | 73,260 | 46,296 | 13.7 | 21.6 | 1,338 | 1,023 | 1 | 920 | ok |
| q0 | bytewax | 1,000 | 1,500 | 1,400 | 0.7 | 0.7 | 200 | 180 | – | 920 | ok |
| q4 | streamtable | 1,000 | 60,716 | 38,168 | 16.5 | 26.2 | 2,691 | 2,375 | 1 | 5 | **FAILED** |
| q4 | bytewax | 1,000 | – | – | – | – | – | – | – | 0 | **TIMEOUT** |
| q10 | bytewax | 1,000 | – | – | – | – | – | – | – | 0 | **UNSUPPORTED** |

Not OK: q4 on streamtable.
"""  # noqa: E501


def test_the_markdown_section_is_read_by_its_heading_or_the_last() -> None:
    bars, heading = bars_from_markdown(RESULTS)
    assert heading == "Nexmark, 2026-01-02 10:00"
    assert bars == [Bar("q0", "streamtable", "OK", 73260.0), Bar("q0", "bytewax", "OK", 1500.0),
                    Bar("q4", "streamtable", "FAILED", 60716.0),
                    Bar("q4", "bytewax", "TIMEOUT", None),
                    Bar("q10", "bytewax", "UNSUPPORTED", None)]
    first, heading = bars_from_markdown(RESULTS, "1,000 events")
    assert heading.startswith("streamtable alone") and first == [
        Bar("q0", "streamtable", "OK", 100.0)]
    with pytest.raises(ValueError, match="no results table"):
        bars_from_markdown(RESULTS, "10,000,000 events")


def test_the_runners_rows_and_their_json_give_the_same_bars() -> None:
    rows = [SimpleNamespace(query="q0", contender="streamtable", status="OK", rate=5.0),
            SimpleNamespace(query="q1", contender="streamtable", status="TIMEOUT", rate=None)]
    as_json = json.loads(json.dumps([vars(r) for r in rows]))
    assert bars_from_rows(rows) == bars_from_rows(as_json) == [
        Bar("q0", "streamtable", "OK", 5.0), Bar("q1", "streamtable", "TIMEOUT", None)]


def test_rates_orders_of_magnitude_apart_are_drawn_on_a_log_axis() -> None:
    close = [Bar("q0", "a", "OK", 1000.0), Bar("q0", "b", "OK", 20_000.0)]
    apart = [Bar("q0", "a", "OK", 1000.0), Bar("q0", "b", "OK", 40_000.0)]
    assert not uses_log_scale(close) and uses_log_scale(apart)
    assert figure(close, "t").axes[0].get_yscale() == "linear"
    assert figure(apart, "t").axes[0].get_yscale() == "log"


def test_bars_are_grouped_per_query_and_failed_runs_are_marked() -> None:
    bars, _ = bars_from_markdown(RESULTS)
    fig = figure(bars, "Nexmark")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["q0", "q4", "q10"]
    assert ax.get_yscale() == "log"  # 73,260 against 1,500
    # one bar per measured run, q0's two side by side in their group
    heights = sorted((round(p.get_x() + p.get_width() / 2, 2), p.get_height())
                     for p in ax.patches)
    assert heights == [(-0.2, 73260.0), (0.2, 1500.0), (0.8, 60716.0)]
    failed = [p for p in ax.patches if p.get_height() == 60716.0][0]
    assert failed.get_hatch() == "//"
    labels = sorted(t.get_text() for t in ax.texts)
    assert labels == ["FAILED", "TIMEOUT"]  # the unsupported query is left empty
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "streamtable", "bytewax", "wrong output (FAILED)"]


def test_the_png_is_written_from_a_results_file(tmp_path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text(RESULTS)
    out = tmp_path / "plots" / "RESULTS.png"
    assert plot.main([str(results), "--out", str(out)]) == 0
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 5000
    rows = tmp_path / "nexmark.json"
    rows.write_text(json.dumps([{"query": "q0", "contender": "streamtable", "events": 1000,
                                 "status": "OK", "rate": 10.0}]))
    assert plot.main([str(rows), "--out", str(tmp_path / "run.png")]) == 0
    assert (tmp_path / "run.png").read_bytes().startswith(b"\x89PNG")


def test_a_run_of_some_queries_leaves_the_plot_beside_the_results_file(tmp_path) -> None:
    from bench.nexmark.runner import parse_args, plot_targets

    run = tmp_path / "run"
    out = str(tmp_path / "RESULTS.md")
    assert plot_targets(parse_args(["--out", out]), run) == [
        run / "nexmark.png", tmp_path / "RESULTS.png"]
    for some in (["--queries", "q15,q16"], ["--latency"]):
        assert plot_targets(parse_args(["--out", out, *some]), run) == [run / "nexmark.png"]
    assert plot_targets(parse_args([]), run) == [run / "nexmark.png"]
