"""What a query's start does besides starting it: Spark settings for its checkpoint, and Python
workers started ahead of the first micro-batch."""

from __future__ import annotations

import logging
import threading
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
