"""A stage that is not streamed hands its task the records of each topic partition as they are
needed: the order it gives is the one Kafka Streams' rules give over the whole batch of records
(``PartitionGroupOrdering.order``), whatever order the rows arrived in (no Spark needed)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark import cloudpickle

from streamtable import StreamsBuilder
from streamtable.config import StreamsConfig
from streamtable.engine.ordering import PartitionGroupOrdering
from streamtable.runtime.spark.stage import INPUT_FIELDS, StageRunner, table_records
from streamtable.state.persistence import FileTaskStatePersistence

TOPICS = ["a", "b", "c"]


def _runner(tmp_path) -> StageRunner:
    b = StreamsBuilder()
    b.stream("a").to("out")
    return StageRunner(cloudpickle.dumps(b.build()), 0, 0,
                       FileTaskStatePersistence(str(tmp_path)),
                       StreamsConfig({"application.id": "app"}).as_dict(), [], {"a": 1})


def _table(rows: list[tuple[str, int, int, int]]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"topic": t, "partition": p, "offset": o, "timestamp": ts, "key": b"k%d" % o,
          "value": b"v", "headers": None, "_end": None} for t, p, o, ts in rows],
        schema=pa.schema(INPUT_FIELDS))


def _key(r):
    return (r.topic, r.partition, r.offset, r.timestamp)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 40), min_size=1, max_size=6),
       seed=st.integers(0, 10_000),
       ranked=st.booleans(), first=st.sampled_from([None, "a", "c"]))
def test_runs_are_ordered_as_the_whole_batch(tmp_path_factory, sizes, seed, ranked,
                                             first) -> None:
    rnd = random.Random(seed)
    rows = []
    for i, size in enumerate(sizes):
        topic, partition = TOPICS[i % 3], i // 3
        rows += [(topic, partition, off, rnd.randrange(0, 20)) for off in range(size)]
    rnd.shuffle(rows)  # rows of a shuffle arrive in any order
    table = _table(rows)
    ordering = PartitionGroupOrdering({"c": 2, "b": 1} if ranked else None,
                                      frozenset({first}) if first else frozenset())
    runner = _runner(tmp_path_factory.mktemp("s"))
    got = [_key(r) for r in ordering.merge(runner._runs(table))]
    want = [_key(r) for r in ordering.order(table_records(table))]
    assert got == want
    assert len(got) == len(rows)


def test_a_row_without_a_partition_is_an_error_not_a_lost_record(tmp_path) -> None:
    table = _table([("a", 0, 0, 1), ("a", 0, 1, 1)])
    table = table.set_column(1, "partition", pa.array([0, None], pa.int32()))
    with pytest.raises(RuntimeError, match=r"1 input record\(s\) without a topic or partition"):
        _runner(tmp_path)._runs(table)


class _Writes:
    """A distributed output writer that records what it is handed."""

    distributed = True

    def __init__(self) -> None:
        self.calls: list[tuple[int, str, list[bytes]]] = []

    def write(self, batch_id, records, writer="0") -> None:
        self.calls.append((batch_id, writer, [r[1] for r in records]))


def test_a_tasks_output_is_handed_on_in_chunks_as_it_is_made(tmp_path, monkeypatch) -> None:
    """Records for external topics go to the writer every EXTERNAL_CHUNK records, each chunk
    as a writer of its own; rows for later stages become Arrow batches every ROW_CHUNK rows;
    a replay of the batch hands on the same chunks."""
    from streamtable.runtime.spark import stage

    monkeypatch.setattr(stage, "EXTERNAL_CHUNK", 4)
    monkeypatch.setattr(stage, "ROW_CHUNK", 3)
    b = StreamsBuilder()
    source = b.stream("a")
    source.to("out")
    source.repartition().to("again")  # rows for a later stage
    topology = b.build()
    writes = _Writes()
    table = _table([("a", 0, o, o) for o in range(10)])
    config = StreamsConfig({"application.id": "app", "default.key.serde": "bytes",
                            "default.value.serde": "bytes"}).as_dict()
    persistence = FileTaskStatePersistence(str(tmp_path))
    outputs = []
    for _ in range(2):  # the batch, then its replay
        runner = StageRunner(cloudpickle.dumps(topology), 0, 0, persistence, config, [],
                             {"a": 1}, output=writes)
        outputs.append(runner.run(0, table))
    keys = [b"k%d" % o for o in range(10)]
    assert writes.calls == 2 * [(0, "0-0", keys[:4]), (0, "0-0-1", keys[4:8]),
                                (0, "0-0-2", keys[8:])]
    first, replay = outputs
    assert [len(batch) for batch in first] == [3, 3, 3, 1]
    assert pa.Table.from_batches(first).equals(pa.Table.from_batches(replay))
    rows = pa.Table.from_batches(first)
    assert rows.column("kind").to_pylist() == [stage.KIND_INTERNAL] * 10
    assert rows.column("offset").to_pylist() == list(range(10))
