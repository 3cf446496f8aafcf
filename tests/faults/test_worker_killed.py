"""A Python worker killed in the middle of a batch: Spark runs the task again, and its state is
applied once, not twice or half (the result equals the reference, the output has no repeat)."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest
from tests.spark.kafka_util import new_topics, produce
from tests.spark.test_kafka_end_to_end import expected_counts, output_counts
from tests.spark.test_kill_and_restart import WORDS, run_cli, write_app

from streamtable.serving import SqliteServingStore

pytestmark = pytest.mark.spark

DAEMON = b"streamtable.runtime.spark.daemon"
CRASH = "Python worker exited unexpectedly"


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return -1


def busy_python_workers() -> list[int]:
    """Spark's Python workers (forked by streamtable's worker daemon, not the daemon itself)
    that are working on a task right now (their CPU time grows)."""
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    workers = [p for p in pids if DAEMON in _cmdline(p) and DAEMON in _cmdline(_parent(p))]
    before = {p: _cpu_ticks(p) for p in workers}
    time.sleep(0.1)
    return [p for p in workers if _cpu_ticks(p) > before[p] >= 0]


def test_python_worker_killed_mid_batch_is_retried_without_double_state(bootstrap, tmp_path):
    rng = random.Random(11)
    src, out = new_topics(bootstrap, 2, "wk-lines", "wk-counts")
    app = write_app(tmp_path, src, out)
    state = tmp_path / "state"
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8))) for _ in range(6000)]
    produce(bootstrap, src, [(None, line.encode()) for line in lines])
    # local[2,4]: a failed task is tried up to four times, as on a cluster
    proc = run_cli(app, bootstrap, state, "--master", "local[2,4]",
                   "--config", "max.records.per.batch=1500")
    log: list[str] = []
    reader = threading.Thread(
        target=lambda: log.extend(line.decode() for line in proc.stderr),  # type: ignore
        daemon=True)
    reader.start()
    killed = 0
    try:
        deadline = time.monotonic() + 180
        while sum(" records in " in line for line in list(log)) < 1:
            assert proc.poll() is None and time.monotonic() < deadline, "".join(log)[-3000:]
            time.sleep(0.1)
        # kill workers working on later batches' tasks until one dies in a task (a kill can
        # land just after a task ended)
        while (killed < 8 and time.monotonic() < deadline
               and not any(CRASH in line for line in list(log))):
            workers = busy_python_workers()
            if workers:
                victim = rng.choice(workers)
                try:
                    os.kill(victim, signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
                time.sleep(1.5)
            else:
                time.sleep(0.05)
        expected = dict(expected_counts(lines))
        view = SqliteServingStore(state / "killed" / "serving.db").view("counts-store")
        while view.to_dict() != expected:
            assert proc.poll() is None, "".join(log)[-3000:]
            assert time.monotonic() < deadline + 120, "no progress: " + "".join(log)[-3000:]
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        reader.join(10)
    text = "".join(log)
    assert CRASH in text, f"no kill landed in a task ({killed} kills): {text[-2000:]}"
    per_word = output_counts(bootstrap, out)
    assert {w: seq[-1] for w, seq in per_word.items()} == expected
    for word, seq in per_word.items():
        assert seq == sorted(set(seq)), f"{word}: a count was produced twice or went back"
