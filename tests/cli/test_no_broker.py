"""Every command that talks to Kafka, with no broker at the address, fails at once with one
sentence naming the address and what to do."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamtable.kafka.broker import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_no_broker_is_one_sentence_within_seconds(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "streamtable.cli", "run",
         str(ROOT / "examples" / "word_count" / "app.py"), "--bootstrap-servers", address,
         "--state-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith(f"streamtable: cannot reach Kafka at {address} "
                                f"({address}: connection refused)"), proc.stderr
    assert "Traceback" not in proc.stderr and "KafkaException" not in proc.stderr
    # before Spark's JVM starts (about 20 s here) and without the Kafka client's retries (10 s
    # more): the bound leaves room for a loaded machine's imports
    assert took < 30, took


@pytest.mark.parametrize("command", [
    ["topics", "create", "lines"],
    ["topics", "list"],
    ["topics", "describe", "lines"],
    ["produce", "lines"],
    ["produce", "streams-plaintext-input", str(ROOT / "examples" / "word_count" / "app.py")],
    ["consume", "lines", "--from-beginning"],
    ["consume", "streams-wordcount-output", str(ROOT / "examples" / "word_count" / "app.py")],
], ids=["topics create", "topics list", "topics describe", "produce", "produce with app",
        "consume", "consume with app"])
def test_every_kafka_command_says_no_broker_in_a_line_at_once(command: list[str]) -> None:
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "streamtable.cli", *command, "--bootstrap-servers", address],
        input="a\tb\n", capture_output=True, text=True, timeout=60)
    took = time.monotonic() - started
    assert proc.returncode != 0, proc.stderr
    output = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(output) <= 3, output
    assert output[-1].startswith(f"streamtable: cannot reach Kafka at {address} "), output
    assert "--bootstrap-servers" in output[-1] and "streamtable broker" in output[-1]
    # the Kafka client would retry for ~10 s; the TCP check knows at once
    assert took <= 2.0, took


def test_query_needs_no_broker_and_says_there_is_no_state_yet(tmp_path: Path) -> None:
    """`query` reads the serving store, not Kafka: a closed port changes nothing, and with no
    state it says so in a line at once."""
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "streamtable.cli", "query",
         str(ROOT / "examples" / "word_count" / "app.py"), "counts-store", "kafka",
         "--bootstrap-servers", address, "--state-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=60)
    took = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr
    output = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(output) == 1 and "has not run yet" in output[0], output
    assert took <= 2.0, took
