"""The broker unreachable for a minute in the middle of a run: the application waits for it,
says what it waits for, and resumes with nothing lost and nothing doubled (slow: make soak)."""

from __future__ import annotations

import os
import signal
import time

import pytest
from tests.runtime.spark.kafka_util import new_topics, produce
from tests.runtime.spark.test_kafka_end_to_end import expected_counts
from tests.runtime.spark.word_count_cli import CliRun, assert_exact_output, served_counts, write_app

from streamtable.kafka.broker import EmbeddedBroker

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
        state = tmp_path / "state"
        first, second = _lines(1500, "before"), _lines(1500, "after")
        produce(bootstrap, src, [(None, line.encode()) for line in first])
        run = CliRun(write_app(tmp_path, src, out), bootstrap, state)
        expected = dict(expected_counts(first + second))
        try:
            run.wait_for(lambda: run.batches_done() >= 2, 300, "the first batches")
            # frozen while batches are still being planned, read and written
            os.kill(broker.pid, signal.SIGSTOP)
            try:
                time.sleep(OUTAGE_S)
                assert run.proc.poll() is None, run.text[-3000:]
            finally:
                os.kill(broker.pid, signal.SIGCONT)
            produce(bootstrap, src, [(None, line.encode()) for line in second])
            run.wait_for(lambda: served_counts(state).get("after") == expected["after"], 300,
                         "the records produced after the outage")
        finally:
            run.stop()
        said = [line for line in run.log if "Kafka" in line or "WARN" in line]
        assert "waiting for Kafka" in run.text, "".join(said)[-3000:] or run.text[-3000:]
        assert served_counts(state) == expected
        assert_exact_output(bootstrap, out, expected)
