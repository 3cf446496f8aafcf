"""The training run that makes the class archive of Spark's JVM (see ``jvm_archive.py``): a fresh
Python process and JVM run the paths a query takes (Python tasks, a shuffle, a streaming query
with a Python source and ``foreachBatch``, then a real application on the development broker),
and the JVM writes the classes it loaded when it exits.

``streamtable jvm-archive`` (and ``make install``) calls :func:`build`; the run itself is
``python -m streamtable.runtime.spark.process.jvm_training <archive>``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from streamtable.errors import StreamsError
from streamtable.runtime.spark.process.jvm_archive import DISABLE_ENV, archive_path

log = logging.getLogger(__name__)

# what the training run prints when all its steps ran (a JVM that exits writes an archive of
# what it loaded, even when a step failed early)
TRAINED = "streamtable: training run complete"


def build(path: Path | None = None, timeout_s: float = 600.0) -> Path:
    """Make the archive (a training run in a fresh Python process and JVM); returns its path.

    >>> build()  # doctest: +SKIP
    PosixPath('/root/.cache/streamtable/spark-classes-4.1.0-3f2a....jsa')
    """
    path = path or archive_path()
    if path is None:
        raise StreamsError("no Java found (JAVA_HOME or java on the PATH): Spark needs Java 17")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    started = time.monotonic()
    env = {**os.environ, DISABLE_ENV: "0"}
    # for the class path of a session without one: Java makes no archive with a directory of
    # files on the class path, and maps none under another (see jvm_archive.py)
    env.pop("SPARK_CONF_DIR", None)
    proc = subprocess.run([sys.executable, "-m", __name__, str(partial)], env=env,
                          capture_output=True, text=True, timeout=timeout_s)
    trained = TRAINED in proc.stdout
    if not trained or not partial.exists() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        what = "wrote no class archive" if trained else "failed"
        raise StreamsError(f"the training run {what} (exit code {proc.returncode}):\n{tail}")
    os.replace(partial, path)
    log.info("class archive %s (%.0f MB) in %.1f s", path, path.stat().st_size / 2**20,
             time.monotonic() - started)
    return path


# -- the training run (``python -m streamtable.runtime.spark.process.jvm_training <archive>``)
def _train_task(batches: Iterator[Any]) -> Iterator[Any]:
    yield from batches


def _train_application(spark: Any) -> None:
    """A real application on the development broker: what a running query loads on top of the
    steps before (its source reading Kafka ranges, stages with state, a queryable store, tasks
    writing to Kafka, the progress listener): ~3,000 classes more, read from the jars at every
    start otherwise."""
    import json

    from confluent_kafka import Producer

    from streamtable import StreamsBuilder
    from streamtable.kafka.admin import ensure_topics
    from streamtable.kafka.broker import EmbeddedBroker
    from streamtable.kafka.client_log import with_client_log
    from streamtable.runtime.spark.app import StreamsApp

    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as state:
        bootstrap = broker.bootstrap_servers
        ensure_topics(bootstrap, {"lines": 2, "rows": 2, "counts": 2, "totals": 2})
        producer = Producer(with_client_log({"bootstrap.servers": bootstrap}))
        for i in range(200):
            producer.produce("lines", value=json.dumps(f"a b w{i % 7}").encode())
            producer.produce("rows", key=json.dumps(i % 50).encode(),
                             value=None if i % 9 == 0 else json.dumps({"g": i % 5}).encode())
        producer.flush(30)
        builder = StreamsBuilder()
        (builder.stream("lines").flat_map_values(str.split)
         .group_by(lambda key, word: word).count(materialized="counts-store")
         .to_stream().to("counts"))
        (builder.table("rows").filter(lambda key, row: row["g"] > 0)
         .group_by(lambda key, row: (row["g"], 1))
         .reduce(adder=lambda a, b: a + b, subtractor=lambda a, b: a - b,
                 materialized="totals-store")
         .to_stream().to("totals"))
        app = StreamsApp(builder.build(), "streamtable-jvm-archive", bootstrap, state,
                         spark=spark, development_broker=True)
        try:
            app.run_until_caught_up(timeout=300)
        finally:
            app.stop()


def _train(archive: str) -> None:
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    from streamtable.runtime.spark.process.session import spark_session
    from streamtable.runtime.spark.process.startup import fast_checkpoint_files

    class TrainingReader(DataSourceStreamReader):
        def initialOffset(self) -> dict[str, int]:
            return {"n": 0}

        def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
            return {"n": 2}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[Any]:
            return [InputPartition(i) for i in range(start["n"], end["n"])]

        def read(self, partition: Any) -> Iterator[tuple[int]]:
            yield (partition.value,)

    class TrainingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "streamtable-training"

        def schema(self) -> str:
            return "n long"

        def streamReader(self, schema: Any) -> DataSourceStreamReader:
            return TrainingReader()

    spark = spark_session("local[2]", "streamtable-jvm-archive",
                          conf={"spark.driver.extraJavaOptions":
                                f"-XX:ArchiveClassesAtExit={archive}"})
    rows = spark.range(0, 100, numPartitions=2).selectExpr(
        "id", "cast(cast(id as string) as binary) as key")
    for _ in range(2):
        rows.repartition(2, "id").mapInArrow(_train_task, "id long, key binary").toArrow()
    spark.createDataFrame([(1, b"a")], "id long, key binary").collect()

    def each_batch(df: Any, batch_id: int) -> None:
        df.columns  # noqa: B018  (the batch's plan, as a query's first look at it)
        rows.repartition(2, "id").mapInArrow(_train_task, "id long, key binary").toArrow()

    fast_checkpoint_files(spark)
    spark.dataSource.register(TrainingSource)
    with tempfile.TemporaryDirectory() as checkpoint:
        query = (spark.readStream.format("streamtable-training").load().writeStream
                 .option("checkpointLocation", checkpoint).foreachBatch(each_batch)
                 .trigger(availableNow=True).start())
        query.awaitTermination(300)
    _train_application(spark)
    print(TRAINED, flush=True)
    jvm = spark.sparkContext._jvm
    spark.stop()
    # the JVM writes the archive when it exits normally (the Python side exiting kills it)
    jvm.java.lang.System.exit(0)


if __name__ == "__main__":
    try:
        _train(sys.argv[1])
    except Exception:  # the JVM has exited (writing the archive): py4j loses its connection
        if not os.path.exists(sys.argv[1]):
            raise
