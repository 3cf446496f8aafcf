"""A command line session that works prints what the user needs: no librdkafka lines (its
clients' log goes to Python logging), a created topic said once, "1 partition"."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _cli(*argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "streamtable.cli", *argv], input=stdin,
                          capture_output=True, text=True, timeout=120, env=env)


def test_topics_produce_consume_print_no_librdkafka_lines(bootstrap: str) -> None:
    topic = f"quiet-{uuid.uuid4().hex[:6]}"
    at = ["--bootstrap-servers", bootstrap]
    created = _cli("topics", "create", topic, *at)
    assert created.returncode == 0, created.stderr
    # said once, in the singular
    assert created.stdout == f"created topic {topic} (1 partition)\n"
    assert "created" not in created.stderr, created.stderr
    described = _cli("topics", "describe", topic, *at)
    assert described.stdout.splitlines()[0] == f"topic {topic}: 1 partition"
    produced = _cli("produce", topic, *at, stdin='"a"\t1\n"b"\t2\n')
    consumed = _cli("consume", topic, "--from-beginning", *at)
    assert consumed.stdout == "a\t1\nb\t2\n"
    listed = _cli("topics", "list", *at)
    for proc in (created, described, produced, consumed, listed):
        assert proc.returncode == 0, proc.stderr
        assert "%3|" not in proc.stderr and "rdkafka" not in proc.stderr, proc.stderr
    assert produced.stderr.count("\n") == 1 and "produced 2 records" in produced.stderr


def test_librdkafka_lines_are_log_records_seen_with_verbose() -> None:
    """A client that cannot connect: silent by default, its lines logged with -v."""
    code = ("import sys, logging\n"
            "from streamtable.logs import configure_logging\n"
            "configure_logging(verbose=len(sys.argv) > 1)\n"
            "from confluent_kafka import Producer\n"
            "from streamtable.kafka.client_log import with_client_log\n"
            "p = Producer(with_client_log({'bootstrap.servers': '127.0.0.1:1'}))\n"
            "p.poll(1.0)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60, env=env)
    verbose = subprocess.run([sys.executable, "-c", code, "-v"], capture_output=True,
                             text=True, timeout=60, env=env)
    assert quiet.returncode == verbose.returncode == 0, quiet.stderr + verbose.stderr
    assert quiet.stderr == ""
    assert "ERROR streamtable.librdkafka: FAIL [rdkafka#producer-1]" in verbose.stderr
    assert "Connection refused" in verbose.stderr and "%3|" not in verbose.stderr
