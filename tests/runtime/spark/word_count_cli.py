"""Word count run by ``streamtable run`` in a child process, for the tests that kill, freeze
or starve it: start it, watch its log, wait for what it should do, stop it, check its result."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.runtime.spark.test_kafka_end_to_end import output_counts

from streamtable.serving import SqliteServingStore

ROOT = Path(__file__).resolve().parents[3]
APP_ID = "killed"


def write_app(path: Path, src: str, out: str) -> Path:
    app = path / "killed_app.py"
    app.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'examples' / 'word_count')!r})\n"
        "from app import build_topology as _build, config as _config\n"
        "config = dict(_config)\n"
        f"def build_topology():\n    return _build({src!r}, {out!r})\n"
    )
    return app


def run_cli(app: Path, bootstrap: str, state: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), STREAMTABLE_SPARK_LOG_LEVEL="ERROR")
    cmd = [sys.executable, "-m", "streamtable.cli", "run", str(app),
           "--bootstrap-servers", bootstrap, "--state-dir", str(state),
           "--application-id", APP_ID, "--development-broker",
           "--config", "max.records.per.batch=150", "--config", "commit.interval.ms=0",
           *extra]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


class CliRun:
    """A running ``streamtable run`` of word count and the lines of its log so far."""

    def __init__(self, app: Path, bootstrap: str, state: Path, *extra: str) -> None:
        self.state = state
        self.proc = run_cli(app, bootstrap, state, *extra)
        self.log: list[str] = []
        stderr = self.proc.stderr
        assert stderr is not None
        self._reader = threading.Thread(
            target=lambda: self.log.extend(line.decode() for line in stderr), daemon=True)
        self._reader.start()

    @property
    def text(self) -> str:
        return "".join(self.log)

    def batches_done(self) -> int:
        return sum(" records in " in line for line in list(self.log))

    def wait_for(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        """Wait until ``done()``, failing with the log if the run ends or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while not done():
            assert self.proc.poll() is None, f"{what}: the run ended\n{self.text[-3000:]}"
            assert time.monotonic() < deadline, f"{what}: no progress\n{self.text[-3000:]}"
            time.sleep(0.1)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)
        self.proc.wait(60)
        self._reader.join(10)


def served_counts(state: Path) -> dict[str, int]:
    """The counts the application serves (its SQLite serving store under ``state``)."""
    counts: dict[str, int] = SqliteServingStore(state / APP_ID / "serving.db").view(
        "counts-store").to_dict()
    return counts


def assert_exact_output(bootstrap: str, out: str, expected: dict[str, int]) -> None:
    """The output topic's last count per word is the expected one, and no word's counts repeat
    or go back (nothing produced twice)."""
    per_word = output_counts(bootstrap, out)
    assert {w: seq[-1] for w, seq in per_word.items()} == expected
    for word, seq in per_word.items():
        assert seq == sorted(set(seq)), f"{word}: a count was produced twice or went back"
