"""`streamtable run` from a user's seat: Ctrl-C stops it cleanly; a bad record stops it with
one readable line naming the record."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.runtime.spark.kafka_util import new_topics, produce

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]


def _app_file(tmp_path: Path, src: str, out: str, serdes: str) -> Path:
    app = tmp_path / "cli_app.py"
    app.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'examples' / 'word_count')!r})\n"
        "from app import build_topology as _build\n"
        f"config = {{'default.key.serde': {serdes!r}, 'default.value.serde': {serdes!r}}}\n"
        f"def build_topology():\n    return _build({src!r}, {out!r})\n")
    return app


def _run(app: Path, bootstrap: str, state: Path, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), STREAMTABLE_SPARK_LOG_LEVEL="ERROR")
    return subprocess.Popen(
        [sys.executable, "-m", "streamtable.cli", "run", str(app), "--bootstrap-servers",
         bootstrap, "--state-dir", str(state), "--development-broker", *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_ctrl_c_stops_cleanly(bootstrap: str, tmp_path: Path) -> None:
    src, out = new_topics(bootstrap, 2, "cli-lines", "cli-counts")
    produce(bootstrap, src, [(None, b"a b a")])
    proc = _run(_app_file(tmp_path, src, out, "string"), bootstrap, tmp_path / "state")
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + 180
    while not any(" records in " in line for line in lines):
        assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)[-3000:]
        lines.append(proc.stderr.readline())
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    err = "".join(lines) + rest
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert "StreamingQueryListenerBus" not in err
    assert "stopping" in err


def test_a_bad_record_stops_the_run_with_one_readable_paragraph(bootstrap: str,
                                                                tmp_path: Path) -> None:
    src, out = new_topics(bootstrap, 1, "cli-bad-lines", "cli-bad-counts")
    produce(bootstrap, src, [(b'"a"', b'"fine"'), (b'"b"', b"not json")])
    proc = _run(_app_file(tmp_path, src, out, "json"), bootstrap, tmp_path / "state",
                "--until-caught-up")
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, err[-3000:]
    ours = [line for line in err.splitlines() if line.startswith("streamtable: ")]
    assert len(ours) == 1, err[-3000:]
    # what failed, which record and operator, what to do, where the rest is
    assert "DeserializationError: cannot decode value" in ours[0]
    assert (f"topic='{src}' partition=0 offset=1 key='\"b\"' "
            "processor=KSTREAM-SOURCE-0000000000]") in ours[0]
    assert "What to do: " in ours[0] and "default.deserialization.exception.handler" in ours[0]
    log_file = tmp_path / "state" / "cli-app" / "streamtable.log"
    assert ours[0].endswith(f"Spark's full error is in {log_file.resolve()}.")
    # Spark's and py4j's stack traces are in that file, not on the console
    for java in ("at org.apache", "py4j", "Traceback"):
        assert java not in err, err[max(0, err.find(java) - 500):][:3000]
    logged = log_file.read_text()
    assert "at org.apache.spark" in logged and "py4j" in logged
    assert "streamtable.errors.DeserializationError" in logged
    # our own lines carry time, level and logger name, on the console and in the file
    started = [line for line in err.splitlines() if "started cli-app" in line]
    assert len(started) == 1 and " INFO streamtable.app: started" in started[0], err
    assert started[0][:4].isdigit()
    assert started[0] in logged
