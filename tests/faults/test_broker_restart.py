"""The development broker keeps its topics in S3 (a local moto server), is killed (kill -9)
mid-run and started again: the application waits, resumes, and its table and output equal the
test driver's, nothing lost, nothing doubled (slow: make soak)."""

from __future__ import annotations

import os
import re
import signal
import struct
import sys
import time
from pathlib import Path

import pytest
from tests.cluster.cluster import s3_server
from tests.runtime.spark.kafka_util import new_topics, produce, read_partitions
from tests.runtime.spark.word_count_cli import CliRun, served_counts, write_app

from streamtable import TopologyTestDriver
from streamtable.kafka.broker import EmbeddedBroker

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DOWN_S = 15


def _lines(n: int, salt: str) -> list[str]:
    words = "kafka streams spark table stream join window state store topic".split()
    return [" ".join(words[(i * 5 + j) % len(words)] for j in range(1 + i % 5)) + f" {salt}"
            for i in range(n)]


def _driver_counts(src: str, out: str, lines: list[str]) -> dict[str, int]:
    sys.path.insert(0, str(ROOT / "examples" / "word_count"))
    from app import build_topology, config

    driver = TopologyTestDriver(build_topology(src, out), config)
    topic = driver.create_input_topic(src)
    for line in lines:
        topic.pipe_input(None, line)
    counts: dict[str, int] = driver.get_key_value_store("counts-store").to_dict()
    return counts


def test_broker_killed_and_restarted_on_s3_storage_mid_run_then_exact_result(
        tmp_path, monkeypatch):
    with s3_server(log_dir=tmp_path) as s3:
        for key, value in s3.env.items():
            monkeypatch.setenv(key, value)
        with EmbeddedBroker(storage_engine=f"s3://{s3.bucket}/") as broker:
            bootstrap = broker.bootstrap_servers
            src, out = new_topics(bootstrap, 2, "restart-lines", "restart-counts")
            state = tmp_path / "state"
            first, second = _lines(1500, "before"), _lines(1500, "after")
            produce(bootstrap, src, [(None, line.encode()) for line in first])
            # Tansu on S3 answers a fetch with nothing when its wait ends before it has read the
            # partition's objects (see streamtable.kafka.broker)
            run = CliRun(write_app(tmp_path, src, out), bootstrap, state,
                         "--config", "kafka.fetch.wait.max.ms=500")
            expected = _driver_counts(src, out, first + second)
            try:
                run.wait_for(lambda: run.batches_done() >= 2, 300, "the first batches")
                # killed while batches are being read, computed and written
                os.kill(broker.pid, signal.SIGKILL)
                assert broker._process is not None and broker._process.wait(10) == -9
                time.sleep(DOWN_S)
                assert run.proc.poll() is None, run.text[-3000:]
                broker.start()  # the same port and storage: the topics as acknowledged
                produce(bootstrap, src, [(None, line.encode()) for line in second])
                run.wait_for(lambda: served_counts(state).get("after") == expected["after"],
                             300, "the records produced after the restart")
                run.wait_for(lambda: served_counts(state) == expected, 120, "every count")
            finally:
                run.stop()
            # the run waited through the outage: one batch spans it (librdkafka's retries, or
            # streamtable's own "waiting for Kafka" when a wait outlasts them)
            seconds = [float(m) for m in re.findall(r" records in ([0-9.]+) s", run.text)]
            assert max(seconds) >= DOWN_S - 1 or "waiting for Kafka" in run.text, \
                run.text[-3000:]
            assert served_counts(state) == expected
            # the output topic: the last count per word is the driver's, none produced twice
            per_word: dict[str, list[int]] = {}
            for msgs in read_partitions(bootstrap, out, fetch_wait_ms=500).values():
                for m in msgs:
                    per_word.setdefault(m.key().decode(), []).append(
                        struct.unpack(">q", m.value())[0])
            assert {w: seq[-1] for w, seq in per_word.items()} == expected
            for word, seq in per_word.items():
                assert seq == sorted(set(seq)), f"{word}: a count was produced twice or went back"
