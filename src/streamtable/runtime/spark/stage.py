"""One sub-topology over one batch, inside a Spark task (``mapInArrow``): a thin host of the
engine.

The function reads the task's records of the batch (rows of its input, or offset ranges of a
Kafka partition that it reads itself: rows whose ``_end`` is set), checks out the task's state
as of the previous batch from the task-state persistence port, runs the same :class:`Task` the
test driver runs over the records in the engine's partition-group order, commits the state, writes
its records for external topics through a distributed output writer (as writer
``<sub-topology>-<task>``, exactly once per batch) and returns the records for later stages and
the changes of its queryable stores (and, with a driver-side writer, the external records too).

A stage holding a user's processor (the Processor API) may punctuate on wall-clock time, which
must happen for each of its tasks in every micro-batch, records or not. Its input then carries
one heartbeat row per task (a row without a topic, see ``StreamsApp``), so every task runs;
the heartbeat is not a record. After its records (stream-time punctuation follows each, as in
the test driver) the task fires the wall-clock punctuations due at ``wall_clock_ms``, the
batch's time as the driver recorded it with the batch id: a replay punctuates the same way.

A row for a repartition topic carries the position of the input record it came from
(``ORIGIN_FIELDS``, made when rows become a record batch, see ``_Collector``); a later stage
finds it in its input rows only when it needs it (``InputOrigins``): an error there names the
input record, and a repartition topic, which exists only inside the batch, never.

A runner built once for every micro-batch of a query (``batch_id=None``) learns its batch from
the batch context the driver sets on the Spark job (:func:`batch_context`, a local property
tasks receive): the batch id, its wall-clock time and the offset range of each Kafka partition.
Its input rows then name partitions only (``offset`` and ``_end`` both ``PARTITION_RANGE``), and
a task whose partitions have no records in the batch does nothing, as a task without rows.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from itertools import chain
from operator import attrgetter
from typing import Any, NoReturn

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from streamtable.config import StreamsConfig
from streamtable.engine.batch import BatchResult, Records, run_task_batch
from streamtable.engine.ports import OutputWriter, TaskStatePersistence
from streamtable.engine.task import OriginFinder, origin_of
from streamtable.engine.wiring import Wiring, wire
from streamtable.kafka.ranges import RangeReader
from streamtable.records import Headers, Origin, OutputRecord, RawRecord, RecordRun
from streamtable.runtime.spark.budget import TaskMemory, recycle_above
from streamtable.serving.codec import encode_key, encode_value
from streamtable.serving.metrics import DEAD_LETTERED, DROPPED, RECORDS_IN, RECORDS_OUT
from streamtable.topology.graph import Topology

log = logging.getLogger(__name__)

KIND_INTERNAL = 0  # to a repartition topic: input of a later stage of the same batch
KIND_EXTERNAL = 1  # to a Kafka topic
KIND_STORE = 2  # a change of a queryable store, for the serving store

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
RECORD_FIELDS = [
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", pa.int64()),
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("headers", HEADERS_TYPE),
]
RECORD_DDL = (
    "topic string, partition int, offset bigint, timestamp bigint, key binary, value binary, "
    "headers array<struct<key:string,value:binary>>"
)
# A record of a repartition topic carries the position of the input record it came from
# (``RawRecord.origin``), null for any other row: an error downstream names that record.
ORIGIN_FIELDS = [
    ("origin_topic", pa.string()),
    ("origin_partition", pa.int32()),
    ("origin_offset", pa.int64()),
]
ORIGIN_DDL = "origin_topic string, origin_partition int, origin_offset bigint"
# route: for a record to a repartition topic, the task that must receive it when its sink chose
# one (co-partitioning with an external topic); otherwise the key's hash decides.
# A stage's input: records, and offset ranges of Kafka partitions for the task to read itself
# (``offset`` = the first offset, ``_end`` = the end, exclusive; null for a record).
INPUT_FIELDS = RECORD_FIELDS + ORIGIN_FIELDS + [("_end", pa.int64())]
OUTPUT_SCHEMA = pa.schema([("kind", pa.int8())] + RECORD_FIELDS + [("route", pa.int32())]
                          + ORIGIN_FIELDS)
OUTPUT_DDL = (
    "kind tinyint, topic string, partition int, offset bigint, timestamp bigint, key binary, "
    f"value binary, headers array<struct<key:string,value:binary>>, route int, {ORIGIN_DDL}"
)

# ``offset`` and ``_end`` of an input row that stands for "this partition's range of the batch,
# from the batch context"
PARTITION_RANGE = -1
_CONTEXT_KEY = "streamtable.batch."


def batch_context_key(application_id: str) -> str:
    """The Spark local property carrying an application's batch context to its tasks."""
    return _CONTEXT_KEY + application_id


