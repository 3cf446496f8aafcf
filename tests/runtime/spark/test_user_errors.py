"""A user function that raises on Spark stops the application with one paragraph naming the
user's file and line, the operator as written, the key and value it held (decoded) and the input
record it came from — through a repartition too, whose topic exists only inside a batch — and
the Python API raises that paragraph as an ApplicationFailedError, Spark's error its cause."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException

from streamtable import StreamsBuilder, TopologyTestDriver
from streamtable.errors import ApplicationFailedError, ProcessingError
from streamtable.partitioner import default_partition
from streamtable.runtime.spark.app import StreamsApp
from streamtable.topology import Topology

pytestmark = pytest.mark.spark

NO_CACHE = {"cache.max.bytes.buffering": 0}


def _partition(key: bytes, partitions: int = 2) -> int:
    return default_partition(key, partitions)


def _failure(spark: Any, bootstrap: str, tmp_path: Path, topology: Topology, app_id: str,
             config: dict[str, Any] | None = None) -> ApplicationFailedError:
    app = StreamsApp(topology, app_id, bootstrap, state_dir=tmp_path, spark=spark,
                     development_broker=True, config=config)
    with pytest.raises(ApplicationFailedError) as info:
        app.run_until_caught_up(timeout=180)
    assert not app.is_running
    return info.value


def _assert_names(error: ApplicationFailedError, fn: Callable[..., Any], operator: str,
                  held: str, topic: str, partition: int, offset: int) -> None:
    """The paragraph names the user's file and line, the operator, the key and value it held
    and the input record; nothing of Spark's trace, no repartition topic, no bytes in hex."""
    text = str(error)
    assert f"{Path(__file__).name}, line {fn.__code__.co_firstlineno}, in <lambda>" in text, text
    assert f"in {operator}" in text, text
    assert f"the record there: {held}" in text, text
    assert f"[topic='{topic}' partition={partition} offset={offset}" in text, text
    assert (error.topic, error.partition, error.offset) == (topic, partition, offset)
    assert "-repartition" not in text and "0x" not in text, text
    assert "\n" not in text and len(text) < 1500, text
    assert "Traceback" not in text and "org.apache" not in text, text
    assert isinstance(error.__cause__, StreamingQueryException)  # the whole trace


def test_a_raising_filter_names_the_users_line_and_record(spark, bootstrap, new_topic, produce,
                                                          tmp_path):
    src, out = new_topic(2), new_topic(2)
    adults = lambda k, v: v["age"] >= 18  # noqa: E731 - its line is what the error must name
    b = StreamsBuilder()
    b.stream(src).filter(adults, named="adults").to(out)
    p = _partition(b'"bob"')
    produce(src, [(p, b'"ann"', b'{"age": 30}', 1000, None),
                  (p, b'"bob"', b'{"name": "bob"}', 1000, None)])
    app = StreamsApp(b.build(), f"filter-{src}", bootstrap, state_dir=tmp_path, spark=spark,
                     development_broker=True)
    app.start()
    with pytest.raises(ApplicationFailedError) as info:
        app.wait_until_ready(timeout=180)  # the query dies before any state is served
    app.stop()
    _assert_names(info.value, adults, "filter 'adults'", "key 'bob', value {'name': 'bob'}",
                  src, p, 1)
    assert info.value.processor == "adults"
    assert "KeyError: 'age'" in str(info.value)


def test_a_raising_map_values_after_a_group_by_names_the_record_before_the_repartition(
        spark, bootstrap, new_topic, produce, tmp_path):
    src, out = new_topic(2), new_topic(2)
    every_other = lambda n: 100 // (n - 2)  # noqa: E731
    b = StreamsBuilder()
    (b.stream(src).group_by(lambda k, v: v["user"]).count()
     .to_stream().map_values(every_other).to(out))
    # alice's second view (the later timestamp) makes her count 2
    produce(src, [(0, b'"v1"', b'{"user": "alice"}', 1000, None),
                  (1, b'"v2"', b'{"user": "bob"}', 1000, None),
                  (1, b'"v3"', b'{"user": "alice"}', 2000, None)])
    error = _failure(spark, bootstrap, tmp_path, b.build(), f"views-{src}", NO_CACHE)
    _assert_names(error, every_other, "map_values (KSTREAM-MAPVALUES-", "key 'alice', value 2",
                  src, 1, 1)
    assert "ZeroDivisionError: integer division or modulo by zero" in str(error)


