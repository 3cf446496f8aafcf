"""Routing labels are computed without Spark, with Spark's own hash: checked against Spark."""

from __future__ import annotations

import pytest

from streamtable.runtime.spark.plan import routing_labels, spark_hash_long

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