def batch_context(batch_id: int, wall_clock_ms: int,
                  ranges: Iterable[tuple[str, int, int, int]]) -> str:
    """The batch context of one micro-batch, as the driver hands it to the tasks (JSON).

    >>> batch_context(7, 0, [("t", 1, 5, 9)])
    '{"batch": 7, "clock": 0, "ranges": [["t", 1, 5, 9]]}'
    """
    return json.dumps({"batch": batch_id, "clock": wall_clock_ms,
                       "ranges": [list(r) for r in ranges]})


_TOPOLOGIES: dict[int, tuple[Topology, dict[str, Wiring]]] = {}


def _topology(blob: bytes, config: StreamsConfig) -> tuple[Topology, Wiring]:
    """The topology of ``blob`` and its wiring, unpickled and resolved once per worker."""
    key = hash(blob)
    entry = _TOPOLOGIES.get(key)
    if entry is None:
        from pyspark import cloudpickle

        entry = _TOPOLOGIES[key] = (cloudpickle.loads(blob), {})
    topology, wirings = entry
    wiring = wirings.get(config.application_id)
    if wiring is None:
        wiring = wirings[config.application_id] = wire(topology, config)
    return topology, wiring


# A task's output is not held whole: every ``ROW_CHUNK`` rows become an Arrow record batch (a few
# dozen bytes a row instead of a Python tuple's few hundred), and a distributed writer is handed
# every ``EXTERNAL_CHUNK`` records for external topics as they are produced.
ROW_CHUNK = 8192
EXTERNAL_CHUNK = 20_000


