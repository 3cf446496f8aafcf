"""Spark's idle data source planner workers are ended only while no query of this process plans:
Spark may hand an idle planner worker to a starting query at any moment, and a worker ended then
fails that query ("Python worker exited unexpectedly")."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from typing import Any

import pytest

from streamtable.runtime.spark.process.startup import (
    PLANNER_JOB,
    PLANNING_JOBS,
    _processes,
    planner_workers,
    planning,
    planning_begins,
    planning_ends,
    release_idle_planners,
    stop_planner_daemons,
)

# a planner daemon of this process and the idle worker it forked, as /proc shows them: both
# carry the planner job in their command line, the worker sleeps (no CPU)
_DAEMON = ("import subprocess, sys, time; "
           "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', "
           "'pyspark.daemon', sys.argv[2]]); time.sleep(60)")


@pytest.fixture
def idle_planner() -> Iterator[int]:
    if not os.path.isdir("/proc/self"):
        pytest.skip("needs Linux /proc")
    daemon = subprocess.Popen([sys.executable, "-c", _DAEMON, "pyspark.daemon",
                               PLANNER_JOB + "plan_data_source_read"])
    try:
        deadline = time.monotonic() + 30
        # this one's worker: Spark sessions of earlier tests in this process may have their own
        while True:
            procs = _processes()
            workers = [pid for pid in planner_workers(os.getpid(), procs)
                       if procs[pid][0] == daemon.pid]
            if workers:
                break
            assert time.monotonic() < deadline, "the planner worker did not start"
            time.sleep(0.05)
        assert len(workers) == 1
        yield workers[0]
    finally:
        daemon.kill()
        daemon.wait()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def test_an_idle_planner_worker_is_kept_while_a_query_plans_and_ended_after(idle_planner):
    query = object()
    planning_begins(query)
    try:
        assert planning() == 1
        assert release_idle_planners(idle_s=0.2, attempts=2) == []
        assert _alive(idle_planner)
    finally:
        planning_ends(query)
    assert planning() == 0
    assert idle_planner in release_idle_planners(idle_s=0.2, attempts=2)
    deadline = time.monotonic() + 10
    while _alive(idle_planner):
        assert time.monotonic() < deadline, "the idle planner worker was not ended"
        time.sleep(0.05)


class _Factory:
    def __init__(self, module: str) -> None:
        self.module, self.stopped = module, False

    def stop(self) -> None:
        self.stopped = True


class _Entry:
    def __init__(self, factory: _Factory) -> None:
        self.factory = factory

    def _1(self) -> Any:
        return types.SimpleNamespace(workerModule=lambda: self.factory.module)

    def _2(self) -> _Factory:
        return self.factory


class _Entries:  # the Scala list of (key, factory) of SparkEnv's pythonWorkers, as py4j shows it
    def __init__(self, factories: list[_Factory]) -> None:
        self.entries = [_Entry(f) for f in factories]

    def size(self) -> int:
        return len(self.entries)

    def apply(self, i: int) -> _Entry:
        return self.entries[i]


def _session(factories: list[_Factory]) -> Any:
    env = object()
    field = types.SimpleNamespace(
        setAccessible=lambda flag: None,
        get=lambda of: types.SimpleNamespace(toList=lambda: _Entries(factories)) if of is env
        else None)
    spark_env = types.SimpleNamespace(getDeclaredField=lambda name: field
                                      if name == "pythonWorkers" else None)
    jvm = types.SimpleNamespace(java=types.SimpleNamespace(lang=types.SimpleNamespace(
        Class=types.SimpleNamespace(forName=lambda name: spark_env))))
    jsc = types.SimpleNamespace(sc=lambda: types.SimpleNamespace(env=lambda: env))
    return types.SimpleNamespace(sparkContext=types.SimpleNamespace(_jsc=jsc, _jvm=jvm))


def test_the_daemons_of_the_planning_jobs_stop_only_while_no_query_plans() -> None:
    factories = {job: _Factory(PLANNER_JOB + job) for job in PLANNING_JOBS}
    # a Python data source's writes run through jobs of the same prefix, every batch
    writer = _Factory(PLANNER_JOB + "python_streaming_sink_runner")
    udfs = _Factory("pyspark.worker")
    spark = _session([*factories.values(), writer, udfs])
    query = object()
    planning_begins(query)
    try:
        assert stop_planner_daemons(spark) == []
        assert not any(f.stopped for f in factories.values())
    finally:
        planning_ends(query)
    assert sorted(stop_planner_daemons(spark)) == sorted(PLANNING_JOBS)
    assert all(f.stopped for f in factories.values())
    assert not writer.stopped and not udfs.stopped
