"""Prometheus' text exposition of an application's metrics, and the terminal progress line."""

from __future__ import annotations

import io
import math
import re

from streamtable.logs import ProgressLine
from streamtable.serving.metrics import AppMetrics, Family, exposition

# a sample line of the text format: name, optional labels, value
LINE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_]\w*="([^"\\\n]|\\[\\"n])*",?)*\})? '
                  r'(-?[0-9.e+]+|NaN|[+-]Inf)$')


def test_label_values_are_escaped_and_numbers_rendered() -> None:
    text = exposition([
        Family("x_total", "help with \\ and\nnewline", "counter", [
            ({"topic": 'quo"te', "path": "back\\slash", "nl": "a\nb"}, 3.0),
            ({"topic": "plain"}, 0.25),
        ]),
        Family("g", "gauge", "gauge", [({}, math.nan), ({"k": "v"}, math.inf),
                                       ({"k": "w"}, -math.inf), ({"k": "big"}, 2**60)]),
    ])
    lines = text.splitlines()
    assert lines[0] == "# HELP x_total help with \\\\ and\\nnewline"
    assert lines[1] == "# TYPE x_total counter"
    assert lines[2] == 'x_total{topic="quo\\"te",path="back\\\\slash",nl="a\\nb"} 3'
    assert lines[3] == 'x_total{topic="plain"} 0.25'
    assert lines[6:] == ["g NaN", 'g{k="v"} +Inf', 'g{k="w"} -Inf', f'g{{k="big"}} {2**60}']
    assert text.endswith("\n")
    for line in lines:
        assert line.startswith("#") or LINE.match(line), line


def test_app_metrics_sum_batches_and_keep_the_latest_lag() -> None:
    m = AppMetrics("app")
    m.record_batch(0.5, {"records_in:lines": 3, "records_out:counts": 2, "dropped:null key": 1})
    m.record_batch(0.25, {"records_in:lines": 2, "records_in:other": 1, "dead_lettered": 1})
    m.record_lag({("lines", 0): 5, ("lines", 1): 0})
    m.record_lag({("lines", 0): 2, ("lines", 1): 1})
    assert m.records_in == 6 and m.total_lag == 3 and m.batches == 2
    text = exposition(m.families({"counts-store": 4}))
    for line in text.splitlines():
        assert line.startswith("#") or LINE.match(line), line
    samples = [line for line in text.splitlines() if not line.startswith("#")]
    assert samples == [
        'streamtable_batches_total{application_id="app"} 2',
        'streamtable_batch_duration_seconds_total{application_id="app"} 0.75',
        'streamtable_last_batch_duration_seconds{application_id="app"} 0.25',
        'streamtable_records_in_total{application_id="app",topic="lines"} 5',
        'streamtable_records_in_total{application_id="app",topic="other"} 1',
        'streamtable_records_out_total{application_id="app",topic="counts"} 2',
        'streamtable_records_dropped_total{application_id="app",reason="null key"} 1',
        'streamtable_records_dead_lettered_total{application_id="app"} 1',
        'streamtable_lag_records{application_id="app",topic="lines",partition="0"} 2',
        'streamtable_lag_records{application_id="app",topic="lines",partition="1"} 1',
        'streamtable_state_entries{application_id="app",store="counts-store"} 4',
    ]
    # every family is declared once, before its samples
    types = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    assert len(types) == len(set(types)) == 9


def test_the_progress_line_rewrites_itself() -> None:
    m = AppMetrics("app")
    out = io.StringIO()
    line = ProgressLine(m, out)
    line.update()
    m.record_batch(0.1, {"records_in:t": 10})
    m.record_lag({("t", 0): 7})
    line.update()
    line.update()  # unchanged: not written again
    m.record_batch(0.1, {"records_in:t": 0})  # an empty batch keeps the rate of the last one
    m.record_lag({("t", 0): 0})
    line.done()
    written = out.getvalue()
    assert written.count("\r\033[K") == 3 and written.endswith("\n")
    assert written.split("\r\033[K")[1:] == [
        "app: 0 batches, 0 records",  # no rate before the first batch, not "0 records/s"
        "app: 1 batch, 10 records (100 records/s), 7 behind",
        "app: 2 batches, 10 records (100 records/s), 0 behind\n"]
