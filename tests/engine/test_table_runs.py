"""Runs of records into a cached table source (``streamtable.engine.runs``) end exactly where
processing the same records one by one ends: the same records sent (repartition, output and
dead-letter topics, in the same order), the same stores, store changes, stream time, drops and
errors, whatever the records hold (repeated keys, deletions of present and absent rows, null
keys, keys that decode alike, undecodable keys and values, bad timestamps, headers) and however
the records are cut into runs."""

from __future__ import annotations

import random
import sys
from typing import Any

import pytest

from streamtable import StreamsBuilder
from streamtable.config import StreamsConfig
from streamtable.engine.task import Task
from streamtable.engine.wiring import wire
from streamtable.records import Headers, RawRecord, RecordRun
from streamtable.state.task_state import TaskState
from streamtable.topology.graph import Topology


class _Sent:
    def __init__(self) -> None:
        self.records: list[tuple[Any, ...]] = []

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
             headers: Headers, partition: int | None) -> None:
        self.records.append((topic, key, value, timestamp, headers, partition))


def _keep(key: Any, value: Any) -> bool:
    if value["x"] == 13:
        raise ValueError("13 is unlucky")  # fails at the commit, for the record that caused it
    return bool(value["x"] % 3)


def _filtered_table() -> Topology:
    b = StreamsBuilder()
    b.table("in", materialized="rows").filter(_keep).to_stream().to("out")
    return b.build()


def _grouped_table() -> Topology:  # the share-holders shape: its first sub-topology
    b = StreamsBuilder()
    (b.table("in", materialized="rows")
     .filter(_keep)
     .group_by(lambda k, v: (v["g"], v["x"]))
     .reduce(lambda a, c: a + c, lambda a, c: a - c, materialized="sums")
     .to_stream().to("out"))
    return b.build()


def _records(rng: random.Random, n: int, start: int, nasty: bool) -> list[RawRecord]:
    out = []
    for i in range(n):
        key: bytes | None = b"%d" % rng.randrange(12)
        value: bytes | None = b'{"x": %d, "g": %d}' % (rng.randrange(20), rng.randrange(3))
        ts: int | None = rng.randrange(1000, 1100)
        headers: Headers = (("h", b"%d" % i),) if rng.random() < 0.2 else ()
        roll = rng.random()
        if roll < 0.25:
            value = None  # deletes a present row, or an absent one
        elif nasty and roll < 0.30:
            key = rng.choice([None, b"{bad", b"7.0", b" 7", b"[1]"])  # null, poison, same as 7
        elif nasty and roll < 0.33:
            value = b"{not json"
        elif nasty and roll < 0.35:
            ts = rng.choice([None, -5])
        out.append(RawRecord("in", 0, start + i, ts, key, value, headers))  # type: ignore[arg-type]
    return out


def _runs(rng: random.Random, records: list[RawRecord]) -> list[RecordRun]:
    runs, i = [], 0
    while i < len(records):
        size = rng.choice([1, 2, 5, 17, 60])
        runs.append(RecordRun.of(records[i:i + size]))
        i += size
    return runs


def _outcome(topology: Topology, settings: dict[str, Any], state: TaskState,
             batches: list[list[RawRecord]], rng: random.Random | None) -> tuple[Any, ...]:
    """What a host sees after running ``batches`` through one task each (by runs when ``rng``
    cuts them)."""
    cache = settings.get("cache", sys.maxsize)
    config = StreamsConfig({"application.id": "runs",
                            **{k: v for k, v in settings.items() if k != "cache"}})
    wiring = wire(topology, config)
    sent = _Sent()
    seen: list[Any] = []
    for batch in batches:
        task = Task(topology, topology.subtopology(0), 0, config, state, sent, {},
                    cache_max_entries=cache, wiring=wiring)
        task.stream_time = state.stream_time
        try:
            if rng is None:
                for raw in batch:
                    task.process(raw)
            else:
                for run in _runs(rng, batch):
                    task.process_run(run)
            task.commit()
        except Exception as e:
            seen.append(("failed", type(e).__name__, str(e)))
            return tuple(seen), sent.records
        state.stream_time = task.stream_time
        current = task.current_raw
        seen.append((
            {name: dict(s.items()) for name, s in state.stores.items()},
            {name: s.drain_changes() for name, s in state.stores.items()},
            task.stream_time, dict(task.dropped), task.dead_lettered,
            None if current is None else (current.offset, current.key),
        ))
    return tuple(seen), sent.records


CASES = {
    "clean": {},
    "dead letters": {"errors.dead.letter.queue.topic.name": "dlq"},
    "skip bad records": {"default.deserialization.exception.handler": "continue",
                         "processing.exception.handler": "continue"},
    "fail on bad records": {},
    "small cache": {"errors.dead.letter.queue.topic.name": "dlq", "cache": 7},
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("shape", [_filtered_table, _grouped_table])
def test_runs_end_where_records_one_by_one_end(case: str, shape: Any) -> None:
    settings = CASES[case]
    nasty = case != "clean"
    for seed in range(25):
        rng = random.Random(seed)
        batches, start = [], 0
        for _ in range(3):
            size = rng.randrange(1, 150)
            batches.append(_records(rng, size, start, nasty))
            start += size
        topology = shape()
        expected = _outcome(topology, settings, TaskState(), batches, None)
        got = _outcome(topology, settings, TaskState(), batches, random.Random(seed))
        assert got == expected, f"seed {seed}"


def test_a_clean_run_takes_the_short_path_and_a_bad_one_does_not() -> None:
    """The differential test above proves nothing if the short path is never taken: a run it
    takes is applied when something else happens in the task (here the commit)."""
    topology = _filtered_table()
    config = StreamsConfig({"application.id": "runs", "errors.dead.letter.queue.topic.name": "d"})
    state = TaskState()
    task = Task(topology, topology.subtopology(0), 0, config, state, _Sent(), {},
                cache_max_entries=sys.maxsize)
    rows = state.store("rows")
    clean = [RawRecord("in", 0, i, 1000 + i, b"%d" % (i % 3), b'{"x": %d}' % i) for i in range(9)]
    task.process_run(RecordRun.of(clean))
    assert rows.get(1) is None and task.stream_time == 1008  # pending
    task.commit()
    assert rows.get(1) == ({"x": 7}, 1007)

    def taken(records: list[RawRecord]) -> bool:
        task.process_run(RecordRun.of(records))
        short = bool(task._unsettled)  # records left to apply
        task.commit()
        return short

    assert not taken([RawRecord("in", 0, 9, 1009, b"1", b'{"x": 1}'),
                      RawRecord("in", 0, 10, 1010, b"2", b"{oops")])
    assert not taken([RawRecord("in", 0, 11, 1011, b"5", None)])  # absent: forwarded at once
    assert not taken([RawRecord("in", 0, 12, 1012, None, b'{"x": 1}')])
    assert taken([RawRecord("in", 0, 13, 1013, b"1", None), RawRecord("in", 0, 14, 1014, b"1",
                                                                       b'{"x": 2}')])
