"""A stage over one Kafka partition processes its records as they arrive, with the same result
as over the whole batch at once (no Spark needed: the stage function is called directly)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyspark import cloudpickle

from streamtable import StreamsBuilder
from streamtable.config import StreamsConfig
from streamtable.runtime.spark.plan import plan_query
from streamtable.runtime.spark.stage import RECORD_FIELDS, StageRunner
from streamtable.state.persistence import FileTaskStatePersistence


def _topology():
    b = StreamsBuilder()
    (b.table("positions")
     .filter(lambda k, p: p["exchange"] == "NASDAQ")
     .group_by(lambda k, p: (p["client"], frozenset([p["id"]])))
     .reduce(lambda a, c: a | c, lambda a, c: (a - c) or None, materialized="holders")
     .to_stream().to("out"))
    return b.build()


def _batches(n: int, chunk: int, task: int = 1, offsets=None):
    offsets = offsets or list(range(n))
    rows = []
    for i, off in enumerate(offsets):
        value = None if i % 7 == 3 else json.dumps(
            {"id": i % 40, "client": f"c{i % 5}", "exchange": "NASDAQ" if i % 3 else "LON"})
        rows.append({"topic": "positions", "partition": task, "offset": off,
                     "timestamp": 1000 + i, "key": json.dumps(i % 40).encode(),
                     "value": None if value is None else value.encode(), "headers": None,
                     "_route": task})
    schema = pa.schema(RECORD_FIELDS + [("_route", pa.int32())])
    return [pa.RecordBatch.from_pylist(rows[i:i + chunk], schema=schema)
            for i in range(0, len(rows), chunk)]


def _runner(tmp_path, name: str, streamed: bool) -> StageRunner:
    topology = _topology()
    plan = plan_query(topology, "app", {"positions": 2})
    stage = plan.stages[0]
    config = StreamsConfig({"application.id": "app"}).as_dict()
    return StageRunner(cloudpickle.dumps(topology), stage.subtopology, 0,
                       FileTaskStatePersistence(str(tmp_path / name)), config,
                       stage.queryable_stores, plan.topic_partitions, streamed=streamed)


def test_streamed_stage_gives_what_the_whole_batch_gives(tmp_path):
    batches = _batches(300, chunk=64)
    streamed = list(_runner(tmp_path, "a", True)(iter(batches)))
    whole = list(_runner(tmp_path, "b", False)(iter(batches)))
    assert len(streamed) == len(whole) == 1
    assert streamed[0].num_rows > 0
    assert streamed[0].to_pylist() == whole[0].to_pylist()


def test_streamed_stage_refuses_records_out_of_offset_order(tmp_path):
    offsets = list(range(100)) + list(range(50, 150))  # the second chunk goes back
    batches = _batches(200, chunk=100, offsets=offsets)
    with pytest.raises(RuntimeError, match="not one partition in offset order"):
        list(_runner(tmp_path, "c", True)(iter(batches)))
