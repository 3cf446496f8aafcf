"""The "not looking at Facebook" example as its README section runs it, on Spark: `python
examples/not_looking_at_facebook/app.py` starts a broker and the application and prints, from
the first tick on, a notification for each user whose Facebook is closed on every tick (2 s), and
per user the final count of each window as it closes — each count the number of that user's
notifications in the window."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
MESSAGE = "You are not currently viewing Facebook."
NOTIFICATION = re.compile(r"^(\d\d):(\d\d):(\d\d) notifications: (\w+): (.*)$")
COUNT = re.compile(r"^notification-counts: (\w+): (\d+) in \[(\d\d):(\d\d):(\d\d), "
                   r"(\d\d):(\d\d):(\d\d)\)$")


def _seconds(h: str, m: str, s: str) -> int:
    return int(h) * 3600 + int(m) * 60 + int(s)


def test_the_example_notifies_on_every_tick_and_counts_each_closed_window() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    done = subprocess.run([sys.executable, "examples/not_looking_at_facebook/app.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("starting a development broker and the application on Spark")
    assert lines[1].startswith("Facebook is closed for chris and sheryl (open for mark)")
    day = 24 * 3600
    start = None

    def at(h: str, m: str, s: str) -> int:
        # times of day, from the first one on (a run may cross midnight)
        t = _seconds(h, m, s)
        return t if start is None or t >= start - day // 2 else t + day

    ticks: dict[str, list[int]] = defaultdict(list)
    counts: list[tuple[str, int, int, int]] = []
    for line in lines[2:]:
        if (n := NOTIFICATION.match(line)) is not None:
            t = at(*n.groups()[:3])
            start = t if start is None else start
            assert n.group(5) == MESSAGE, line
            ticks[n.group(4)].append(t)
        elif (c := COUNT.match(line)) is not None:
            g = c.groups()
            counts.append((g[0], int(g[1]), at(*g[2:5]), at(*g[5:8])))
        else:
            raise AssertionError(f"unexpected line: {line!r}\n{done.stdout[-3000:]}")

    # from the first tick on, every tick notifies both closed users, and nobody else
    assert NOTIFICATION.match(lines[2]), "the first thing printed after the start is a tick"
    assert set(ticks) == {"chris", "sheryl"}, done.stdout[-3000:]
    assert ticks["chris"] == ticks["sheryl"]
    times = ticks["chris"]
    assert times == sorted(times) and len(set(times)) == len(times)
    # a tick every 2 s of wall-clock time (each batch's own clock, so 1 to 3 s apart)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert len(times) >= 10 and all(1 <= g <= 3 for g in gaps), times
    assert sum(gaps) / len(gaps) == pytest.approx(2, abs=0.3), gaps

    # per user one final count per 20-second window (hopping by 2 s), as each closes: the
    # number of that user's notifications in it; the run ends once a window opened after the
    # first tick (seen whole) was counted for each user
    assert {u for u, *_ in counts} == {"chris", "sheryl"}, done.stdout[-3000:]
    assert len({(u, s) for u, _, s, _ in counts}) == len(counts), "a window counted twice"
    for user, count, begin, end in counts:
        assert end - begin == 20 and begin % 2 == 0, (user, begin, end)
        assert end <= times[-1], "a window counted before a tick closed it"
        assert count == sum(1 for t in ticks[user] if begin <= t < end), (user, count, begin)
    for user in ("chris", "sheryl"):
        whole = [n for u, n, begin, _ in counts if u == user and begin >= times[0]]
        assert whole and whole[0] >= 9, (user, whole)

    noise = [line for line in done.stderr.splitlines()
             if line.startswith("%") or "rdkafka" in line or "incubator" in line]
    assert not noise, done.stderr[-3000:]