class _Collector:
    """Gathers a task's output (the stage's
    :class:`~streamtable.engine.ports.RecordCollector`): rows for later stages and the driver,
    in Arrow record batches of ``ROW_CHUNK`` rows, and, with a distributed ``output`` writer,
    records for external topics written in chunks of ``EXTERNAL_CHUNK`` as they come, chunk
    ``n`` as writer ``<writer>`` (n = 0) or ``<writer>-<n>``: a replayed task makes the same
    records in the same order, so each chunk is exactly once by its own batch markers."""

    def __init__(self, internal_topics: frozenset[str], task_id: int,
                 output: OutputWriter | None = None, batch_id: int = 0,
                 writer: str = "") -> None:
        self.internal = internal_topics
        self.task_id = task_id
        # (kind, topic, partition, offset, timestamp, key, value, headers, route)
        self.rows: list[tuple[Any, ...]] = []
        # The origin of rows for repartition topics (ORIGIN_FIELDS) is made when rows become a
        # record batch, from where the input record behind them changes: (index in ``rows``,
        # that record); a record sent without a task has none. A record usually sends one row
        # or several in a row, so this costs a comparison per row, not an origin. Marks are
        # at increasing rows: as many marks as rows means a mark per row.
        self._marks: list[tuple[int, RawRecord | None]] = []
        self._cause: RawRecord | None = None
        self._task: Any = None  # the task collected for (bind), whose input record is read
        # the origins of this task's input records of repartition topics (set by the stage)
        self.find_origin: OriginFinder | None = None
        self.batches: list[pa.RecordBatch] = []
        self._count = 0  # rows so far: the next row's offset
        self.output = output
        self.batch_id = batch_id
        self.writer = writer
        # records for external topics not written yet
        self.external: list[OutputRecord] = []
        self._chunks = 0
        self.sent: Counter[str] = Counter()  # records for external topics, per topic

    def _row(self, row: tuple[Any, ...]) -> None:
        self.rows.append(row)
        self._count += 1
        if len(self.rows) >= ROW_CHUNK:
            self._batch_rows()

    def _batch_rows(self) -> None:
        self.batches.append(_to_batch(self.rows, self._origins()))
        self.rows = []
        # the record behind the last rows may send more: it goes on at the next chunk's start
        self._marks = [(0, self._cause)] if self._marks else []

    def bind(self, task: Any) -> None:
        """Collect for ``task`` (see ``RecordCollector``): rows for repartition topics keep
        the origin of its input record being processed."""
        self._task = task

    def _origins(self) -> list[pa.Array] | None:
        """The ORIGIN_FIELDS columns of ``rows`` (None: no row has one)."""
        marks = self._marks
        if not marks:
            return None
        n = len(self.rows)
        if len(marks) == n and (columns := _positions([c for _, c in marks],
                                                      self.internal)) is not None:
            # a row per input record of an input topic, the usual case: columns at once
            return [pa.array(column, kind) for column, (_, kind) in zip(columns, ORIGIN_FIELDS,
                                                                         strict=True)]
        ends: list[int] = []
        values: tuple[list[Any], list[Any], list[Any]] = ([], [], [])
        if marks[0][0]:  # rows sent before the task processed anything
            ends.append(marks[0][0])
            for column in values:
                column.append(None)
        topics, partitions, offsets = values
        internal, find = self.internal, self.find_origin
        for (start, cause), end in zip(marks, [m[0] for m in marks[1:]] + [n], strict=True):
            if end == start:
                continue
            ends.append(end)
            if cause is not None and cause.origin is None and cause.topic not in internal:
                topics.append(cause.topic)  # the common case, spelled out: once per record
                partitions.append(cause.partition)
                offsets.append(cause.offset)
            else:
                t, p, o = origin_of(cause, internal, find)
                topics.append(t)
                partitions.append(p)
                offsets.append(o)
        if len(ends) * 4 <= n:  # runs of rows with one origin: decoded in Arrow
            run_ends = pa.array(ends, pa.int32())
            return [pa.compute.run_end_decode(pa.RunEndEncodedArray.from_arrays(
                run_ends, pa.array(column, kind))) for column, (_, kind) in zip(
                    values, ORIGIN_FIELDS, strict=True)]
        if len(ends) < n:  # a few rows share their origin: repeated here
            lengths = [b - a for a, b in zip([0, *ends[:-1]], ends, strict=True)]
            for i, column in enumerate(values):
                flat: list[Any] = []
                for value, k in zip(column, lengths, strict=True):
                    flat += [value] * k
                values[i][:] = flat
        return [pa.array(column, kind) for column, (_, kind) in zip(values, ORIGIN_FIELDS,
                                                                     strict=True)]

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
             headers: Headers, partition: int | None) -> None:
        if topic in self.internal:
            cause = None if self._task is None else self._task.current_raw
            marks = self._marks
            if cause is not self._cause or not marks:
                row = len(self.rows)
                if marks and marks[-1][0] == row:  # the last mark has no row: replaced
                    marks[-1] = (row, cause)
                else:
                    marks.append((row, cause))
                self._cause = cause
            hs = [{"key": k, "value": v} for k, v in headers] if headers else None
            self._row((KIND_INTERNAL, topic, self.task_id, self._count, timestamp,
                       key, value, hs, partition))
        elif self.output is not None:
            self.sent[topic] += 1
            self.external.append((topic, key, value, timestamp,
                                  list(headers) if headers else [], partition))
            if len(self.external) >= EXTERNAL_CHUNK:
                self.write_external()
        else:
            self.sent[topic] += 1
            hs = [{"key": k, "value": v} for k, v in headers] if headers else None
            self._row((KIND_EXTERNAL, topic, partition, self._count, timestamp,
                       key, value, hs, None))

    def write_external(self) -> None:
        """Hand the records for external topics held so far to the writer, as the next
        chunk."""
        if self.output is None or not self.external:
            return
        n = self._chunks
        self.output.write(self.batch_id, self.external,
                          writer=self.writer if n == 0 else f"{self.writer}-{n}")
        self._chunks = n + 1
        self.external = []

    def add_store_changes(self, store: str, changes: dict[Any, Any]) -> None:
        for k, v in changes.items():
            self._row((KIND_STORE, store, self.task_id, self._count,
                       -1 if v is None else v[1], encode_key(k),
                       None if v is None else encode_value(v), None, None))

    def to_batches(self) -> list[pa.RecordBatch]:
        """Every row, as record batches (one empty batch when there is none)."""
        if self.rows or not self.batches:
            self._batch_rows()
        return self.batches


