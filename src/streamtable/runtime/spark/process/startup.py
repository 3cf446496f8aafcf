"""What a query's start does besides starting it: Spark settings for its checkpoint, Python
workers started ahead of the first micro-batch, and Spark's planner workers and their daemons
ended once the query runs."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any

log = logging.getLogger("streamtable.app")

# Spark's checkpoint file manager over the Hadoop FileSystem API: the query's offset and commit
# logs are written the same way (a temporary file renamed into place), in ~15 ms instead of the
# ~45 ms of the default FileContext one, twice a micro-batch. The checkpoint is in state.dir, a
# directory of this machine.
CHECKPOINT_FILE_MANAGER = ("org.apache.spark.sql.execution.streaming.checkpointing."
                           "FileSystemBasedCheckpointFileManager")
_CHECKPOINT_FILE_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"


def fast_checkpoint_files(spark: Any) -> None:
    """Use ``CHECKPOINT_FILE_MANAGER`` for the queries started from now on, unless the session
    names a manager of its own."""
    if spark.conf.get(_CHECKPOINT_FILE_MANAGER_KEY, None) is None:
        spark.conf.set(_CHECKPOINT_FILE_MANAGER_KEY, CHECKPOINT_FILE_MANAGER)


class WarmWorkers:
    """The task of the warm-up job: the stage code imported and, when tasks write output
    themselves, the worker's producer connected."""

    def __init__(self, output: Any) -> None:
        self.output = output

    def __call__(self, batches: Any) -> Any:
        import streamtable.runtime.spark.stage  # noqa: F401  (what the first batch needs)

        if self.output is not None and hasattr(self.output, "warm_up"):
            self.output.warm_up()
        yield from batches


def warm_up_python_workers(spark: Any, workers: int, output: Any) -> Any:
    """Start Spark's Python workers in the background while the query starts, so the first
    batch finds them running (a job of ``workers`` tiny tasks; ``output``: a distributed
    output writer to connect there); returns the thread."""
    def warm() -> None:
        try:
            (spark.range(0, workers, numPartitions=workers)
             .mapInArrow(WarmWorkers(output), "id long").collect())
        except Exception as e:  # the first batch starts them anyway and reports any error
            log.debug("warming up the Python workers failed: %s", e)

    thread = threading.Thread(target=warm, name="streamtable-warm-up", daemon=True)
    thread.start()
    return thread


# Spark runs a data source's planning (finding it, making it, planning its read) in Python
# workers forked by a ``pyspark.daemon`` of their own per job, ``python -m pyspark.daemon
# pyspark.sql.worker.<job>``. After use a worker idles for Spark's idle timeout (a minute):
# 35-80 MB resident each, in the first minute of a query, when a backlog's first batches take
# the most memory. A query needs them again only when it starts anew, and then Spark discards
# a worker that died ("process from idle queue is dead") and forks another. Spark keeps the
# daemons for the session's life, unless stopped (see stop_planner_daemons).
PLANNER_JOB = "pyspark.sql.worker."
# the jobs of a query's start: finding the data source, making it, planning its read (the same
# prefix also names the jobs that write through a Python data source, every batch)
PLANNING_JOBS = ("lookup_data_sources", "create_data_source", "plan_data_source_read")

# The queries of this process whose planning may still use a planner worker: from the start
# (the source's ``load()`` plans already) to the first batch. Spark hands an idle worker to a
# planning job with no word to this process: one ended in that moment fails the query ("Python
# worker exited unexpectedly"). So workers are ended only under this lock, and only while no
# query of this process plans. Data sources read by other code of the same process are not
# known here: such a read and a query's first batch at the same moment can still meet.
_PLANNING_LOCK = threading.Lock()
_planning: set[int] = set()


def planning_begins(query: object) -> None:
    """Say that ``query`` (any object standing for it) starts and plans: no planner worker is
    ended until :func:`planning_ends` for it."""
    with _PLANNING_LOCK:
        _planning.add(id(query))


def planning_ends(query: object) -> bool:
    """Say that ``query`` plans no more (its first batch runs, or it stopped); whether it was
    planning until now. Idempotent.

    >>> q = object(); planning_begins(q); planning_ends(q), planning_ends(q)
    (True, False)
    >>> planning()
    0
    """
    with _PLANNING_LOCK:
        was = id(query) in _planning
        _planning.discard(id(query))
        return was


def planning() -> int:
    """How many queries of this process may be planning now."""
    with _PLANNING_LOCK:
        return len(_planning)


def _processes() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, command line, CPU seconds) of every process (Linux ``/proc``)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, tuple[int, str, float]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out[int(name)] = (int(fields[1]), cmd, (int(fields[11]) + int(fields[12])) / tick)
    return out


def descends_from(pid: int, root: int, processes: dict[int, tuple[int, str, float]]) -> bool:
    """Whether ``pid`` is ``root`` or a process under it, by the parents in ``processes``.

    >>> descends_from(3, 1, {1: (0, "", 0.0), 2: (1, "", 0.0), 3: (2, "", 0.0)})
    True
    """
    seen = set()
    while pid in processes and pid not in seen:
        if pid == root:
            return True
        seen.add(pid)
        pid = processes[pid][0]
    return False


