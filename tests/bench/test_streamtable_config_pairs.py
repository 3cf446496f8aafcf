"""The streamtable contenders' command lines (Nexmark, operators, W1/W2): ``--config`` pairs go to
the application, and ``spark.*`` ones to the Spark session the bench makes (an application
given a session ignores them)."""

from __future__ import annotations

from bench.contenders.common import split_config


def test_spark_keys_go_to_the_session_and_the_rest_to_the_application() -> None:
    settings, spark = split_config(["max.records.per.batch=5000", "spark.eventLog.enabled=true",
                                    "default.dsl.store=rocksDB", "spark.eventLog.dir=/tmp/e",
                                    "worker.memory.budget.bytes=-1"])
    assert settings == {"max.records.per.batch": 5000, "default.dsl.store": "rocksDB",
                        "worker.memory.budget.bytes": -1}
    assert spark == {"spark.eventLog.enabled": "true", "spark.eventLog.dir": "/tmp/e"}
