"""The daemon of Spark's Python workers for streamtable (``spark.python.daemon.module``).

Spark forks every Python worker from a daemon process. This one imports what streamtable's
stages and Kafka source need (pyarrow, the engine, the processors) before it starts PySpark's
own daemon loop, so each forked worker has them already: the first batch does not wait for
the imports, and the workers share those pages with the daemon instead of holding a copy each.
"""

from __future__ import annotations

import importlib
import logging

PRELOAD = (
    "pyarrow",
    "pyarrow.compute",
    "streamtable.runtime.spark.stage",
    "streamtable.kafka.source",
    "streamtable.kafka.sink",
    "streamtable.runtime.spark.state",
)


def preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as e:  # a worker imports it again and reports the error there
            logging.getLogger(__name__).warning("could not preload %s: %s", name, e)


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    manager()
