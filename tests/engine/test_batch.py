"""The batch host: a task's batch from the state of the batch before, exactly once under replay,
the same whether the working copy is reused or rebuilt; the driver's batch mode runs on it."""

from __future__ import annotations

import random
import uuid
from typing import Any

from streamtable import StreamsBuilder, TopologyTestDriver
from streamtable.config import StreamsConfig
from streamtable.engine.batch import run_task_batch
from streamtable.engine.wiring import wire
from streamtable.records import RawRecord
from streamtable.state import persistence
from streamtable.state.persistence import FileTaskStatePersistence
from streamtable.storage import storage_at


class _Sent:
    def __init__(self) -> None:
        self.records: list[tuple[str, bytes | None, bytes | None, int]] = []

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
             headers: Any, partition: int | None) -> None:
        self.records.append((topic, key, value, timestamp))


def _topology():
    b = StreamsBuilder()
    b.stream("in").group_by_key().count(materialized="counts").to_stream().to("out")
    return b.build()


def _batch(offset: int, keys: list[str]) -> list[RawRecord]:
    return [RawRecord("in", 0, offset + i, 100 + offset + i, f'"{k}"'.encode(), b'"v"')
            for i, k in enumerate(keys)]


def _run(files: FileTaskStatePersistence, batch: int, records: list[RawRecord],
         cache_bytes: int = 10 * 1024 * 1024):
    topology = _topology()
    config = StreamsConfig({"application.id": "batch-host",
                            "cache.max.bytes.buffering": cache_bytes})
    sent = _Sent()
    result = run_task_batch(topology, wire(topology, config), 0, 0, batch, config=config,
                            persistence=files, collector=sent,
                            records=lambda ordering: ordering.order(records))
    return sent.records, result.changes


def test_a_replayed_batch_redoes_exactly_what_its_first_attempt_did():
    files = FileTaskStatePersistence(f"memory://{uuid.uuid4().hex}")
    _run(files, 0, _batch(0, ["a", "b", "a"]))
    first = _run(files, 1, _batch(3, ["a", "c"]))
    replay = _run(files, 1, _batch(3, ["a", "c"]))  # a crash after batch 1: Spark replays it
    assert replay == first
    assert first[1]["counts"] == {"a": (3, 103), "c": (1, 104)}
    sent, changes = _run(files, 2, _batch(5, ["a"]))
    assert changes["counts"] == {"a": (4, 105)}  # from batch 1's state, counted once


def test_a_full_record_cache_forwards_its_eldest_change_within_a_batch():
    """The cache holds what ``cache.max.bytes.buffering`` allows (here 3 entries of 256
    bytes), not a batch's every key: a full cache forwards its eldest change, and the final
    table is the one without caching."""
    keys = [f"k{i}" for i in range(10)] * 3
    records = _batch(0, keys) + _batch(30, ["k0"])

    def run(cache_bytes: int) -> tuple[dict[bytes | None, bytes | None], int, dict[str, Any]]:
        sent, changes = _run(FileTaskStatePersistence(f"memory://{uuid.uuid4().hex}"), 0,
                             records, cache_bytes)
        return {key: value for _, key, value, _ in sent}, len(sent), changes

    unbounded, unbounded_sent, unbounded_changes = run(10 * 1024 * 1024)
    bounded, bounded_sent, bounded_changes = run(3 * 256)
    uncached, uncached_sent, uncached_changes = run(0)
    assert unbounded_sent == 10  # the last change of each key, at the commit
    assert uncached_sent == len(records)
    # 10 keys cycling through a 3-entry cache: every key is evicted before it comes again,
    # so each record's change leaves the cache (the last 3 at the commit)
    assert bounded_sent == len(records)
    assert bounded == unbounded == uncached
    assert bounded[b'"k0"'] == b"4"
    assert bounded_changes == unbounded_changes == uncached_changes


def test_a_rebuilt_working_copy_gives_what_the_reused_one_gives():
    """A worker that ran the task before reuses its working copy; another rebuilds it from
    the snapshot and the deltas after it: every batch comes out the same."""
    rng = random.Random(3)
    batches = [[rng.choice("abcdef") for _ in range(rng.randint(1, 9))] for _ in range(25)]
    outputs = []
    for rebuild in (False, True):
        files = FileTaskStatePersistence(f"memory://{uuid.uuid4().hex}")
        out, offset = [], 0
        for b, keys in enumerate(batches):
            if rebuild:
                persistence._CACHE.clear()  # no working copy in this worker
            out.append(_run(files, b, _batch(offset, keys)))
            offset += len(keys)
        names = storage_at(files.location).list("0/0")
        assert any(n.endswith(".snap") for n in names)  # 25 batches: a snapshot was due
        outputs.append(out)
    assert outputs[0] == outputs[1]


def test_the_drivers_batch_mode_keeps_task_state_in_the_persistence():
    """Across many batches (deltas, then snapshots), the batch mode's tables are the
    record-at-a-time driver's, and the state lives in the persistence's files."""
    b = StreamsBuilder()
    (b.stream("in").group_by(lambda k, v: v % 7).count(materialized="by-mod")
     .to_stream().to("out"))
    topology = b.build()
    batch = TopologyTestDriver(topology, batch_mode=True)
    record = TopologyTestDriver(topology)
    ins = [d.create_input_topic("in", partitions=3) for d in (batch, record)]
    rng = random.Random(5)
    for n in range(400):
        key, value, partition = rng.randrange(50), rng.randrange(1000), rng.randrange(3)
        for topic in ins:
            topic.pipe_input(key, value, timestamp=n, partition=partition)
        if rng.random() < 0.1:
            batch.run_batch()
    batch.run_batch()
    assert (batch.get_key_value_store("by-mod").to_dict()
            == record.get_key_value_store("by-mod").to_dict())
    files = storage_at(batch._states._persistence.location)
    names = [n for sub in ("0", "1") for task in ("0", "1", "2")
             for n in files.list(f"{sub}/{task}")]
    assert any(n.endswith(".delta") for n in names)
    assert batch.batches > 20
