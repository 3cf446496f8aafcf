"""Batches sized to the Python workers' memory budget (``worker.memory.budget.bytes``): a
batch whose tasks grew past the budget makes the next batch smaller, and the results stay
exact."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tests.runtime.spark.kafka_util import new_topics, produce, read_all

from streamtable import StreamsBuilder
from streamtable.runtime.spark import StreamsApp
from streamtable.runtime.spark.budget import (
    FIRST_GROWTH_KEY,
    GROWTH_KEY,
    MIN_BATCH_RECORDS,
    TaskMemory,
)

pytestmark = pytest.mark.spark


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="measured from /proc")
def test_a_task_measures_how_much_its_process_grew():
    memory = TaskMemory()
    held = bytearray(64 * 2**20)
    held[::4096] = b"x" * len(held[::4096])  # touch every page
    growth = memory.growth()
    assert growth is not None and growth >= 60 * 2**20
    del held


def test_a_workers_first_task_reports_its_growth_apart():
    # in a process of its own, as a worker forked from the daemon: no task measured before
    code = ("from streamtable.runtime.spark.budget import TaskMemory\n"
            "print(*[TaskMemory().key for _ in range(3)])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == [FIRST_GROWTH_KEY, GROWTH_KEY, GROWTH_KEY]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="measured from /proc")
@pytest.mark.parametrize("budget", [1, 0])
def test_batches_shrink_to_the_budget_with_exact_results(spark, bootstrap, tmp_path, budget):
    src, out = new_topics(bootstrap, 2, "in", "out")
    b = StreamsBuilder()
    b.stream(src).group_by_key().count(materialized="counts").to_stream().to(out)
    n = 4 * MIN_BATCH_RECORDS
    produce(bootstrap, src, [(json.dumps(f"k{i % 50}").encode(), b"1") for i in range(n)])
    app = StreamsApp(b.build(), f"budget-{budget}-{src}", state_dir=str(tmp_path), spark=spark,
                     config={"bootstrap.servers": bootstrap,
                             "max.records.per.batch": 2 * MIN_BATCH_RECORDS,
                             "worker.memory.budget.bytes": budget},
                     development_broker=True)
    app.run_until_caught_up(timeout=300)
    assert app.store("counts").to_dict() == {f"k{i}": n // 50 for i in range(50)}
    limit = app._micro_batches().batch_limit_file
    if budget:  # sized for one byte before and after it was measured: the least, 1,000, each
        assert app.batches == 4
        assert limit.exists()
    else:  # no budget: batches of max.records.per.batch
        assert app.batches == 2
        assert not limit.exists()


@pytest.mark.parametrize(("stateful", "config", "first"), [
    (True, {}, "131072"),  # no batch measured yet: the default budget over 2 KiB a record
    (True, {"worker.memory.budget.bytes": 64 * 2**20}, "32768"),
    (True, {"worker.memory.budget.bytes": 64 * 2**20, "first.batch.records": 500}, "500"),
    (True, {"worker.memory.budget.bytes": 0}, None),  # no budget: the cap from the start
    (False, {}, None),  # stateless tasks stream their records: the cap from the start
    (False, {"first.batch.records": 500}, "500"),
])
def test_the_first_batch_after_a_start_is_sized_for_the_budget(tmp_path, stateful, config,
                                                                 first):
    b = StreamsBuilder()
    stream = b.stream("in")
    if stateful:
        stream.group_by_key().count().to_stream().to("out")
    else:
        stream.map_values(lambda v: v).to("out")
    app = StreamsApp(b.build(), "first-batch", state_dir=str(tmp_path),
                     config={"bootstrap.servers": "127.0.0.1:9", **config})
    assert app.source_options(app.prepare({"in": 1})).get("first.batch.records") == first


def _pids_of_tasks(spark, bootstrap, tmp_path, recycle: int, stateful: bool) -> tuple[int, int]:
    """(tasks run, distinct Python workers that ran them) of a query of 4 batches of 2
    partitions whose records carry the pid of the worker that processed them."""
    src, out = new_topics(bootstrap, 2, "in", "out")
    b = StreamsBuilder()
    s = b.stream(src)
    s.map_values(lambda v: str(os.getpid())).to(out)
    if stateful:  # an in-memory store: its worker keeps the working copy between batches
        s.group_by_key().count(materialized="counts")
    produce(bootstrap, src, [(json.dumps(f"k{i % 50}").encode(), b"1") for i in range(4000)])
    app = StreamsApp(b.build(), f"recycle-{recycle}-{stateful}-{src}", state_dir=str(tmp_path),
                     spark=spark,
                     config={"bootstrap.servers": bootstrap, "max.records.per.batch": 1000,
                             "worker.memory.budget.bytes": 0,
                             "worker.memory.recycle.bytes": recycle},
                     development_broker=True)
    app.run_until_caught_up(timeout=300)
    assert app.batches == 4
    results = read_all(bootstrap, out)
    assert len(results) == 4000  # nothing lost where a worker ended
    return app.batches * 2, len({m.value() for m in results})


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="measured from /proc")
def test_a_worker_over_its_memory_limit_is_replaced_after_its_task(spark, bootstrap, tmp_path):
    tasks, workers = _pids_of_tasks(spark, bootstrap, tmp_path, recycle=1, stateful=False)
    assert workers == tasks  # every task in a new worker, and every result there
    tasks, workers = _pids_of_tasks(spark, bootstrap, tmp_path, recycle=0, stateful=False)
    assert workers < tasks
    # a worker that keeps in-memory stores' working copies is kept
    tasks, workers = _pids_of_tasks(spark, bootstrap, tmp_path, recycle=1, stateful=True)
    assert workers < tasks
