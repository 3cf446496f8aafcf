"""streamtable on a real Spark standalone cluster: two workers that share no local disk, task
state on S3 (moto's server), the real broker; one worker killed mid-run. Final tables and
outputs equal the test driver's; a worker-local state location is refused at start."""

from __future__ import annotations

import json
import logging
import os
import random
import struct
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.cluster.cluster import S3Server, SparkCluster, cluster_spark_session, wait_until
from tests.runtime.spark.kafka_util import new_topics, produce, read_partitions

from streamtable import TopologyTestDriver
from streamtable.runtime.spark import StreamsApp
from streamtable.runtime.spark.placement import SharedLocationError

pytestmark = pytest.mark.cluster
log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
WORDS = "kafka streams spark table stream join window state store topic partition".split()
TICKERS = ["AAPL", "FB", "VOD", "BP", "TSLA"]
EXCHANGES = ["NASDAQ", "NYSE", "LON"]


def _example(name: str) -> Any:
    sys.path.insert(0, str(ROOT))
    import importlib

    return importlib.import_module(f"examples.{name}")


@pytest.fixture(scope="module")
def session(cluster: SparkCluster, s3: S3Server) -> Iterator[Any]:
    """streamtable's session on the cluster; the driver reaches S3 like the executors."""
    os.environ.update(s3.env)
    conf = {"spark.sql.streaming.stopTimeout": "60s",
            # a lost executor's tasks are retried elsewhere; do not give up on the stage
            "spark.task.maxFailures": "8"}
    with cluster_spark_session(cluster, s3, conf=conf) as spark:
        yield spark


def _app(topology: Any, name: str, session: Any, bootstrap: str, tmp_path: Path,
         location: str, **config: Any) -> StreamsApp:
    settings = {"state.location": location, "max.records.per.batch": 400,
                "commit.interval.ms": 0, **config}
    return StreamsApp(topology, name, bootstrap, state_dir=tmp_path / "driver-state",
                      config=settings, spark=session, development_broker=True)


def _run_with_a_worker_killed(app: StreamsApp, cluster: SparkCluster,
                              feed: Any, rounds: int) -> dict[str, Any]:
    """Start ``app``, feed input in ``rounds``; after the first round's batches started, kill
    worker 1 as a machine dies, go on with worker 0 alone, then bring worker 1 back (an
    empty disk) and finish; return what happened."""
    app.start()
    facts: dict[str, Any] = {}
    try:
        feed(0)
        wait_until(lambda: app.batches >= 2, 240, "two batches on the cluster")
        killed_after = app.batches
        victims = cluster.kill_worker(1)
        facts["killed_after_batches"] = killed_after
        facts["killed_processes"] = sorted({v.split()[0] for v in victims.values()})
        for r in range(1, rounds):
            feed(r)
        wait_until(lambda: app.batches >= killed_after + 2, 300,
                   "batches on the surviving worker")
        facts["batches_with_one_worker"] = app.batches - killed_after
        restarted = threading.Thread(target=cluster.restart_worker, args=(1,), daemon=True)
        restarted.start()
        app.process_all_available()
        restarted.join(180)
        facts["batches"] = app.batches
    finally:
        app.stop()
    return facts


