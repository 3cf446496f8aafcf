"""The demo's smoke run, end to end: HTTP, the broker, Spark and a real SMTP server here.

``make demo ARGS=--once`` is run against this test's own SMTP server: the server must receive
exactly the two expected weekly emails — and none again after the demo restarts the service in
the same week — and the run's stderr must hold none of the noise of librdkafka, the JVM or uvicorn.
"""

from __future__ import annotations

import email
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller

from streamtable.kafka.broker import free_port

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


class Recorder:
    def __init__(self) -> None:
        self.messages: list[email.message.Message] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802
        self.messages.append(email.message_from_bytes(envelope.content))
        return "250 OK"


def test_demo_once_sends_exactly_the_expected_emails_and_none_after_restart(tmp_path):
    recorder = Recorder()
    smtp = Controller(recorder, hostname="127.0.0.1", port=free_port())
    smtp.start()
    try:
        env = dict(os.environ, SMTP_HOST="127.0.0.1", SMTP_PORT=str(smtp.port),
                   PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
        proc = subprocess.run(
            [sys.executable, "-m", "examples.share_holders.demo", "--once",
             "--state-dir", str(tmp_path / "state")],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )
    finally:
        smtp.stop()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "  client1    [1, 3]\n  client2    [4]\n" in out
    assert "  client1    [1]\n  client3    [3]\n" in out
    assert "demo OK" in out
    # a run that works prints only what the user needs: no librdkafka lines at shutdown, no
    # JVM start-up warning, no HTTP access lines
    noise = [line for line in proc.stderr.splitlines()
             if line.startswith("%") or "rdkafka" in line or "incubator" in line
             or "uvicorn" in line or '" 20' in line]
    assert not noise, proc.stderr[-3000:]
    received = sorted((m["To"], m.get_payload(decode=True).decode()) for m in recorder.messages)
    assert [to for to, _ in received] == ["client1@example.com", "client3@example.com"]
    body1, body3 = received[0][1], received[1][1]
    assert "AAPL    Apple Inc.  100" in body1 and "FB" not in body1 and "VOD" not in body1
    assert "FB      Meta Platforms  33" in body3 and "AAPL" not in body3
