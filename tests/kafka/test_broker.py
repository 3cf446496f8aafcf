"""The embedded broker and topic administration, against the real Tansu binary."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from streamtable.kafka import admin
from streamtable.kafka.broker import (
    EmbeddedBroker,
    development_producer_config,
    free_port,
    tansu_binary,
)

SRC = Path(__file__).resolve().parents[2] / "src"


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_binary_is_found_and_executable() -> None:
    path = tansu_binary()
    assert path.name == "tansu"
    assert os.access(path, os.X_OK)
    out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    assert out.stdout.strip().startswith("tansu 0.6")


def test_broker_lifecycle_and_context_manager(tmp_path: Path) -> None:
    log = tmp_path / "broker.log"
    with EmbeddedBroker(log_path=log) as broker:
        assert broker.is_running()
        assert broker.bootstrap_servers == f"127.0.0.1:{broker.port}"
        assert _port_open(broker.port)
        metadata = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(
            timeout=5
        )
        assert metadata.cluster_id == "streamtable-dev"
        assert [b.port for b in metadata.brokers.values()] == [broker.port]
        port = broker.port
    assert not broker.is_running()
    assert not _port_open(port)
    assert log.read_text().strip(), "broker log is written to the given file"
    broker.stop()  # idempotent


def test_round_trip_through_session_broker(bootstrap: str, new_topic) -> None:
    topic = new_topic(1)
    producer = Producer({"bootstrap.servers": bootstrap, **development_producer_config()})
    for i in range(3):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0)
    assert producer.flush(10) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "t", "enable.partition.eof": True}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            break
        got.append((msg.offset(), msg.key(), msg.value()))
    consumer.close()
    assert got == [(0, b"k0", b"v0"), (1, b"k1", b"v1"), (2, b"k2", b"v2")]
    # With one record per batch (development broker profile) ListOffsets is exact.
    wm = Consumer({"bootstrap.servers": bootstrap, "group.id": "t"}).get_watermark_offsets(
        TopicPartition(topic, 0), timeout=10
    )
    assert wm == (0, 3)


def test_module_cli_runs_a_broker_until_terminated(tmp_path: Path) -> None:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamtable.kafka.broker",
            "--port",
            str(port),
            "--log-file",
            str(tmp_path / "cli.log"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while not _port_open(port):
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline
            time.sleep(0.05)
        admin.ensure_topics(f"127.0.0.1:{port}", {"cli-topic": 3})
        assert admin.partition_counts(f"127.0.0.1:{port}", ["cli-topic"]) == {"cli-topic": 3}
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == 0, output
    assert f"bootstrap.servers=127.0.0.1:{port}" in output
    assert not _port_open(port)


def test_ensure_topics_creates_missing_and_is_idempotent(bootstrap: str) -> None:
    suffix = str(time.monotonic_ns())
    a, b = f"ens-a-{suffix}", f"ens-b-{suffix}"
    assert admin.ensure_topics(bootstrap, {a: 2}) == {a: 2}
    # a exists (kept as it is even if another count is asked for), b is created
    assert admin.ensure_topics(bootstrap, {a: 5, b: 3}) == {a: 2, b: 3}
    assert admin.partition_counts(bootstrap, [b, a]) == {b: 3, a: 2}
    admin.delete_topics(bootstrap, [a, b])
    assert a not in admin.list_topic_names(bootstrap)
    assert b not in admin.list_topic_names(bootstrap)


def test_missing_topic_errors_name_the_topic(bootstrap: str) -> None:
    name = f"nope-{time.monotonic_ns()}"
    with pytest.raises(admin.TopicNotFoundError) as info:
        admin.partition_counts(bootstrap, [name])
    assert info.value.topic == name
    assert repr(name) in str(info.value)
    # the lookup must not have auto-created it (Tansu auto-creates on a named metadata request)
    assert name not in admin.list_topic_names(bootstrap)
    with pytest.raises(admin.TopicNotFoundError, match=name):
        admin.delete_topics(bootstrap, [name], missing_ok=False)
    admin.delete_topics(bootstrap, [name])  # missing_ok by default


def test_ensure_topics_rejects_bad_partition_count(bootstrap: str) -> None:
    with pytest.raises(ValueError, match="bad-count"):
        admin.ensure_topics(bootstrap, {"bad-count": 0})