def test_a_raising_joiner_names_the_stream_record(spark, bootstrap, new_topic, produce,
                                                  tmp_path):
    views, users, out = new_topic(2), new_topic(2), new_topic(2)
    joiner = lambda view, user: view["page"] + user["age"]  # noqa: E731
    b = StreamsBuilder()
    b.stream(views).join(b.table(users), joiner).to(out)
    p = _partition(b'"u1"')
    produce(users, [(p, b'"u1"', b'{"age": 30}', 1000, None)])
    produce(views, [(p, b'"u1"', b'{"page": "/home"}', 2000, None)])
    error = _failure(spark, bootstrap, tmp_path, b.build(), f"join-{views}")
    _assert_names(error, joiner, "join (KSTREAM-JOIN-", "key 'u1', value {'page': '/home'}",
                  views, p, 0)
    assert "TypeError" in str(error)


def test_a_raising_aggregator_names_the_record_before_the_repartition(
        spark, bootstrap, new_topic, produce, tmp_path):
    src = new_topic(2)
    add = lambda shop, order, total: total + order["amount"]  # noqa: E731
    b = StreamsBuilder()
    b.stream(src).group_by(lambda k, v: v["shop"]).aggregate(lambda: 0, add, "totals")
    produce(src, [(1, b'"o1"', b'{"shop": "s1", "amount": 5}', 1000, None),
                  (1, b'"o2"', b'{"shop": "s1"}', 1001, None)])
    error = _failure(spark, bootstrap, tmp_path, b.build(), f"totals-{src}")
    _assert_names(error, add, "aggregate (KSTREAM-AGGREGATE-", "key 's1', value {'shop': 's1'}",
                  src, 1, 1)


def test_after_two_group_bys_the_error_still_names_the_input_record(
        spark, bootstrap, new_topic, produce, tmp_path):
    src = new_topic(2)
    at_most_one = lambda total, n: total + n if total < 1 else 1 // 0  # noqa: E731
    b = StreamsBuilder()
    (b.stream(src).group_by(lambda k, v: v["user"]).count()  # repartition by user
     .to_stream().group_by(lambda user, n: "all")  # repartition again, to one key
     .reduce(at_most_one, named="budget"))
    produce(src, [(0, b'"v1"', b'{"user": "alice"}', 1000, None),
                  (1, b'"v2"', b'{"user": "bob"}', 2000, None)])
    error = _failure(spark, bootstrap, tmp_path, b.build(), f"chain-{src}", NO_CACHE)
    _assert_names(error, at_most_one, "reduce 'budget'", "key 'all', value 1", src, 1, 0)


def test_a_failure_at_the_cache_flush_names_the_record_that_made_the_change(
        spark, bootstrap, new_topic, produce, tmp_path):
    """With caching the count's change reaches map_values only when the task commits; the
    error still names the input record behind that change, as the test driver does."""
    src, out = new_topic(2), new_topic(2)
    every_other = lambda n: 100 // (n - 2)  # noqa: E731

    def topology() -> Topology:
        b = StreamsBuilder()
        (b.stream(src).group_by_key().count()
         .to_stream().map_values(every_other, named="ratio").to(out))
        return b.build()

    p = _partition(b'"alice"')
    produce(src, [(p, b'"alice"', b'"a"', 1000, None), (p, b'"alice"', b'"b"', 1001, None)])
    error = _failure(spark, bootstrap, tmp_path, topology(), f"flush-{src}")
    _assert_names(error, every_other, "map_values 'ratio'", "key 'alice', value 2", src, p, 1)
    # the test driver names the same record, operator and line
    driver = TopologyTestDriver(topology())
    with pytest.raises(ProcessingError) as info:
        driver.pipe_raw(src, b'"alice"', b'"a"', 1000, partition=p)
        driver.pipe_raw(src, b'"alice"', b'"b"', 1001, partition=p)
    assert str(info.value) in str(error)


def test_run_until_caught_up_raises_the_paragraph_the_cli_prints(spark, bootstrap, new_topic,
                                                                 produce, tmp_path):
    src = new_topic(1)
    b = StreamsBuilder()
    b.stream(src).to(new_topic(1))
    produce(src, [(0, b'"k"', b"not json", 1000, None)])
    app = StreamsApp(b.build(), f"paragraph-{src}", bootstrap, state_dir=tmp_path, spark=spark,
                     development_broker=True)
    with pytest.raises(ApplicationFailedError) as info:
        app.run_until_caught_up(timeout=180)
    with pytest.raises(ApplicationFailedError) as again:
        app.raise_if_failed()  # what the CLI prints
    assert str(info.value) == str(again.value)
    assert str(info.value).startswith(f"paragraph-{src} has stopped: its query failed")
    assert "DeserializationError: cannot decode value" in str(info.value)
    assert "\n" not in str(info.value) and len(str(info.value)) < 1000
    assert isinstance(info.value.__cause__, StreamingQueryException)
    assert "streamtable.errors.DeserializationError" in str(info.value.__cause__)


