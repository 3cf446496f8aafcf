"""The "not looking at Facebook" example as its README section runs it: `python
examples/not_looking_at_facebook/app.py` starts a broker and the application, and prints the
notifications (only for users whose Facebook is closed) and one final count per window."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]


def test_the_example_notifies_closed_users_and_counts_final_windows():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    done = subprocess.run([sys.executable, "examples/not_looking_at_facebook/app.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    notified = {line.split(": ")[1] for line in lines if line.startswith("notifications: ")}
    assert notified == {"sheryl", "chris"}, done.stdout[-3000:]
    assert all(line.endswith("You are not currently viewing Facebook.")
               for line in lines if line.startswith("notifications: "))
    counts = [(line.split(": ")[1], json.loads(line.split(": ", 2)[2]))
              for line in lines if line.startswith("notification-counts: ")]
    assert {user for user, _ in counts} == {"sheryl", "chris"}, done.stdout[-3000:]
    for _user, final in counts:  # one final count per closed window, never a running one
        assert final["end"] - final["start"] == 20_000 and final["notifications"] >= 1, final
    assert len({(u, f["start"]) for u, f in counts}) == len(counts), "a window counted twice"