def test_word_count_on_two_workers_with_state_on_s3_survives_a_lost_worker(
        cluster: SparkCluster, s3: S3Server, session: Any, bootstrap: str,
        tmp_path: Path) -> None:
    word_count = _example("word_count.app")
    src, out = new_topics(bootstrap, 2, "cluster-lines", "cluster-counts")
    rng = random.Random(11)
    rounds = [[" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))
               for _ in range(1200)] for _ in range(3)]

    def feed(r: int) -> None:
        produce(bootstrap, src, [(None, line.encode()) for line in rounds[r]])

    app = _app(word_count.build_topology(src, out), "wc-cluster", session, bootstrap, tmp_path,
               s3.uri("state"), **word_count.config, **{"default.dsl.store": "rocksDB"})
    facts = _run_with_a_worker_killed(app, cluster, feed, len(rounds))
    log.info("word count on the cluster: %s", facts)

    driver = TopologyTestDriver(word_count.build_topology(src, out), word_count.config)
    lines = driver.create_input_topic(src)
    for chunk in rounds:
        for line in chunk:
            lines.pipe_input(None, line)
    final = driver.get_key_value_store("counts-store").to_dict()
    assert final and app.store("counts-store").to_dict() == final
    per_word: dict[str, list[int]] = {}
    for msgs in read_partitions(bootstrap, out).values():
        for m in msgs:
            per_word.setdefault(m.key().decode(), []).append(struct.unpack(">q", m.value())[0])
    assert {w: seq[-1] for w, seq in per_word.items()} == final
    for word, seq in per_word.items():
        assert seq == sorted(set(seq)), f"{word}: a count was produced twice or went back"
    # the state is on S3, not on any worker's disk
    objects = s3.filesystem().get_file_info(
        __import__("pyarrow.fs").fs.FileSelector(f"{s3.bucket}/state/wc-cluster",
                                                 recursive=True))
    assert any(o.path.endswith((".delta", ".snap")) for o in objects)


def _share_holder_events(seed: int, n: int) -> list[tuple[str, Any, Any]]:
    rng = random.Random(seed)
    events: list[tuple[str, Any, Any]] = []
    for _ in range(n):
        if rng.random() < 0.2:
            ticker = rng.choice(TICKERS)
            value = None if rng.random() < 0.1 else {"ticker": ticker, "name": ticker.title(),
                                                     "exchange": rng.choice(EXCHANGES)}
            events.append(("ref", ticker, value))
        else:
            pid = rng.randrange(60)
            value = None if rng.random() < 0.15 else {
                "id": pid, "client": f"client{rng.randrange(8)}",
                "ticker": rng.choice(TICKERS), "amount": rng.randint(1, 500)}
            events.append(("positions", pid, value))
    return events


def test_share_holders_on_two_workers_with_state_on_s3_survives_a_lost_worker(
        cluster: SparkCluster, s3: S3Server, session: Any, bootstrap: str,
        tmp_path: Path) -> None:
    topology_module = _example("share_holders.topology")
    positions, ref = new_topics(bootstrap, 2, "cluster-positions", "cluster-ref")
    events = _share_holder_events(5, 2400)
    chunks = [events[i::3] for i in range(3)]
    topic = {"positions": positions, "ref": ref}

    def encode(x: Any) -> bytes | None:
        return None if x is None else json.dumps(x).encode()

    def feed(r: int) -> None:
        for name in ("ref", "positions"):
            produce(bootstrap, topic[name], [(encode(k), encode(v))
                                             for t, k, v in chunks[r] if t == name])

    build = topology_module.build_topology
    app = _app(build(positions_topic=positions, ref_data_topic=ref), "sh-cluster", session,
               bootstrap, tmp_path, s3.uri("state"))
    facts = _run_with_a_worker_killed(app, cluster, feed, len(chunks))
    log.info("share-holders on the cluster: %s", facts)

    # the driver gets the same records in the same per-topic order (each chunk's reference
    # data first, as produced; the keyed partitions keep each key's order)
    driver = TopologyTestDriver(build(positions_topic=positions, ref_data_topic=ref))
    inputs = {n: driver.create_input_topic(topic[n]) for n in topic}
    for chunk in chunks:
        for name in ("ref", "positions"):
            for t, k, v in chunk:
                if t == name:
                    inputs[name].pipe_input(k, v)
    store = topology_module.US_SHARE_HOLDERS
    expected = driver.get_key_value_store(store).to_dict()
    assert expected, "the driver's table is empty: the test data is wrong"
    assert app.store(store).to_dict() == expected


