"""The SparkSession streamtable runs on: its settings, the driver JVM's options (the quick
compiler, the collector, the class archive of ``jvm_archive.py``, logging to the application's
file with ``log4j2.properties``), its launch (``gateway.py``: its stderr without the start-up
warning of Spark's launcher), and the Python workers' import path (``worker_site/``) and daemon
(``daemon.py``)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import streamtable
from streamtable.runtime.spark.process import jvm_archive
from streamtable.runtime.spark.process.gateway import start_gateway

log = logging.getLogger(__name__)

# the directory streamtable is imported from, for the workers to import it from too
_PACKAGE_ROOT = str(Path(streamtable.__file__).resolve().parents[1])
# a sitecustomize for Spark's Python processes: pyspark from the installed package (see there)
_WORKER_SITE = str(Path(__file__).resolve().parent / "worker_site")


def worker_pythonpath() -> str:
    """PYTHONPATH for Python workers: streamtable itself plus the driver's import path, so
    workers import the same application modules."""
    entries = [_WORKER_SITE, _PACKAGE_ROOT] + [p for p in sys.path if p and os.path.isdir(p)]
    existing = os.environ.get("PYTHONPATH")
    if existing:
        entries.append(existing)
    seen: list[str] = []
    for e in entries:
        if e not in seen:
            seen.append(e)
    return os.pathsep.join(seen)


# The JVM only plans, schedules and shuffles small rows here (records are read, processed and
# written by the Python tasks): its quick compiler alone halves the JVM's CPU time of a run,
# most of it spent compiling at start-up (W1, 300k lines: 27 -> 15 CPU s).
QUICK_JIT = "-XX:TieredStopAtLevel=1"
# The driver's heap holds plans, scheduling and small rows (in local mode the shuffles of those
# rows too): the serial collector's smaller footprint suits it. Measured (1,000,000 records,
# local[2]): the JVM's peak RSS 566 -> 465 MB (W2), same throughput, a latency p99 within noise.
# The heap is kept within 10-30% free: at the JVM's default initial heap (a 64th of the
# machine's memory, 378 MB here) it kept ~250 MB of old generation it never used (Nexmark q18
# at 10,000,000 events: the JVM's peak RSS 666 -> 518 MB, the same rate). It starts at 160 MB,
# about what a query's start leaves live, and the class metadata may reach 128 MB before it
# triggers a collection: from 64 MB and the default 21 MB, the heap grew in small steps, each
# after a full collection that freed nothing, and a query's first micro-batch waited through
# ~40 pauses of ~1.4 s in all (Nexmark q3, 80,000 records in one batch: 7.5 -> 6.8 s from the
# query's start, the JVM's peak RSS within 15 MB; q4, six batches: 0.9 -> 0.35 s of pauses).
DRIVER_GC = ("-XX:+UseSerialGC -Xms160m -XX:MetaspaceSize=128m "
             "-XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30")
# The driver's largest heap (STREAMTABLE_DRIVER_MEMORY overrides it). The serial collector lets
# the old generation fill with what the batches' rows left before it collects it, so the heap
# grows towards this bound however little is live: at 2g, Nexmark q4 at 10,000,000 events on
# RocksDB stores held 895 MB of the JVM at the run's peak, at 1g 455 MB, with the JVM's CPU time
# the same (39 s). In local mode this heap also runs the executor: what is more than Spark's
# execution memory (a fraction of it) in a batch's shuffles is spilled to disk.
DRIVER_MEMORY = "1g"
LOG4J2_PROPERTIES = Path(__file__).resolve().parent / "log4j2.properties"


def logging_java_options(log_file: Path, verbose: bool = False) -> str:
    """The driver's JVM options that log Spark to ``log_file`` with streamtable's log4j2
    configuration: on the console one line per error, or (``verbose``) everything at WARN
    with its stack trace.

    >>> logging_java_options(Path("/tmp/app/streamtable.log")).split()[1]
    '-Dstreamtable.log.file=/tmp/app/streamtable.log'
    """
    options = [f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES.as_uri()}",
               f"-Dstreamtable.log.file={log_file}"]
    if verbose:
        options += ["-Dstreamtable.verbose.level=warn", "-Dstreamtable.brief.level=off"]
    return " ".join(options)


def spark_session(master: str | None = None, app_name: str = "streamtable",
                  conf: Mapping[str, Any] | None = None, *, log_file: Path | None = None,
                  verbose: bool = False, quick_jit: bool = True) -> Any:
    """Get or create the SparkSession: ``local[*]`` unless a master is given (any Spark master
    URL works: ``spark://host:7077``, ``yarn``, ``k8s://...``).

    With ``log_file``, a JVM started here logs Spark's messages to that file and only one line
    per error to the console (all of them, stack traces included, when ``verbose``): see
    ``log4j2.properties``. ``quick_jit``: the JVMs use only their quick compiler (see
    ``QUICK_JIT``); ``conf`` may set Java options of its own."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = worker_pythonpath()
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    settings: dict[str, str] = {
        "spark.master": master or os.environ.get("STREAMTABLE_SPARK_MASTER") or "local[*]",
        "spark.app.name": app_name,
        # our stages choose their own partitioning: adaptive coalescing would merge tasks
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "200000",
        # Spark re-measures an Arrow batch's bytes after every row when this limit is set; with
        # an array column (headers) that costs time quadratic in the rows of a task
        "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",
        "spark.python.worker.reuse": "true",
        # workers fork from a daemon that has imported streamtable's stage code already
        "spark.python.daemon.module": "streamtable.runtime.spark.process.daemon",
        # starting a Python task costs about half as much over a Unix domain socket
        "spark.python.unix.domain.socket.enabled": "true",
        "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"],
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        "spark.driver.memory": os.environ.get("STREAMTABLE_DRIVER_MEMORY", DRIVER_MEMORY),
        "spark.ui.showConsoleProgress": "false",
    }
    driver_options = [QUICK_JIT] if quick_jit else []
    driver_options.append(DRIVER_GC)
    archive = jvm_archive.java_option()
    if archive:  # Spark's classes mapped from the archive: a start ~2 s shorter
        driver_options.append(archive)
    elif (conf_dir := jvm_archive.conf_dir_in_the_way()) is not None:
        log.info("SPARK_CONF_DIR=%s comes first on the class path of Spark's JVM, where Java "
                 "maps no class archive: the JVM loads Spark's classes from its jars (a start "
                 "~2.5 s longer)", conf_dir)
    if quick_jit:
        settings["spark.executor.extraJavaOptions"] = QUICK_JIT
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        driver_options.append(logging_java_options(log_file.resolve(), verbose))
    if driver_options:
        settings["spark.driver.extraJavaOptions"] = " ".join(driver_options)
    settings.update((k, str(v)) for k, v in (conf or {}).items())
    # the JVM started here, so that its start-up warning stays off the console (gateway.py)
    start_gateway(SparkConf(loadDefaults=False).setAll(list(settings.items())))
    builder = SparkSession.builder
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("STREAMTABLE_SPARK_LOG_LEVEL", "WARN"))
    return spark
