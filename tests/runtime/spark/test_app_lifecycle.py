"""A dead application does not look like an empty one; stopping leaves no listener behind."""

from __future__ import annotations

import time

import pytest
from tests.runtime.spark.kafka_util import new_topics, produce

from streamtable.cli import load_app
from streamtable.runtime.spark.app import ApplicationFailedError, StreamsApp
from streamtable.runtime.spark.progress import _LISTENERS

pytestmark = pytest.mark.spark


def _word_count(src: str, out: str):
    return load_app("examples/word_count/app.py").build_topology(src, out)


def test_a_failed_query_makes_store_queries_raise(spark, bootstrap, tmp_path):
    src, out = new_topics(bootstrap, 2, "dead-lines", "dead-counts")
    produce(bootstrap, src, [(None, b"plain text is not JSON")])
    # the default serdes are JSON: the line cannot be decoded and the default handler fails
    app = StreamsApp(_word_count(src, out), f"dead-{src}", bootstrap, state_dir=tmp_path,
                     spark=spark, development_broker=True)
    app.start()
    deadline = time.monotonic() + 120
    while app.is_running and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not app.is_running
    with pytest.raises(ApplicationFailedError, match="cannot decode value"):
        app.store("counts-store").get("plain")
    app.stop()
    with pytest.raises(ApplicationFailedError):  # still, after stop
        app.store("counts-store").get("plain")
    assert id(spark) not in _LISTENERS  # no Python listener left for the JVM to call


def test_run_until_caught_up_stops_and_unregisters(spark, bootstrap, tmp_path):
    wc = load_app("examples/word_count/app.py")
    src, out = new_topics(bootstrap, 2, "ok-lines", "ok-counts")
    produce(bootstrap, src, [(None, b"a b a")])
    app = StreamsApp(wc.build_topology(src, out), f"ok-{src}", bootstrap, state_dir=tmp_path,
                     spark=spark, config={k: v for k, v in wc.config.items()
                                          if k.startswith("default.")},
                     development_broker=True)
    app.run_until_caught_up(timeout=120)
    assert app.store("counts-store").to_dict() == {"a": 2, "b": 1}
    assert not app.is_running and id(spark) not in _LISTENERS


def test_idle_planners_end_once_a_query_runs_and_the_next_query_starts(
        spark, bootstrap, tmp_path):
    """Spark's data source planners keep a forked worker idle for a minute, and the daemons
    they fork from for the session's life: the first batch ends both, and a query started
    after that plans with new ones."""
    import os

    from streamtable.runtime.spark.process.startup import (
        _processes,
        descends_from,
        planner_workers,
        runs_planner_job,
    )

    def planners() -> list[str]:  # Spark's planner daemons and workers under this process
        procs = _processes()
        return [cmd for pid, (_, cmd, _) in procs.items()
                if runs_planner_job(cmd) and descends_from(pid, os.getpid(), procs)]

    wc = load_app("examples/word_count/app.py")
    config = {k: v for k, v in wc.config.items() if k.startswith("default.")}
    for round_ in range(2):
        src, out = new_topics(bootstrap, 2, f"planner-lines-{round_}", "planner-counts")
        produce(bootstrap, src, [(None, b"a b a")])
        app = StreamsApp(wc.build_topology(src, out), f"planner-{src}", bootstrap,
                         state_dir=tmp_path / str(round_), spark=spark, config=config,
                         development_broker=True)
        app.run_until_caught_up(timeout=120)
        assert app.store("counts-store").to_dict() == {"a": 2, "b": 1}
        deadline = time.monotonic() + 30  # idle workers are ended after a second without CPU
        while planners() and time.monotonic() < deadline:
            time.sleep(0.2)
        procs = _processes()
        assert [procs[p][1] for p in planner_workers(os.getpid(), procs)] == []
        assert planners() == []
