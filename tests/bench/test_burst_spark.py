"""``python -m bench.burst`` end to end at tiny rates: streamtable live on the development
broker through a short burst; the report has every figure and the result check passes."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from bench.burst_series import SERIES_COLUMNS

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a bench run: make bench-burst's harness end to end
def test_a_short_burst_run_reports_every_figure_and_the_right_result(tmp_path):
    out = tmp_path / "RESULTS.md"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.burst", "--rate", "200", "--warmup", "1", "--steady",
         "4", "--burst", "2", "--recover", "6", "--drain", "60", "--recovery-window", "2",
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = ROOT / re.search(r"data and logs in (\S+)", proc.stdout)[1]  # type: ignore[index]
    (run,) = json.loads((run_dir / "burst.json").read_text())

    assert run["result"] == {"topic": "ok", "store": "ok", "reread_ok": None}
    assert run["sent"] == run["records"] == 200 * (1 + 4 + 6) + 2000 * 2
    for period in ("steady", "burst", "after"):
        lat = run["latency"][period]
        assert lat["probes"] > 0 and lat["missing"] == 0, period
        assert 0 < lat["p50_ms"] <= lat["p99_ms"] <= lat["max_ms"], period
        assert run["batches"][period]["batches"] > 0, period
        assert run["batches"][period]["max_records"] > 0, period
    for span in ("steady", "burst_and_after"):
        mem = run["memory"][span]
        assert mem["samples"] > 0, span
        assert 0 < mem["workers_pss_mb"] < mem["pss_mb"] <= mem["rss_mb"], span
    assert run["recovery"]["threshold_ms"] == pytest.approx(
        1.5 * run["latency"]["steady"]["p99_ms"], abs=0.1)
    assert "seconds" in run["recovery"] and run["backlog"]["max_waiting"] is not None

    text = out.read_text()
    assert text.startswith("\n## Burst: 200 → 2,000 → 200 records/s")
    rows = [ln for ln in text.splitlines() if ln.startswith(("| steady", "| burst", "| after"))]
    assert len(rows) == 3
    assert all("–" not in r for r in rows), rows  # no figure left out
    assert re.search(r"\* Recovery: (\d+\.\d s after the burst|not within the \d+ s observed)"
                     r" \(threshold [\d,]+ ms\)", text)
    assert "output topic ok, queryable store ok — every count as expected" in text
    assert "Reading: " in text

    series = tmp_path / "burst" / f"{run_dir.name}-w1.csv"
    with open(series, newline="") as fh:
        data = list(csv.DictReader(fh))
    assert tuple(data[0]) == SERIES_COLUMNS
    assert {r["phase"] for r in data} >= {"warm-up", "steady", "burst", "after"}
    assert sum(int(r["probes_sent"]) for r in data) == run["records"] // 20
