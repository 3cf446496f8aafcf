"""A prepared flow is planned for its next run while the driver finishes a batch: the next run
uses those Datasets, computes every stage again (a new shuffle, nothing of the earlier run is
reused) and gives what an unplanned run gives."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from streamtable.runtime.spark.dataflow import Dataflow

pytestmark = pytest.mark.spark


def _counting_flow(spark: Any) -> tuple[Dataflow, Any]:
    """A flow whose stage before the shuffle counts the rows it sees (an accumulator)."""
    seen = spark.sparkContext.accumulator(0)

    def count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            seen.add(b.num_rows)
            yield b

    df = (spark.range(0, 20, 1, 2).mapInArrow(count, "id long")
          .repartition(2, "id").selectExpr("id", "id * 3 AS v"))
    return Dataflow(result=df.where("v % 2 = 0")), seen


def _rows(table: pa.Table) -> list[tuple[int, int]]:
    return sorted(zip(table.column("id").to_pylist(), table.column("v").to_pylist(),
                      strict=True))


def _shuffled_records(df: Any) -> int:
    """Records the shuffle of ``df``'s physical plan wrote (0 before it ran)."""
    nodes = [df._jdf.queryExecution().executedPlan()]
    while nodes:
        node = nodes.pop()
        if node.getClass().getSimpleName() == "ShuffleExchangeExec":
            return int(node.metrics().get("shuffleRecordsWritten").get().value())
        children = node.children()
        nodes.extend(children.apply(i) for i in range(children.size()))
        if node.getClass().getSimpleName() == "InputAdapter":
            nodes.append(node.child())
    raise AssertionError("no shuffle in the plan")


def test_a_flow_planned_ahead_runs_again_from_its_input(spark) -> None:
    flow, seen = _counting_flow(spark)
    first = _rows(flow.collect())
    assert first == [(i, 3 * i) for i in range(0, 20, 2)]
    assert seen.value == 20

    flow.plan_ahead()
    assert flow._ahead is not None
    planned, _ = flow._ahead.result(timeout=120)
    assert _shuffled_records(planned) == 0
    again = _rows(flow.collect())
    assert flow._ahead is None  # taken by the run
    assert again == first
    assert seen.value == 40  # the stage before the shuffle ran again
    assert _shuffled_records(planned) == 10  # the run was the planned Dataset (filter first)

    flow.plan_ahead()
    flow.plan_ahead()  # planned once: a second call keeps the first plan
    third = _rows(flow.collect())
    assert third == first and seen.value == 60


def test_a_flow_that_keeps_stage_outputs_is_planned_when_it_runs(spark) -> None:
    flow, _ = _counting_flow(spark)
    flow.cached.append(flow.result)
    flow.plan_ahead()
    assert flow._ahead is None
    assert _rows(flow.collect()) == [(i, 3 * i) for i in range(0, 20, 2)]
