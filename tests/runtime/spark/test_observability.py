"""A running application's /health and /metrics, on a real query and a real HTTP server: the
counts equal what the topics hold; once the query dies, /health and the stores answer 503 with
its error."""

from __future__ import annotations

import logging
import re
import time

import httpx
import pytest
from tests.runtime.spark.kafka_util import new_topics, produce, read_all

from streamtable.cli import load_app
from streamtable.kafka.broker import free_port
from streamtable.runtime.spark.app import StreamsApp
from streamtable.serving.http import serve_queries

pytestmark = pytest.mark.spark

SAMPLE = re.compile(r'^([a-z_]+)\{([^}]*)\} (\S+)$')


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, line
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
        out[(match.group(1), labels)] = float(match.group(3))
    return out


def _wait(condition, what: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def _progress_records(caplog: pytest.LogCaptureFixture, app_id: str) -> int:
    """The records the progress lines of ``app_id``'s query report, summed."""
    found = (re.search(r" batch \d+: (\d+) records in ", r.getMessage())
             for r in caplog.records if r.name == "streamtable.progress"
             and r.getMessage().startswith(app_id))
    return sum(int(m.group(1)) for m in found if m)


def test_health_and_metrics_of_a_running_then_failed_app(spark, bootstrap, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="streamtable.progress")
    wc = load_app("examples/word_count/app.py")
    src, out, dlq = new_topics(bootstrap, 2, "obs-lines", "obs-counts", "obs-dlq")
    lines = [b'"a b a"', b'"c"', b'"b c"', b'not json', b'"a"']
    produce(bootstrap, src, [(None, v) for v in lines])
    app_id = f"obs-{src}"
    app = StreamsApp(wc.build_topology(src, out), app_id, bootstrap, state_dir=tmp_path,
                     spark=spark, development_broker=True,
                     config={"errors.dead.letter.queue.topic.name": dlq,
                             "processing.exception.handler": "fail",
                             "commit.interval.ms": 200})
    app.start()
    server = serve_queries(app, "127.0.0.1", free_port())
    try:
        app_label = ("application_id", app_id)
        _wait(lambda: app.metrics.records_in == len(lines) and app.metrics.total_lag == 0
              and _progress_records(caplog, app_id) == len(lines),
              "the records to be processed and their progress reported")
        health = httpx.get(f"{server.url}/health", timeout=10)
        assert health.status_code == 200, health.text
        assert health.json()["status"] == "running" and health.json()["lag"] == 0

        response = httpx.get(f"{server.url}/metrics", timeout=10)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
        samples = _samples(response.text)

        def value(name: str, **labels: str) -> float:
            return samples[(name, frozenset({app_label, *labels.items()}))]

        assert value("streamtable_records_in_total", topic=src) == len(lines)
        # every record the tasks wrote is in the output topic (exactly once), and counted
        assert value("streamtable_records_out_total", topic=out) == len(read_all(bootstrap, out))
        assert value("streamtable_records_out_total", topic=dlq) == 1 == len(read_all(bootstrap,
                                                                                      dlq))
        assert value("streamtable_records_dead_lettered_total") == 1
        assert value("streamtable_records_dropped_total", reason="error") == 1
        assert value("streamtable_lag_records", topic=src, partition="0") == 0
        assert value("streamtable_lag_records", topic=src, partition="1") == 0
        assert value("streamtable_state_entries", store="counts-store") == 3  # a, b, c
        assert value("streamtable_batches_total") >= 1
        assert value("streamtable_batch_duration_seconds_total") > 0
        assert httpx.get(f"{server.url}/stores/counts-store/keys/a",
                         timeout=10).json()["value"] == 3

        # a JSON number is not a line: split_words raises, and the handler says fail
        produce(bootstrap, src, [(None, b"5")])
        _wait(lambda: not app.is_running, "the query to die")
        health = httpx.get(f"{server.url}/health", timeout=10)
        assert health.status_code == 503
        assert health.json()["status"] == "failed"
        error = health.json()["error"]
        assert "ProcessingError: AttributeError" in error and f"topic='{src}'" in error
        assert "What to do: fix the operator's function" in error
        store = httpx.get(f"{server.url}/stores/counts-store/keys/a", timeout=10)
        assert store.status_code == 503 and store.json()["detail"] == error
    finally:
        server.stop()
        app.stop()