def _positions(causes: list[RawRecord | None], internal: frozenset[str]
               ) -> tuple[list[Any], list[Any], list[Any]] | None:
    """(topics, partitions, offsets) of ``causes`` when all are records of input topics (their
    own origins), else None."""
    if None in causes or any(type(c) is not RawRecord for c in causes):
        return None
    topics = list(map(_TOPIC, causes))
    if not internal.isdisjoint(topics):
        return None
    return topics, list(map(_PARTITION, causes)), list(map(_OFFSET, causes))


_TOPIC, _PARTITION, _OFFSET = attrgetter("topic"), attrgetter("partition"), attrgetter("offset")


def _to_batch(rows: list[tuple[Any, ...]],
              origins: list[pa.Array] | None = None) -> pa.RecordBatch:
    """``rows`` (OUTPUT_SCHEMA without the ORIGIN_FIELDS) and their origins, as a batch."""
    if not rows:
        return pa.RecordBatch.from_pylist([], schema=OUTPUT_SCHEMA)
    columns = list(zip(*rows, strict=True))
    arrays = [pa.array(col, type=field.type) for col, field in zip(columns, OUTPUT_SCHEMA,
                                                                 strict=False)]
    arrays += origins or [pa.nulls(len(rows), kind) for _, kind in ORIGIN_FIELDS]
    return pa.RecordBatch.from_arrays(arrays, schema=OUTPUT_SCHEMA)


def table_headers(table: pa.Table) -> list[Headers]:
    """The ``headers`` column of an Arrow table of ``RECORD_FIELDS`` as records hold it."""
    hcol = table.column("headers")
    if hcol.null_count == len(hcol):
        return [()] * table.num_rows
    return [tuple((h["key"], h["value"]) for h in hs) if hs else () for hs in hcol.to_pylist()]


def table_records(table: pa.Table) -> list[RawRecord]:
    """The rows of an Arrow table of ``RECORD_FIELDS`` (and maybe more) as raw records."""
    if table.num_rows == 0:
        return []
    return [
        RawRecord(t, p, o, ts, k, v, hs)
        for t, p, o, ts, k, v, hs in zip(
            table.column("topic").to_pylist(), table.column("partition").to_pylist(),
            table.column("offset").to_pylist(), table.column("timestamp").to_pylist(),
            table.column("key").to_pylist(), table.column("value").to_pylist(),
            table_headers(table), strict=True,
        )
    ]


class InputOrigins:
    """The origins of a task's input records of repartition topics, found in its input rows
    (``ORIGIN_FIELDS``) by position only when asked: when the task sends a record on to
    another repartition, or names an input record in an error. Records are made without
    them, so the record path pays nothing.

    >>> rows = pa.table({"topic": ["app-r", "in"], "partition": [0, 0], "offset": [3, 9],
    ...                  "origin_topic": ["in", None], "origin_partition": [1, None],
    ...                  "origin_offset": [42, None]})
    >>> InputOrigins(rows, frozenset({"app-r"}))(RawRecord("app-r", 0, 3, 0, None, None))
    ('in', 1, 42)
    """

    def __init__(self, table: pa.Table, internal_topics: frozenset[str]) -> None:
        self._table = table
        self._internal = internal_topics
        self._found: dict[tuple[str, int, int], Origin] | None = None

    def __call__(self, raw: RawRecord) -> Origin | None:
        if self._found is None:
            self._found = self._index()
        return self._found.get((raw.topic, raw.partition, raw.offset))

    def _index(self) -> dict[tuple[str, int, int], Origin]:
        table = self._table
        if "origin_offset" not in table.column_names:
            return {}
        rows = table.filter(pa.compute.is_in(table.column("topic"),
                                             pa.array(sorted(self._internal), pa.string())))
        rows = rows.filter(pa.compute.is_valid(rows.column("origin_offset")))
        return {(t, p, o): (ot, op, oo) for t, p, o, ot, op, oo in zip(
            *(rows.column(c).to_pylist() for c in (
                "topic", "partition", "offset", "origin_topic", "origin_partition",
                "origin_offset")), strict=True)}