def runs_planner_job(cmd: str) -> bool:
    """Whether a process's command line is a Spark planner daemon's or worker's (a daemon of a
    ``PLANNER_JOB``, or a worker forked from one)."""
    return "pyspark.daemon" in cmd and PLANNER_JOB in cmd


def planner_workers(root: int, processes: dict[int, tuple[int, str, float]]) -> list[int]:
    """The workers Spark's planner daemons under ``root`` forked: processes running a planner
    job whose parent runs one too.

    >>> procs = {1: (0, "python app.py", 0.0), 2: (1, "java spark", 0.0),
    ...          3: (2, "python -m pyspark.daemon pyspark.sql.worker.create_data_source", 0.0),
    ...          4: (3, "python -m pyspark.daemon pyspark.sql.worker.create_data_source", 0.0),
    ...          5: (2, "python -m pyspark.daemon pyspark.worker", 0.0)}
    >>> planner_workers(1, procs)
    [4]
    """
    def planner(pid: int) -> bool:
        return runs_planner_job(processes.get(pid, (0, "", 0.0))[1])

    return sorted(pid for pid, (ppid, _, _) in processes.items()
                  if planner(pid) and planner(ppid) and descends_from(pid, root, processes))


def release_idle_planners(idle_s: float = 1.0, attempts: int = 10) -> list[int]:
    """End the planner workers of this process's Spark once each has used no CPU for
    ``idle_s`` (see ``PLANNER_JOB``), looking again up to ``attempts`` times for those still
    busy; returns the pids ended. Nothing where ``/proc`` does not tell, and nothing more once
    a query of this process plans (see :func:`planning_begins`)."""
    if not os.path.isdir("/proc/self"):
        return []
    root = os.getpid()
    ended: list[int] = []
    for _ in range(attempts):
        before = _processes()
        # one ended may still be exiting: it is not ended twice
        candidates = [pid for pid in planner_workers(root, before) if pid not in ended]
        if not candidates:
            break
        time.sleep(idle_s)
        after = _processes()
        with _PLANNING_LOCK:  # a query's start waits for these kills, and none comes after it
            if _planning:
                break
            for pid in candidates:
                if pid in after and after[pid][2] == before[pid][2]:
                    try:
                        os.kill(pid, signal.SIGTERM)
                        ended.append(pid)
                    except OSError:
                        pass
    if ended:
        log.debug("ended %d idle Spark planner workers: %s", len(ended), ended)
    return ended


def stop_planner_daemons(spark: Any) -> list[str]:
    """Stop the daemons that Spark's planning jobs fork their workers from (see
    ``PLANNING_JOBS``): ~35 MB resident each, three per session, idle for as long as the
    session lives once its queries run. Each is stopped through its worker factory in the JVM,
    which starts a new daemon when a job plans again (~0.2 s each: a query started later in the
    same process starts later by that much). Stopping a daemon ends its workers too: nothing is
    stopped while a query of this process plans (see :func:`planning_begins`). Returns the
    jobs whose daemons were stopped.

    The factories are a private field of Spark's ``SparkEnv`` (pyspark 4.3): a Spark without
    it raises here, and :func:`release_idle_planners_soon` logs that at debug level."""
    # the driver's: planner jobs run there. py4j cannot call SparkEnv's own methods (it looks
    # them all up, and some name classes the wheel lacks), hence the field by reflection
    env = spark.sparkContext._jsc.sc().env()
    jvm = spark.sparkContext._jvm
    field = jvm.java.lang.Class.forName("org.apache.spark.SparkEnv").getDeclaredField(
        "pythonWorkers")
    field.setAccessible(True)
    stopped: list[str] = []
    with _PLANNING_LOCK:  # as release_idle_planners: never while a query of this process plans
        if _planning:
            return []
        # a list of the entries, made without SparkEnv's lock: an entry Spark adds meanwhile
        # may be missed, or the copy fail (then the daemons stay, and the failure is logged)
        factories = field.get(env).toList()
        for i in range(factories.size()):
            entry = factories.apply(i)
            job = str(entry._1().workerModule()).removeprefix(PLANNER_JOB)
            if job in PLANNING_JOBS:
                entry._2().stop()
                stopped.append(job)
    if stopped:
        log.debug("stopped the idle Spark planner daemons of %s", ", ".join(sorted(stopped)))
    return stopped


def release_idle_planners_soon(spark: Any = None) -> threading.Thread:
    """:func:`release_idle_planners` in the background (call once the query's first batch
    runs: its planning is done), then, given the session, :func:`stop_planner_daemons`."""
    def release() -> None:
        try:
            release_idle_planners()
            if spark is not None:
                stop_planner_daemons(spark)
        except Exception as e:  # the workers' memory Spark frees after its idle timeout
            log.debug("could not end the idle planner workers or daemons: %s", e)

    thread = threading.Thread(target=release, name="streamtable-planners", daemon=True)
    thread.start()
    return thread