def test_a_worker_local_state_location_is_refused_at_start(
        cluster: SparkCluster, session: Any, bootstrap: str, tmp_path: Path) -> None:
    word_count = _example("word_count.app")
    src, out = new_topics(bootstrap, 2, "cluster-local-lines", "cluster-local-counts")
    # the same path exists on the driver and on each worker, but it is a different disk
    app = _app(word_count.build_topology(src, out), "wc-local", session, bootstrap, tmp_path,
               str(cluster.state_dir), **word_count.config)
    started = time.monotonic()
    with pytest.raises(SharedLocationError) as error:
        app.start()
    message = str(error.value)
    assert str(cluster.state_dir) in message and "state.location" in message
    assert "s3://" in message
    assert not app.is_running
    assert time.monotonic() - started < 120


def test_one_writer_on_the_cluster_a_second_run_refused_then_taking_over(
        cluster: SparkCluster, s3: S3Server, session: Any, bootstrap: str,
        tmp_path: Path) -> None:
    """Two runs of one application with its lease on S3: the second is refused naming the
    first; with take-over the first is fenced and stops, the second finishes, and the table and
    the output equal the test driver's (no count produced twice)."""
    import socket

    from streamtable.errors import ApplicationFailedError, LeaseHeldError

    word_count = _example("word_count.app")
    src, out = new_topics(bootstrap, 2, "lease-lines", "lease-counts")
    rng = random.Random(5)
    rounds = [[" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))
               for _ in range(1200)] for _ in range(3)]

    def app() -> StreamsApp:
        return _app(word_count.build_topology(src, out), "wc-lease", session, bootstrap,
                    tmp_path, s3.uri("state"), **word_count.config,
                    **{"lease.timeout.ms": 6000})

    first, second = app(), app()
    produce(bootstrap, src, [(None, line.encode()) for line in rounds[0]])
    first.start()
    try:
        wait_until(lambda: first.batches >= 2, 240, "two batches on the cluster")
        with pytest.raises(LeaseHeldError) as refused:
            second.start()
        assert f"host {socket.gethostname()}, pid {os.getpid()}" in str(refused.value)
        assert first.is_running
        produce(bootstrap, src, [(None, line.encode()) for line in rounds[1]])
        second.start(take_over=True)
        assert not first.is_running, "the fenced run still runs after the take-over"
        with pytest.raises(ApplicationFailedError, match="taken over by another run"):
            first.raise_if_failed()
        fenced_at = first.batches
        produce(bootstrap, src, [(None, line.encode()) for line in rounds[2]])
        second.process_all_available()
        assert first.batches == fenced_at
    finally:
        first.stop()
        second.stop()

    driver = TopologyTestDriver(word_count.build_topology(src, out), word_count.config)
    lines = driver.create_input_topic(src)
    for chunk in rounds:
        for line in chunk:
            lines.pipe_input(None, line)
    final = driver.get_key_value_store("counts-store").to_dict()
    assert final and second.store("counts-store").to_dict() == final
    per_word: dict[str, list[int]] = {}
    for msgs in read_partitions(bootstrap, out).values():
        for m in msgs:
            per_word.setdefault(m.key().decode(), []).append(struct.unpack(">q", m.value())[0])
    assert {w: seq[-1] for w, seq in per_word.items()} == final
    for word, seq in per_word.items():
        assert seq == sorted(set(seq)), f"{word}: a count was produced twice or went back"
    # the lease is on S3, beside the state: two claims, the first given up
    objects = s3.filesystem().get_file_info(
        __import__("pyarrow.fs").fs.FileSelector(f"{s3.bucket}/state/wc-lease/lease"))
    names = sorted(o.base_name for o in objects)
    assert [n.split(".")[1] for n in names if n.startswith("000000000001")] == [
        "beat", "claim", "released"]
    assert any(n.startswith("000000000002") and n.endswith(".claim") for n in names)