class StageRunner:
    """The ``mapInArrow`` function of one sub-topology for one batch."""

    def __init__(self, topology_blob: bytes, subtopology: int, batch_id: int | None,
                 persistence: TaskStatePersistence, config: dict[str, Any],
                 queryable_stores: list[str], topic_partitions: dict[str, int],
                 streamed: bool = False, output: OutputWriter | None = None,
                 kafka: RangeReader | None = None, wall_clock_ms: int = 0,
                 metrics: Any = None, round_: int = 0) -> None:
        self.topology_blob = topology_blob
        self.subtopology = subtopology
        # None: the batch context says, for each batch (see the module's doc)
        self.batch_id = batch_id
        self._ranges: dict[tuple[str, int], tuple[int, int]] | None = None
        self.persistence = persistence
        self.config = config
        self.queryable_stores = queryable_stores
        self.topic_partitions = topic_partitions
        # each Spark partition is one Kafka partition in offset order (see StreamsApp)
        self.streamed = streamed
        # a distributed OutputWriter: the task writes its records for external topics itself
        self.output = output
        # reads the offset ranges among the input rows
        self.kafka = kafka
        self.wall_clock_ms = wall_clock_ms
        # a Spark accumulator of counts (see streamtable.serving.metrics): records in and out
        # per topic, dropped per reason, dead-lettered
        self.metrics = metrics
        # the round of the batch, in a topology with cycles (see rounds.py)
        self.round = round_

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if self.batch_id is None:
            self._read_batch_context()
        if self.streamed:
            yield from self._call_streamed(batches)
            return
        # The task is the records' _route, not Spark's partition id: a stage pipelined into a
        # later union numbers its partitions differently.
        received = list(self._input_tables(batches))
        if not received:
            return  # nothing for this task in this batch: its state stays as it is
        table = pa.concat_tables(received)
        task_id = table.column("_route")[0].as_py()
        yield from self.run(task_id, self._task_rows(table, task_id))

    def _read_batch_context(self) -> None:
        from pyspark import TaskContext

        app = self.config.get("application.id", "")
        context = TaskContext.get()
        raw = context.getLocalProperty(batch_context_key(app)) if context else None
        if raw is None:
            raise RuntimeError(f"stage {self.subtopology}: no batch context for application "
                               f"{app!r} on this Spark job")
        batch = json.loads(raw)
        self.batch_id = int(batch["batch"])
        self.wall_clock_ms = int(batch["clock"])
        self._ranges = {(t, int(p)): (int(a), int(b)) for t, p, a, b in batch["ranges"]}

    def _input_tables(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.Table]:
        """The input batches with rows, as tables, without ranges that are empty this batch."""
        for b in batches:
            if b.num_rows and (t := self._without_idle_ranges(pa.Table.from_batches([b]))).num_rows:
                yield t

    def _without_idle_ranges(self, table: pa.Table) -> pa.Table:
        """``table`` without the rows standing for a partition's range (``PARTITION_RANGE``)
        that has no records in this batch."""
        if self._ranges is None or "_end" not in table.column_names:
            return table
        ends = table.column("_end")
        marked = pa.compute.fill_null(pa.compute.equal(ends, PARTITION_RANGE), False)
        if not pa.compute.any(marked).as_py():
            return table
        keep = [not m or (t, p) in self._ranges for m, t, p in zip(
            marked.to_pylist(), table.column("topic").to_pylist(),
            table.column("partition").to_pylist(), strict=True)]
        return table.filter(pa.array(keep))

    def _range(self, topic: str, partition: int, start: int, end: int) -> tuple[int, int]:
        """The offsets ``[start, end)`` an input row's range stands for in this batch."""
        if end == PARTITION_RANGE and self._ranges is not None:
            return self._ranges[(topic, partition)]
        return start, end

    def _task_rows(self, table: pa.Table, task_id: int) -> pa.Table:
        """``table`` without its ``_route`` column, after checking every row is ``task_id``'s."""
        routes = table.column("_route")
        if pa.compute.min(routes).as_py() != task_id or pa.compute.max(routes).as_py() != task_id:
            raise RuntimeError(f"stage {self.subtopology}: a Spark partition holds several tasks")
        table = table.drop_columns(["_route"])
        for name, kind in ORIGIN_FIELDS + [("_end", pa.int64())]:
            if name not in table.column_names:  # records of input topics only
                table = table.append_column(name, pa.nulls(table.num_rows, kind))
        table = table.select([name for name, _ in INPUT_FIELDS])
        if table.column("topic").null_count:  # heartbeats make the task run; not records
            table = table.filter(pa.compute.is_valid(table.column("topic")))
        return table.cast(_input_schema())

    def _runs(self, table: pa.Table) -> dict[tuple[str, int], Iterable[RawRecord]]:
        """The task's records of input rows, per topic partition in offset order, made as the
        task's order reaches them: the rows that are records stay Arrow until then, and each
        range is read here and kept as columns (a task of a stage that is not streamed holds
        its whole input, so its memory is the input's, not a Python object per record)."""
        ends = table.column("_end") if "_end" in table.column_names else None
        has_ranges = ends is not None and ends.null_count < len(ends)
        rows = table.filter(pa.compute.is_null(ends)) if has_ranges else table
        runs: dict[tuple[str, int], Iterable[RawRecord]] = {}
        if rows.num_rows:
            pairs = rows.group_by(["topic", "partition"], use_threads=False).aggregate([])
            kept = 0
            for topic, partition in zip(pairs.column("topic").to_pylist(),
                                        pairs.column("partition").to_pylist(), strict=True):
                run = rows.filter((pa.compute.field("topic") == topic)
                                  & (pa.compute.field("partition") == partition))
                kept += run.num_rows
                runs[(topic, partition)] = _records_of(run.sort_by("offset"))
            if kept != rows.num_rows:
                raise RuntimeError(f"stage {self.subtopology}: {rows.num_rows - kept} input "
                                   "record(s) without a topic or partition")
        if not has_ranges:
            return runs
        ranges = table.filter(pa.compute.is_valid(ends))
        for topic, partition, start, end in zip(
                ranges.column("topic").to_pylist(), ranges.column("partition").to_pylist(),
                ranges.column("offset").to_pylist(), ranges.column("_end").to_pylist(),
                strict=True):
            start, end = self._range(topic, partition, start, end)
            made: Iterable[RawRecord] = _records_of_runs(
                deque(self._reader().read(topic, partition, start, end)))
            if (topic, partition) in runs:  # records and a range of one partition: one run
                made = iter(sorted(chain(runs[(topic, partition)], made),
                                   key=attrgetter("offset")))
            runs[(topic, partition)] = made
        return runs

    def _reader(self) -> RangeReader:
        if self.kafka is None:
            raise RuntimeError(f"stage {self.subtopology}: offset ranges in the input, but no "
                               "Kafka reader was given")
        return self.kafka

    def _call_streamed(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """The records of one Kafka partition, already in offset order: processed as they
        arrive, so the task never holds its whole input."""
        tables = self._input_tables(batches)
        first = next(tables, None)
        if first is None:
            return
        task_id = first.column("_route")[0].as_py()

        def chunks() -> Iterator[RecordRun]:
            for given in chain((first,), tables):
                table = self._task_rows(given, task_id)
                ends = table.column("_end")
                if ends.null_count == len(ends):
                    if table.num_rows:
                        yield self._table_run(table, task_id)
                    continue
                for topic, partition, start, end in zip(
                        table.column("topic").to_pylist(), table.column("partition").to_pylist(),
                        table.column("offset").to_pylist(), ends.to_pylist(), strict=True):
                    start, end = self._range(topic, partition, start, end)
                    yield from self._reader().read(topic, partition, start, end)

        def runs() -> Iterator[RecordRun]:
            last: tuple[str, int, int] | None = None
            for run in chunks():
                if not len(run):
                    continue
                if last is not None and ((run.topic, run.partition) != last[:2]
                                         or run.offsets[0] <= last[2]):
                    self._not_one_partition(task_id)
                last = (run.topic, run.partition, run.offsets[-1])
                yield run

        yield from self._run_batch(task_id, lambda _ordering: runs())

    def _not_one_partition(self, task_id: int) -> NoReturn:
        raise RuntimeError(f"stage {self.subtopology}: records of task {task_id} are not one "
                           "partition in offset order")

    def _table_run(self, table: pa.Table, task_id: int) -> RecordRun:
        """The rows of ``table`` (records of one partition in offset order) as a run."""
        topics = table.column("topic").unique()
        partitions = table.column("partition").unique()
        if len(topics) != 1 or len(partitions) != 1:
            self._not_one_partition(task_id)
        return RecordRun(topics[0].as_py(), partitions[0].as_py(),
                         table.column("offset").to_pylist(), table.column("timestamp").to_pylist(),
                         table.column("key").to_pylist(), table.column("value").to_pylist(),
                         table_headers(table))

    def run(self, task_id: int, table: pa.Table) -> list[pa.RecordBatch]:
        """Run the task over all of its records of this batch, in partition-group order."""
        return self._run_batch(task_id, lambda ordering: ordering.merge(self._runs(table)),
                               table)

    def _run_batch(self, task_id: int, records: Records,
                   table: pa.Table | None = None) -> list[pa.RecordBatch]:
        """Run the task's batch through the batch host, then hand its results on: records for
        external topics to a distributed writer, store changes and the rest as output rows.
        ``table``: the input rows, where the origins of records of repartition topics are."""
        assert self.batch_id is not None
        config = StreamsConfig(self.config)
        topology, wiring = _topology(self.topology_blob, config)
        # each round of a batch writes as a writer of its own: its records are others
        writer = f"{self.subtopology}-{task_id}" + (f"-r{self.round}" if self.round else "")
        collector = _Collector(wiring.internal_topics, task_id, self.output, self.batch_id,
                               writer)
        if table is not None:
            collector.find_origin = InputOrigins(table, wiring.internal_topics)
        memory = TaskMemory()
        recycle_above(int(config["worker.memory.recycle.bytes"]), self.persistence.keeps_state)
        result = run_task_batch(topology, wiring, self.subtopology, task_id, self.batch_id,
                                config=config, persistence=self.persistence,
                                collector=collector, records=records,
                                topic_partitions=self.topic_partitions,
                                wall_clock_ms=self.wall_clock_ms, round_=self.round)
        collector.write_external()
        for name in self.queryable_stores:
            if result.changes.get(name):
                collector.add_store_changes(name, result.changes[name])
        batches = collector.to_batches()
        if self.metrics is not None:
            counts = _task_counts(result, wiring.internal_topics, collector)
            if (growth := memory.growth()) is not None:
                counts[f"{memory.key}:{self.subtopology}-{task_id}"] = growth
            self.metrics.add(counts)
        return batches


def _records_of(table: pa.Table, chunk: int = 8192) -> Iterator[RawRecord]:
    """The rows of ``table`` as raw records, made ``chunk`` rows at a time."""
    for start in range(0, table.num_rows, chunk):
        yield from table_records(table.slice(start, chunk))


def _records_of_runs(runs: deque[RecordRun]) -> Iterator[RawRecord]:
    """The records of ``runs``, each run let go once its records are made."""
    while runs:
        yield from runs.popleft().records()


def _task_counts(result: BatchResult, internal: frozenset[str],
                 collector: _Collector) -> Counter[str]:
    """What a task did in a batch, as the counts of :class:`~streamtable.serving.metrics.
    AppMetrics` (``records_in:<topic>`` ...)."""
    counts: Counter[str] = Counter()
    for topic, n in result.received.items():
        if topic not in internal:
            counts[f"{RECORDS_IN}:{topic}"] += n
    for topic, n in collector.sent.items():
        counts[f"{RECORDS_OUT}:{topic}"] += n
    for reason, n in result.dropped.items():
        counts[f"{DROPPED}:{reason}"] += n
    if result.dead_lettered:
        counts[DEAD_LETTERED] += result.dead_lettered
    return counts


def _input_schema() -> pa.Schema:
    return pa.schema(INPUT_FIELDS)