def test_wait_until_ready_and_the_http_api_say_when_there_is_no_state_yet(
        spark, bootstrap, new_topic, produce, tmp_path):
    import httpx

    from streamtable.kafka.broker import free_port
    from streamtable.serving.http import serve_queries

    src = new_topic(1)
    gate = tmp_path / "open"

    def wait_for_gate(value: Any) -> Any:  # holds the first batch until the test opens it
        deadline = time.monotonic() + 120
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return value

    b = StreamsBuilder()
    b.stream(src).map_values(wait_for_gate).group_by_key().count("counts")
    produce(src, [(0, b'"k"', b'"v"', 1000, None)])
    app = StreamsApp(b.build(), f"ready-{src}", bootstrap, state_dir=tmp_path / "state",
                     spark=spark, development_broker=True)
    assert not app.is_ready
    app.start()
    server = serve_queries(app, "127.0.0.1", free_port())
    try:
        early = app.store("counts")  # a view taken at start reads the state once it is there
        assert not app.is_ready and early.get("k") is None
        assert app.health()[1]["ready"] is False
        answer = httpx.get(f"{server.url}/stores/counts/keys/k", timeout=10)
        assert answer.status_code == 503 and "no state yet" in answer.json()["detail"]
        with pytest.raises(TimeoutError):
            app.wait_until_ready(timeout=0.5)
        gate.touch()
        assert app.wait_until_ready(timeout=180) is app
        assert app.is_ready and app.health()[1]["ready"] is True
        assert early.get("k") == 1 and app.store("counts").get("k") == 1
        answer = httpx.get(f"{server.url}/stores/counts/keys/k", timeout=10)
        assert answer.status_code == 200 and answer.json()["value"] == 1
    finally:
        gate.touch()
        server.stop()
        app.stop()
    with pytest.raises(RuntimeError, match="not running"):
        StreamsApp(b.build(), f"idle-{src}", bootstrap, state_dir=tmp_path / "idle",
                   spark=spark).wait_until_ready(timeout=1)


PAGEVIEWS = '''from streamtable import StreamsBuilder

config = {{"application.id": "pageviews", "cache.max.bytes.buffering": 0}}


def build_topology():
    b = StreamsBuilder()
    views = b.stream({src!r}).group_by(lambda page, view: view["user"]).count()
    views.to_stream().map_values(lambda n: 100 // (n - 2)).to({out!r})
    return b.build()
'''


def test_the_cli_prints_the_paragraph_the_api_raises(spark, bootstrap, new_topic, produce,
                                                     tmp_path):
    import os
    import subprocess
    import sys

    from streamtable.cli import app_topology, load_app

    src, out = new_topic(2), new_topic(2)
    app_file = tmp_path / "pageviews.py"
    app_file.write_text(PAGEVIEWS.format(src=src, out=out))
    produce(src, [(0, b'"/a"', b'{"user": "alice"}', 1000, None),
                  (1, b'"/b"', b'{"user": "alice"}', 2000, None)])
    root = Path(__file__).resolve().parents[3]
    env = dict(os.environ, PYTHONPATH=str(root / "src"), STREAMTABLE_SPARK_LOG_LEVEL="ERROR")
    proc = subprocess.run(
        [sys.executable, "-m", "streamtable.cli", "run", str(app_file), "--bootstrap-servers",
         bootstrap, "--state-dir", str(tmp_path / "cli-state"), "--development-broker",
         "--until-caught-up"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    ours = [line for line in proc.stderr.splitlines() if line.startswith("streamtable: ")]
    assert len(ours) == 1, proc.stderr[-3000:]
    printed = ours[0].removeprefix("streamtable: ")
    # run from the application's directory: its file is named as the user knows it
    assert "in map_values (KSTREAM-MAPVALUES-0000000008), at pageviews.py, line 9, in <lambda>: "\
        "`views.to_stream().map_values(lambda n: 100 // (n - 2)).to(" in printed, printed
    assert f"[topic='{src}' partition=1 offset=0" in printed and "repartition" not in printed
    assert "Traceback" not in proc.stderr

    module = load_app(str(app_file))
    app = StreamsApp(app_topology(module), "pageviews", bootstrap,
                     state_dir=tmp_path / "api-state", spark=spark, development_broker=True,
                     config=module.config)
    with pytest.raises(ApplicationFailedError) as info:
        app.run_until_caught_up(timeout=180)
    raised = str(info.value).replace(str(app_file), "pageviews.py")
    # the same paragraph, up to where Spark's full error is (a log file for the CLI)
    assert printed.split(" Spark's full error is in ")[0] == \
        raised.split(" Spark's full error is in ")[0]
