"""A Python worker killed in the middle of a batch: Spark runs the task again, and its state is
applied once, not twice or half (the result equals the reference, the output has no repeat)."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
from tests.runtime.spark.kafka_util import new_topics, produce
from tests.runtime.spark.test_kafka_end_to_end import expected_counts
from tests.runtime.spark.test_kill_and_restart import WORDS
from tests.runtime.spark.word_count_cli import (
    APP_ID,
    CliRun,
    assert_exact_output,
    served_counts,
    write_app,
)

from streamtable.logs import LOG_FILE_NAME

pytestmark = pytest.mark.spark

DAEMON = b"streamtable.runtime.spark.process.daemon"
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


def _descends_from(pid: int, root: int) -> bool:
    while pid > 1:
        if pid == root:
            return True
        pid = _parent(pid)
    return False


def busy_python_workers(root: int) -> list[int]:
    """The Python workers of the application process ``root`` (forked by streamtable's worker
    daemon, not the daemon itself) that are working on a task right now (their CPU time
    grows). Other applications' workers on this machine are never touched."""
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    workers = [p for p in pids if DAEMON in _cmdline(p) and DAEMON in _cmdline(_parent(p))
               and _descends_from(p, root)]
    before = {p: _cpu_ticks(p) for p in workers}
    time.sleep(0.1)
    return [p for p in workers if _cpu_ticks(p) > before[p] >= 0]


def test_python_worker_killed_mid_batch_is_retried_without_double_state(bootstrap, tmp_path):
    rng = random.Random(11)
    src, out = new_topics(bootstrap, 2, "wk-lines", "wk-counts")
    state = tmp_path / "state"
    # batches big enough that a task runs for a while (a kill between tasks proves nothing)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))
             for _ in range(300_000)]
    for i in range(0, len(lines), 50_000):
        produce(bootstrap, src, [(None, line.encode()) for line in lines[i:i + 50_000]])
    expected = dict(expected_counts(lines))
    # local[2,4]: a failed task is tried up to four times, as on a cluster
    run = CliRun(write_app(tmp_path, src, out), bootstrap, state, "--master", "local[2,4]",
                 "--config", "max.records.per.batch=60000")
    killed = 0

    def spark_log() -> str:  # Spark's errors go to the application's log file
        path = state / APP_ID / LOG_FILE_NAME
        return path.read_text(errors="replace") if path.exists() else ""

    try:
        run.wait_for(lambda: run.batches_done() >= 1, 300, "the first batch")
        # kill workers working on later batches' tasks until one dies in a task (a kill can
        # land just after a task ended)
        while killed < 8 and CRASH not in spark_log() and served_counts(state) != expected:
            workers = busy_python_workers(run.proc.pid)
            if workers:
                try:
                    os.kill(rng.choice(workers), signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
                time.sleep(1.5)
        run.wait_for(lambda: served_counts(state) == expected, 300, "the whole input")
    finally:
        run.stop()
    assert CRASH in spark_log(), f"no kill landed in a task ({killed} kills): {run.text[-2000:]}"
    assert_exact_output(bootstrap, out, expected)
