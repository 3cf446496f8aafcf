"""The cluster fixtures do what the streamtable-on-cluster tests will rely on: executors on both
workers reach the local S3, the workers share no local disk, and a job outlives a killed
worker (and the worker can come back, with an empty disk)."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests.cluster.cluster import (
    S3Server,
    SparkCluster,
    describe,
    executor_count,
    spark_cluster,
    wait_for_executors,
    wait_until,
)

import streamtable

pytestmark = pytest.mark.cluster

log = logging.getLogger(__name__)

PROBE_SCHEMA = ("partition long, attempt long, node string, node_file string, host string, "
                "address string, pid long, executor_pid long, started double, "
                "listing array<string>, streamtable string")


def probe(state_dir: str, s3_prefix: str | None = None, sleep: float = 1.0,
          write_state: bool = False) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """A ``mapInArrow`` function returning, per task, where it ran: the node (environment and
    the ``NODE`` file in the node's private dir), host name, the worker's address, Python pid,
    executor JVM pid and the names in the worker-local state dir. With ``write_state`` it
    writes ``state_dir/probe-<partition>``; with ``s3_prefix`` it writes the JSON objects
    ``<s3_prefix>/started/<partition>-<attempt>`` (when the task starts) and
    ``<s3_prefix>/part-<partition>.json`` (at its end): executors reach S3 through
    ``AWS_ENDPOINT_URL`` (``spark.executorEnv``). It holds its core ``sleep`` seconds so that
    every executor gets tasks."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import json
        import os
        import socket
        import time
        from pathlib import Path

        import pyarrow as pa
        from pyarrow import fs
        from pyspark import TaskContext

        import streamtable  # executors import the project (spark_session's PYTHONPATH)

        ctx = TaskContext.get()
        assert ctx is not None
        partition, attempt = ctx.partitionId(), ctx.attemptNumber()
        for _ in batches:
            pass
        node = os.environ["STREAMTABLE_NODE"]
        started = time.time()
        s3 = None
        if s3_prefix is not None:
            s3, root = fs.FileSystem.from_uri(f"s3://{s3_prefix}")
            with s3.open_output_stream(f"{root}/started/{partition}-{attempt}") as out:
                out.write(node.encode())
        state = Path(state_dir)
        if write_state:
            (state / f"probe-{partition}").write_text(node)
        time.sleep(sleep)
        # the Python worker's parent is the pyspark daemon, whose parent is the executor JVM
        daemon_stat = Path(f"/proc/{os.getppid()}/stat").read_text()
        executor_pid = int(daemon_stat[daemon_stat.rindex(")") + 2:].split()[1])
        info = {
            "partition": partition, "attempt": attempt, "node": node,
            "node_file": (state.parent / "NODE").read_text().strip(),
            "host": socket.gethostname(), "address": os.environ.get("SPARK_LOCAL_IP"),
            "pid": os.getpid(), "executor_pid": executor_pid,
            "started": started, "listing": sorted(os.listdir(state)),
            "streamtable": streamtable.__file__,
        }
        if s3 is not None:
            with s3.open_output_stream(f"{root}/part-{partition}.json") as out:
                out.write(json.dumps(info).encode())
        yield pa.RecordBatch.from_pylist([info])

    return run


def run_probe(spark: Any, partitions: int, fn: Callable[[Iterator[Any]], Iterator[Any]]) -> list[
        dict[str, Any]]:
    rows = spark.range(partitions, numPartitions=partitions).mapInArrow(fn, PROBE_SCHEMA)
    return [r.asDict() for r in rows.collect()]


def test_executors_on_both_workers_reach_s3(cluster: SparkCluster, s3: S3Server,
                                            cluster_spark: Any) -> None:
    wait_for_executors(cluster_spark, 2)
    executors = {w.name: set(w.executor_pids()) for w in cluster.workers}
    assert all(len(pids) == 1 for pids in executors.values()), executors
    prefix = f"reach-{uuid.uuid4().hex[:8]}"
    t0 = time.monotonic()
    rows = run_probe(cluster_spark, 8,
                     probe(str(cluster.state_dir), f"{s3.bucket}/{prefix}", sleep=1.0))
    log.info("probe job on %s: %.1fs", cluster.master_url, time.monotonic() - t0)

    assert sorted(r["partition"] for r in rows) == list(range(8))
    assert {r["node"] for r in rows} == {"worker-0", "worker-1"}
    hosts = {w.name: w.host for w in cluster.workers}
    for r in rows:
        assert r["node_file"] == r["node"]  # the node dir it sees is its own worker's
        assert r["executor_pid"] in executors[r["node"]]
        assert r["address"] == hosts[r["node"]]
        assert r["host"]
        assert r["streamtable"] == streamtable.__file__
    executor_hosts = {e.host() for e in
                      cluster_spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()}
    assert set(hosts.values()) <= executor_hosts, executor_hosts

    # the driver reads back what the executors wrote: through the explicit file system...
    s3fs = s3.filesystem()
    from pyarrow import fs

    infos = s3fs.get_file_info(fs.FileSelector(f"{s3.bucket}/{prefix}", recursive=True))
    parts = sorted(i.path for i in infos if i.path.endswith(".json"))
    assert parts == [f"{s3.bucket}/{prefix}/part-{p}.json" for p in range(8)]
    written = []
    for path in parts:
        with s3fs.open_input_stream(path) as f:
            written.append(json.loads(f.read()))
    assert sorted(written, key=lambda r: r["partition"]) == sorted(
        rows, key=lambda r: r["partition"])
    # ... and through a URI naming the endpoint, as an application's configuration would
    uri_fs, path = fs.FileSystem.from_uri(s3.uri(f"{prefix}/part-0.json"))
    with uri_fs.open_input_stream(path) as f:
        assert json.loads(f.read())["partition"] == 0


def test_workers_share_no_local_disk(cluster: SparkCluster, cluster_spark: Any) -> None:
    wait_for_executors(cluster_spark, 2)
    state = str(cluster.state_dir)
    written = run_probe(cluster_spark, 8, probe(state, sleep=1.0, write_state=True))
    assert {r["node"] for r in written} == {"worker-0", "worker-1"}
    by_node: dict[str, set[str]] = {"worker-0": set(), "worker-1": set()}
    for r in written:
        by_node[r["node"]].add(f"probe-{r['partition']}")

    # a later job's tasks see their own worker's files, never the other worker's
    seen = run_probe(cluster_spark, 8, probe(state, sleep=1.0))
    assert {r["node"] for r in seen} == {"worker-0", "worker-1"}
    for r in seen:
        probes = {name for name in r["listing"] if name.startswith("probe-")}
        assert probes == by_node[r["node"]], (r["node"], probes, by_node)

    # from outside: each worker's namespace holds its own files only; the driver sees none
    for w in cluster.workers:
        other = by_node["worker-1" if w.name == "worker-0" else "worker-0"]
        for name in by_node[w.name]:
            assert w.read_text(cluster.state_dir / name) == w.name
        for name in other:
            assert not w.exists(cluster.state_dir / name)
    assert cluster.state_dir.parent.is_dir()
    assert not any(cluster.state_dir.parent.iterdir()), list(cluster.state_dir.parent.iterdir())


def test_shuffle_between_workers(cluster: SparkCluster, cluster_spark: Any) -> None:
    """Shuffle blocks travel between the workers over the network: Spark reads another
    executor's shuffle files from disk only when both have one host, which the workers do
    not (each has its address), as their disks are private."""
    from pyspark.sql import functions as F

    wait_for_executors(cluster_spark, 2)
    counts = (cluster_spark.range(100_000, numPartitions=8)
              .groupBy((F.col("id") % 97).alias("k")).count().collect())
    assert len(counts) == 97 and sum(r["count"] for r in counts) == 100_000


def test_job_outlives_a_killed_worker(cluster: SparkCluster, s3: S3Server,
                                      cluster_spark: Any) -> None:
    """SIGKILL worker 0 (every process of it) while a task runs there: the task runs again on
    worker 1 and the job finishes there; the master marks the worker DEAD at once (its
    connection closed) and, with no free core on worker 1, gives the application no
    replacement executor until worker 0 is back."""
    wait_for_executors(cluster_spark, 2)
    from pyarrow import fs

    s3fs = s3.filesystem()
    prefix = f"kill-{uuid.uuid4().hex[:8]}"
    partitions = 8
    result: dict[str, Any] = {}

    def job() -> None:
        try:
            result["rows"] = run_probe(
                cluster_spark, partitions,
                probe(str(cluster.state_dir), f"{s3.bucket}/{prefix}", sleep=3.0))
        except Exception as e:  # reported by the assertion below
            result["error"] = e
        result["done"] = time.monotonic()

    def started_on(node: str) -> list[str]:
        selector = fs.FileSelector(f"{s3.bucket}/{prefix}/started", allow_not_found=True)
        names = []
        for info in s3fs.get_file_info(selector):
            with s3fs.open_input_stream(info.path) as f:
                if f.read().decode() == node:
                    names.append(info.base_name)
        return names

    runner = threading.Thread(target=job, daemon=True)
    runner.start()
    try:
        running = wait_until(lambda: started_on("worker-0"), 240, "a task on worker-0", 0.2)
        victims = cluster.kill_worker(0)
        killed_at = cluster.workers[0].killed_at
        assert killed_at is not None
        kinds = sorted(describe(c) for c in victims.values())
        assert {"worker", "executor", "python-daemon"} <= set(kinds), kinds

        wait_until(lambda: len(cluster.alive_workers()) == 1, 120, "the master to drop worker-0")
        dead_after = time.monotonic() - killed_at
        runner.join(timeout=600)
        assert not runner.is_alive(), "the job did not finish after the worker was killed"
        assert "error" not in result, result.get("error")
        finished_after = result["done"] - killed_at
        rows: list[dict[str, Any]] = result["rows"]
        assert sorted(r["partition"] for r in rows) == list(range(partitions))
        wall_killed = time.time() - (time.monotonic() - killed_at)
        after = [r for r in rows if r["started"] > wall_killed]
        assert after and all(r["node"] == "worker-1" for r in after)
        interrupted = {int(name.split("-")[0]) for name in running}
        retried = [r for r in rows if r["partition"] in interrupted]
        assert all(r["node"] == "worker-1" and r["attempt"] >= 1 for r in retried), retried
        apps = cluster.applications()
        assert [a["cores"] for a in apps] == [1], apps  # no replacement: worker-1 is full
        assert executor_count(cluster_spark) == 1
        log.info("worker-0 killed (%s): master saw it dead after %.1fs, job finished %.1fs "
                 "after the kill, re-ran partitions %s", kinds, dead_after, finished_after,
                 sorted(interrupted))
    finally:
        runner.join(timeout=600)
        if cluster.workers[0].killed_at is not None:
            # the machine comes back with an empty local disk; the application gets its
            # executor there again
            t0 = time.monotonic()
            cluster.restart_worker(0)
            back = time.monotonic() - t0
            wait_for_executors(cluster_spark, 2)
            log.info("worker-0 alive %.1fs after restart, executor registered %.1fs after it",
                     back, time.monotonic() - t0 - back)

    rows = run_probe(cluster_spark, 8, probe(str(cluster.state_dir), sleep=1.0))
    assert {r["node"] for r in rows} == {"worker-0", "worker-1"}
    assert all(r["listing"] == [] for r in rows if r["node"] == "worker-0")


def test_master_drops_a_frozen_worker_after_worker_timeout(tmp_path: Any) -> None:
    """A hung worker (SIGSTOP: its connections stay open) is noticed by the heartbeat timeout
    only: with ``spark.worker.timeout`` 5 s on master and workers the master drops it after
    about 1.5 timeouts, while the healthy worker stays alive."""
    timeout = 5
    with spark_cluster(workers=2, worker_timeout=timeout, base_dir=tmp_path) as c:
        c.freeze_worker(0)
        t0 = time.monotonic()
        wait_until(lambda: c.worker_state(0) == "DEAD", 12 * timeout, "worker-0 to be dropped")
        dropped = time.monotonic() - t0
        log.info("master dropped the frozen worker after %.1fs (spark.worker.timeout=%ds)",
                 dropped, timeout)
        assert dropped < 4 * timeout
        time.sleep(2 * timeout)
        assert c.worker_state(1) == "ALIVE"
        assert len(c.alive_workers()) == 1
        c.kill_worker(0)
    assert not c.processes()
