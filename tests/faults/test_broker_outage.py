"""The broker unreachable for a minute in the middle of a run: the application waits for it,
says what it waits for, and resumes with nothing lost and nothing doubled (slow: make soak)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from tests.spark.kafka_util import new_topics, produce
from tests.spark.test_kafka_end_to_end import expected_counts, output_counts
from tests.spark.test_kill_and_restart import run_cli, write_app

from streamtable.kafka.broker import EmbeddedBroker
from streamtable.serving import SqliteServingStore

pytestmark = [pytest.mark.spark, pytest.mark.slow]

OUTAGE_S = 60


def _lines(n: int, salt: str) -> list[str]:
    words = "kafka streams spark table stream join window state store topic".split()
    return [" ".join(words[(i * 7 + j) % len(words)] for j in range(1 + i % 5)) + f" {salt}"
            for i in range(n)]


def test_broker_frozen_for_a_minute_mid_run_then_exact_result(tmp_path):
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        src, out = new_topics(bootstrap, 2, "outage-lines", "outage-counts")
        app = write_app(tmp_path, src, out)
        state = tmp_path / "state"
        first, second = _lines(1500, "before"), _lines(1500, "after")
        produce(bootstrap, src, [(None, line.encode()) for line in first])
        proc = run_cli(app, bootstrap, state)
        log: list[str] = []
        reader = threading.Thread(
            target=lambda: log.extend(line.decode() for line in proc.stderr),  # type: ignore
            daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 120
            while sum(" records in " in line for line in list(log)) < 2:
                assert proc.poll() is None, "".join(log)[-3000:]
                assert time.monotonic() < deadline, "no progress: " + "".join(log)[-3000:]
                time.sleep(0.1)
            # frozen while batches are still being planned, read and written
            os.kill(broker.pid, signal.SIGSTOP)
            try:
                time.sleep(OUTAGE_S)
                assert proc.poll() is None, "".join(log)[-3000:]
            finally:
                os.kill(broker.pid, signal.SIGCONT)
            produce(bootstrap, src, [(None, line.encode()) for line in second])
            expected = dict(expected_counts(first + second))
            view = SqliteServingStore(state / "killed" / "serving.db").view("counts-store")
            deadline = time.monotonic() + 300
            while view.get("after") != expected["after"]:
                assert proc.poll() is None, "".join(log)[-3000:]
                assert time.monotonic() < deadline, "no progress: " + "".join(log)[-3000:]
                time.sleep(0.5)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
            reader.join(10)
        text = "".join(log)
        said = [line for line in text.splitlines() if "Kafka" in line or "WARN" in line]
        assert "waiting for Kafka" in text, "\n".join(said)[-3000:] or text[-3000:]
        assert view.to_dict() == expected
        per_word = output_counts(bootstrap, out)
        assert {w: seq[-1] for w, seq in per_word.items()} == expected
        for word, seq in per_word.items():
            assert seq == sorted(set(seq)), f"{word}: a count was produced twice or went back"
