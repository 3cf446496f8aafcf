"""The daemon of Spark's Python workers for streamtable (``spark.python.daemon.module``).

Spark forks every Python worker from a daemon process. This one imports what streamtable's
stages and Kafka source need (pyarrow, the engine, the processors) before it starts PySpark's
own daemon loop, so each forked worker has them already: the first batch does not wait for
the imports, and the workers share those pages with the daemon instead of holding a copy each.
It keeps pyarrow from importing pandas, which nothing of streamtable's uses.
"""

from __future__ import annotations

import gc
import importlib
import logging
from typing import Any

# what a task unpickles or runs: a stage, the Kafka source's reads, the output writer and its
# producer, task state, the accumulator of the tasks' counts, the warm-up job
PRELOAD = (
    "pyarrow",
    "pyarrow.compute",
    "streamtable.runtime.spark.stage",
    "streamtable.runtime.spark.kafka_source",
    "streamtable.kafka.output",
    "streamtable.kafka.sink",
    "streamtable.state.persistence",
    "streamtable.runtime.spark.progress",
    "streamtable.runtime.spark.process.startup",
)


def preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as e:  # a worker imports it again and reports the error there
            logging.getLogger(__name__).warning("could not preload %s: %s", name, e)
    # streamtable's public names (the DSL, the processors, the serdes): a task unpickles its
    # topology with them, and Spark forks new workers from time to time (measured: without
    # this a W2 micro-batch of 5,000 records took ~0.2 s longer)
    import streamtable

    for name in streamtable.__all__:
        getattr(streamtable, name)


class _NotNow:
    """A finder refusing to import pandas while it is on ``sys.meta_path``."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.partition(".")[0] == "pandas":
            raise ImportError("pandas is not imported for pyarrow's first look")


def pyarrow_without_pandas() -> None:
    """Tell pyarrow once that pandas is not there, so that no worker imports it.

    pyarrow looks for pandas the first time it converts a Python list (``pa.array`` asks
    whether the list is a pandas object): that import cost each new worker ~0.2 s and ~45 MB,
    and streamtable's stages use no pandas. pyarrow's pandas functions (``to_pandas``,
    ``Array.from_pandas`` after it) import it when they are called, so a pandas UDF run by the
    same session still works: its input's ``to_pandas`` makes pyarrow look again.

    Called in the daemon, before it forks its first worker:

    >>> pyarrow_without_pandas()  # doctest: +SKIP
    """
    import sys

    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    finder = _NotNow()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(finder)


def quiet_on_closed_connections() -> None:
    """A worker whose connection the JVM closed (it cancelled the task: the query failed or
    stops) ends as PySpark ends it, at once with exit code 1, but without printing a traceback
    to the application's console."""
    import os

    import pyspark.daemon

    serve = pyspark.daemon.worker

    def worker(sock: Any, authenticated: bool) -> int:
        try:
            return int(serve(sock, authenticated))
        except (OSError, EOFError):  # the connection, not the task: the JVM has the story
            os._exit(1)

    pyspark.daemon.worker = worker


class WorkerRecycled(Exception):
    """Raised where PySpark's worker takes the JVM's end of a task (see
    :func:`recycle_workers_over_limit`)."""


def recycle_workers_over_limit() -> None:
    """A worker over its memory limit after a task (``worker.memory.recycle.bytes``, see
    :func:`~streamtable.runtime.spark.budget.should_recycle`) ends instead of waiting for the
    next task. It does so as PySpark's worker ends when the end of a task's stream goes wrong,
    once the task's results and counts were sent: it tells the JVM that it is not to be reused
    (the task stays a success) and exits, and Spark forks a new worker for the next task."""
    from pyspark.messages.spark_message_receiver import SparkMessageReceiver

    from streamtable.runtime.spark.budget import should_recycle

    finish = SparkMessageReceiver.get_finish_signal_from_stream

    def get_finish_signal_from_stream(self: Any) -> None:
        finish(self)
        if should_recycle():
            raise WorkerRecycled

    SparkMessageReceiver.get_finish_signal_from_stream = (  # type: ignore[method-assign]
        get_finish_signal_from_stream)


class YoungGenerationGc:
    """What PySpark's daemon sees as the ``gc`` module: its workers call ``gc.collect()`` after
    every task, a full collection that walks every object the worker holds, the task states it
    keeps between batches included (110-300 ms per task measured with ~195k objects, on the
    critical path: the JVM hands the worker its next task while it collects). This collects the
    young generations only: what the task made and left unreachable (a stage disables the
    collector while it runs, so all of it is young); older garbage is left to the collector's
    own full collections.

    >>> YoungGenerationGc().collect() >= 0
    True
    """

    def __getattr__(self, name: str) -> Any:
        return getattr(gc, name)

    @staticmethod
    def collect(generation: int = 2) -> int:
        return gc.collect(min(generation, 1))


def collect_young_between_tasks() -> None:
    import pyspark.daemon

    pyspark.daemon.gc = YoungGenerationGc()  # type: ignore[assignment]


if __name__ == "__main__":
    from streamtable.logs import configure_worker_logging

    # the workers fork from here: their warnings (skipped or dropped records) read like ours
    configure_worker_logging()
    pyarrow_without_pandas()
    preload()
    quiet_on_closed_connections()
    collect_young_between_tasks()
    recycle_workers_over_limit()
    from pyspark.daemon import manager

    manager()
