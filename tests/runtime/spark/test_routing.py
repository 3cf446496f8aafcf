"""Routing labels and the task of a repartitioned record are computed without Spark, with
Spark's own hash: checked against Spark."""

from __future__ import annotations

import pytest

from streamtable.partitioner import spark_hash_long, task_of
from streamtable.runtime.spark.plan import routing_labels

pytestmark = pytest.mark.spark


def test_hash_and_labels_agree_with_spark(spark):
    from pyspark.sql import functions as F

    extremes = spark.createDataFrame([(2**62,), (-(2**63),), (2**63 - 1,), (-1,)], "id long")
    rows = (spark.range(-3000, 3000).union(extremes)
            .select("id", F.expr("hash(id)").alias("h")).collect())
    assert [spark_hash_long(r.id) for r in rows] == [r.h for r in rows]
    for p in (1, 2, 3, 5, 8, 13, 32):
        labels = routing_labels(p)
        got = (spark.createDataFrame([(x,) for x in labels], "label long")
               .select(F.expr(f"pmod(hash(label), {p})").alias("t")).collect())
        assert [r.t for r in got] == list(range(p))


def test_task_of_a_binary_key_agrees_with_spark(spark):
    """The test driver's batch mode routes repartitioned records with ``task_of``; the Spark
    runtime with ``pmod(hash(key), tasks)``: the same task for every key length and byte."""
    import random

    rng = random.Random(7)
    keys = [bytes(rng.randrange(256) for _ in range(n)) for n in range(0, 40) for _ in range(8)]
    keys += [b"client1", "k\u00e9y".encode(), b"\xff\x80\x7f", None]
    df = spark.createDataFrame([(k,) for k in keys], "key binary")
    for tasks in (1, 2, 3, 7):
        rows = df.selectExpr("key", f"pmod(hash(key), {tasks}) AS t").collect()
        assert len(rows) == len(keys)
        assert [task_of(r.key, None, tasks) for r in rows] == [r.t for r in rows]
