"""Kafka security settings on a real Spark run: executors' producers get them, and a secret never
shows in SparkConf, the query's plans, its progress, its error, or the logs."""

from __future__ import annotations

import logging
import time

import pytest
from tests.runtime.spark.harness import SOURCE_SCHEMA, source_rows
from tests.runtime.spark.kafka_util import new_topics, produce

from streamtable import StreamsBuilder
from streamtable.cli import load_app
from streamtable.runtime.spark.app import ApplicationFailedError, StreamsApp

pytestmark = pytest.mark.spark

SECRET = "pw-SENTINEL-5c2e"


def test_executor_side_producers_carry_the_client_settings(spark, tmp_path):
    builder = StreamsBuilder()
    builder.stream("in").map_values(lambda v: v + 1).to("out")
    app = StreamsApp(builder.build(), "sec-exec", "127.0.0.1:1", state_dir=tmp_path,
                     spark=spark, config={"security.protocol": "SASL_PLAINTEXT",
                                          "sasl.mechanism": "BOGUS", "sasl.password": SECRET})
    app.prepare({"in": 2})
    df = spark.createDataFrame(source_rows([("a", 1), ("b", 2)], 2), SOURCE_SCHEMA)
    with pytest.raises(Exception) as info:  # noqa: PT011 - Spark wraps the task's error
        app.process_batch(df, 0)
    # the producer of a task on an executor was built with the application's settings
    assert "Unsupported SASL mechanism: BOGUS" in str(info.value)
    assert SECRET not in str(info.value)


def test_secrets_stay_out_of_sparkconf_plans_progress_errors_and_logs(spark, bootstrap, tmp_path,
                                                                      caplog):
    caplog.set_level(logging.DEBUG)
    wc = load_app("examples/word_count/app.py")
    src, out = new_topics(bootstrap, 2, "sec-lines", "sec-counts")
    produce(bootstrap, src, [(None, b"a b a")])
    config = {k: v for k, v in wc.config.items() if k.startswith("default.")}
    config.update({"security.protocol": "PLAINTEXT", "sasl.password": SECRET,
                   "ssl.key.password": SECRET, "ssl.keystore.password": SECRET,
                   "kafka.client.id": "sec-test"})
    app = StreamsApp(wc.build_topology(src, out), f"sec-{src}", bootstrap, state_dir=tmp_path,
                     spark=spark, config=config, development_broker=True)
    app.start(available_now=True)
    app.await_termination(120)
    query = app._query
    # the PLAINTEXT broker is reached with the pass-through settings in every client
    assert app.store("counts-store").to_dict() == {"a": 2, "b": 1}
    shown = [str(spark.sparkContext.getConf().getAll()), str(spark.conf.getAll),
             query._jsq.explainInternal(True), str(query.lastProgress),
             str(query.recentProgress), repr(app.config), repr(app._output_writer())]
    app.stop()
    # a failing query: its error carries the plan
    produce(bootstrap, src, [(None, b"\xff\xfe not UTF-8")])
    app.start()
    deadline = time.monotonic() + 120
    while app.is_running and time.monotonic() < deadline:
        time.sleep(0.2)
    with pytest.raises(ApplicationFailedError) as info:
        app.raise_if_failed()
    shown += [str(info.value), str(app._query.exception())]
    app.stop()
    # every log but py4j's DEBUG one, which echoes each call to the JVM (the CLI keeps it at
    # WARNING)
    shown.append("\n".join(f"{r.name}: {r.getMessage()}" for r in caplog.records
                           if not r.name.startswith("py4j")))
    for i, text in enumerate(shown):
        assert SECRET not in text, (i, text[:3000])
    assert "streamtable" in shown[-1]  # the logs were captured
