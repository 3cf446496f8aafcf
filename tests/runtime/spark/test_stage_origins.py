"""A stage's rows for repartition topics carry the position of the input record behind each
(its origin), across Arrow chunks, for one row or many per record, and through a second
repartition; the next stage finds a record's origin in its input rows (no Spark needed)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyspark import cloudpickle

from streamtable import StreamsBuilder
from streamtable.config import StreamsConfig
from streamtable.runtime.spark import stage as stage_module
from streamtable.runtime.spark.stage import INPUT_FIELDS, KIND_INTERNAL, StageRunner
from streamtable.state.persistence import FileTaskStatePersistence
from streamtable.topology import Topology

CONFIG = StreamsConfig({"application.id": "app", "default.key.serde": "string",
                        "default.value.serde": "string",
                        "cache.max.bytes.buffering": 0}).as_dict()


def _input(records: list[tuple[str, int, int, str]]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"topic": t, "partition": p, "offset": o, "timestamp": 1000 + o, "key": b"k",
          "value": v.encode()} for t, p, o, v in records], schema=pa.schema(INPUT_FIELDS))


def _run(topology: Topology, sub: int, table: pa.Table, tmp_path: Any) -> pa.Table:
    runner = StageRunner(cloudpickle.dumps(topology), sub, 0,
                         FileTaskStatePersistence(str(tmp_path)), CONFIG, [], {"lines": 1})
    out = pa.Table.from_batches(runner.run(0, table))
    return out.filter(pa.compute.equal(out.column("kind"), KIND_INTERNAL))


def _origins(rows: pa.Table) -> list[tuple[str, int, int]]:
    return list(zip(*(rows.column(c).to_pylist()
                      for c in ("origin_topic", "origin_partition", "origin_offset")),
                    strict=True))


@pytest.mark.parametrize("chunk", [3, 8192])  # origins as lists, and run-end decoded
def test_each_row_for_a_repartition_names_the_input_record_behind_it(tmp_path, monkeypatch,
                                                                     chunk):
    monkeypatch.setattr(stage_module, "ROW_CHUNK", chunk)  # origins across chunk boundaries
    b = StreamsBuilder()
    b.stream("lines").flat_map_values(str.split).group_by(lambda k, w: w).count()
    lines = ["a b c", "d", "", "e f", "g h i j k", " ".join("lmnopqrstuvwxyz")]
    rows = _run(b.build(), 0, _input([("lines", 0, 10 + i, v) for i, v in enumerate(lines)]),
                tmp_path)
    expected = [("lines", 0, 10 + i) for i, v in enumerate(lines) for _ in v.split()]
    assert _origins(rows) == expected


def test_a_second_repartition_keeps_the_first_records_origin(tmp_path):
    b = StreamsBuilder()
    (b.stream("lines").group_by(lambda k, v: v).count()
     .to_stream().group_by(lambda word, n: "all").reduce(lambda a, n: a + n))
    topology = b.build()
    first = _run(topology, 0, _input([("lines", 0, 5, "x"), ("lines", 0, 6, "y")]), tmp_path)
    assert _origins(first) == [("lines", 0, 5), ("lines", 0, 6)]
    second_input = first.drop_columns(["kind", "route"]).append_column(
        "_end", pa.nulls(first.num_rows, pa.int64())).select(
            [name for name, _ in INPUT_FIELDS]).cast(pa.schema(INPUT_FIELDS))
    second = _run(topology, 1, second_input, tmp_path / "second")
    assert _origins(second) == [("lines", 0, 5), ("lines", 0, 6)]
