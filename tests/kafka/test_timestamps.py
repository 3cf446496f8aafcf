"""The records' timestamps read as a lookup (the development broker's stand-in for ListOffsets
by timestamp): the same answers as Kafka's, each record read once, never far beyond a batch."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtable.kafka import timestamps
from streamtable.kafka.batch_cut import cut_at_timestamp
from streamtable.kafka.ranges import KafkaSourceError
from streamtable.kafka.timestamps import ReadTimestamps

BASE = 1_436_918_400_000


class Message:
    def __init__(self, offset: int, stamp: int | None) -> None:
        self._offset, self._stamp = offset, stamp

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (0, -1) if self._stamp is None else (1, self._stamp)


class FakeTopic:
    """Partitions held as lists of timestamps, read as ReadTimestamps reads them; counting
    what is read."""

    def __init__(self, logs: dict[tuple[str, int], list[int | None]]) -> None:
        self.logs = logs
        self.read: list[tuple[str, int, int, int]] = []

    def messages(self, ranges: dict[tuple[str, int], tuple[int, int]], chunk: int = 7) -> Any:
        for (topic, partition), (start, end) in ranges.items():
            self.read.append((topic, partition, start, end))
            log = self.logs[(topic, partition)]
            messages = [Message(o, log[o]) for o in range(start, min(end, len(log)))]
            for i in range(0, len(messages), chunk):
                yield (topic, partition), messages[i:i + chunk]

    def records_read(self) -> int:
        return sum(end - start for _, _, start, end in self.read)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    def make(logs: dict[tuple[str, int], list[int | None]]) -> FakeTopic:
        topic = FakeTopic(logs)
        monkeypatch.setattr(ReadTimestamps, "_messages",
                            lambda self, *args: topic.messages(*args))
        return topic
    return make


def _earliest(log: list[int | None], start: int, end: int, t: int) -> int | None:
    return next((o for o in range(start, end) if (log[o] if log[o] is not None else -1) >= t),
                None)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(BASE, BASE + 50)), min_size=1, max_size=40),
       st.data())
def test_answers_the_first_record_at_or_after_a_time_from_the_start(
        log: list[int | None], data: st.DataObject) -> None:
    with pytest.MonkeyPatch.context() as patch:
        topic = FakeTopic({("t", 0): log})
        patch.setattr(ReadTimestamps, "_messages", lambda self, *args: topic.messages(*args))
        reader = ReadTimestamps({}, first_read=data.draw(st.integers(1, 8)))
        start = 0
        while start < len(log):
            end = data.draw(st.integers(start, len(log)))
            lookup = reader.lookup({("t", 0): start}, {("t", 0): end}, cap=10**6)
            for t in data.draw(st.lists(st.integers(BASE - 1, BASE + 51), max_size=5)):
                offset, stamp = lookup(t)[("t", 0)]
                assert offset == _earliest(log, start, end, t)
                if offset is not None:
                    assert stamp == log[offset]
            start = data.draw(st.integers(start, max(start, end)))
            if start == end:
                start += 1


def test_each_record_is_read_once_across_batches(fake: Any) -> None:
    logs = {("bids", 0): [BASE + 2 * i for i in range(5000)],
            ("persons", 0): [BASE + 100 * i for i in range(100)]}
    topic = fake(logs)
    reader = ReadTimestamps({}, first_read=256)
    starts = {("bids", 0): 0, ("persons", 0): 0}
    ends = {("bids", 0): 5000, ("persons", 0): 100}
    batches = 0
    while starts != ends:
        budget = 500
        cut = cut_at_timestamp(starts, ends, budget,
                               reader.lookup(starts, ends, budget + 1), lower=None)
        # the batch never reads more than its budget past what it takes, per partition
        assert topic.records_read() <= sum(cut.ends.values()) + 2 * (budget + 1)
        starts = cut.ends
        batches += 1
    assert batches == (5000 + 100) // 500 + 1
    # no record read twice (the last batch fits its budget: nothing of it needs reading)
    for key in logs:
        spans = sorted((start, end) for t, p, start, end in topic.read if (t, p) == key)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
    assert 5000 <= topic.records_read() == reader.records_read <= 5100


def test_reads_no_more_than_the_cap_of_a_partition(fake: Any) -> None:
    topic = fake({("t", 0): [BASE] * 1000 + [BASE + 1] * 10})
    reader = ReadTimestamps({}, first_read=16)
    lookup = reader.lookup({("t", 0): 0}, {("t", 0): 1010}, cap=101)
    assert lookup(BASE + 1) == {("t", 0): (101, None)}  # beyond the cap: more than the budget
    assert topic.records_read() == 101
    cut = cut_at_timestamp({("t", 0): 0}, {("t", 0): 1010}, 100,
                           reader.lookup({("t", 0): 0}, {("t", 0): 1010}, cap=101))
    assert cut.ends == {("t", 0): 100} and cut.timestamp == BASE


def test_a_restart_before_what_was_read_reads_again(fake: Any) -> None:
    topic = fake({("t", 0): [BASE + 10, BASE + 1, BASE + 2, BASE + 3]})
    reader = ReadTimestamps({}, first_read=4)
    assert reader.lookup({("t", 0): 0}, {("t", 0): 4}, 10)(BASE + 2) == {("t", 0): (0, BASE + 10)}
    # from offset 1 the highest so far is no longer the first record's
    assert reader.lookup({("t", 0): 1}, {("t", 0): 4}, 10)(BASE + 2) == {("t", 0): (2, BASE + 2)}
    assert topic.records_read() == 4
    # a replay from an earlier offset
    assert reader.lookup({("t", 0): 0}, {("t", 0): 4}, 10)(BASE + 3) == {("t", 0): (0, BASE + 10)}
    assert topic.records_read() == 8


class FakeAdmin:
    """An AdminClient answering ListOffsets by timestamp from lists of timestamps."""

    def __init__(self, logs: dict[tuple[str, int], list[int]], failing: bool = False) -> None:
        self.logs, self.failing = logs, failing
        self.requests: list[dict[Any, Any]] = []

    def list_offsets(self, request: dict[Any, Any], **kwargs: Any) -> dict[Any, Any]:
        from concurrent.futures import Future
        from types import SimpleNamespace

        self.requests.append(kwargs)
        answers = {}
        for tp, spec in request.items():
            future: Future[Any] = Future()
            if self.failing:
                future.set_exception(RuntimeError("NOT_LEADER_OR_FOLLOWER"))
            else:
                t = spec.timestamp  # OffsetSpec.for_timestamp(t)
                log = self.logs[(tp.topic, tp.partition)]
                o = next((i for i, ts in enumerate(log) if ts >= t), -1)
                future.set_result(SimpleNamespace(offset=o, timestamp=log[o] if o >= 0 else -1))
            answers[tp] = future
        return answers


def test_listed_timestamps_ask_kafka_for_every_partition_at_once() -> None:
    admin = FakeAdmin({("a", 0): [BASE, BASE + 5], ("a", 1): [BASE + 9]})
    lookup = timestamps.ListedTimestamps(admin, timeout_s=3).lookup([("a", 0), ("a", 1)])
    assert lookup(BASE + 1) == {("a", 0): (1, BASE + 5), ("a", 1): (0, BASE + 9)}
    assert lookup(BASE + 10) == {("a", 0): (None, None), ("a", 1): (None, None)}
    assert admin.requests == [{"request_timeout": 3}] * 2
    failing = timestamps.ListedTimestamps(FakeAdmin({}, failing=True)).lookup([("a", 1)])
    with pytest.raises(KafkaSourceError, match="topic 'a' partition 1: NOT_LEADER"):
        failing(BASE)


def _cuts(reader: ReadTimestamps, logs: dict[tuple[str, int], list[int | None]], budget: int,
          prefetch: bool) -> list[dict[tuple[str, int], int]]:
    """The ends of each batch of a backlog cut with ``reader``."""
    starts = {key: 0 for key in logs}
    ends = {key: len(log) for key, log in logs.items()}
    out = []
    while starts != ends:
        cut = cut_at_timestamp(starts, ends, budget, reader.lookup(starts, ends, budget + 1))
        out.append(cut.ends)
        if prefetch:
            reader.prefetch(cut.ends, ends, dict.fromkeys(ends, budget + 1), chunk=64)
        starts = cut.ends
    reader.close()
    return out


def test_reading_ahead_while_a_batch_runs_cuts_the_same_batches(fake: Any) -> None:
    logs = {("bids", 0): [BASE + 2 * i for i in range(3000)],
            ("bids", 1): [BASE + 2 * i + 1 for i in range(2500)],
            ("persons", 0): [BASE + 100 * i for i in range(60)]}
    fake(logs)
    plain = _cuts(ReadTimestamps({}, first_read=256), logs, 700, prefetch=False)
    topic = fake(logs)
    reader = ReadTimestamps({}, first_read=256)
    assert _cuts(reader, logs, 700, prefetch=True) == plain
    # still each record read once at most, and not beyond a budget past the backlog's end
    for key in logs:
        spans = sorted((start, end) for t, p, start, end in topic.read if (t, p) == key)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
    assert reader.records_read == topic.records_read() <= sum(map(len, logs.values()))


def test_the_next_cut_finds_what_was_read_ahead(fake: Any) -> None:
    logs = {("t", 0): [BASE + i for i in range(4000)]}
    topic = fake(logs)
    reader = ReadTimestamps({}, first_read=16)
    starts, ends = {("t", 0): 0}, {("t", 0): 4000}
    cut = cut_at_timestamp(starts, ends, 1000, reader.lookup(starts, ends, 1001))
    reader.prefetch(cut.ends, ends, {("t", 0): 1001})
    reader._prefetch.join()  # the batch ran long enough
    read = topic.records_read()
    assert read >= cut.ends[("t", 0)] + 1001
    cut_at_timestamp(cut.ends, ends, 1000, reader.lookup(cut.ends, ends, 1001))
    assert topic.records_read() == read  # nothing left to read for the second cut


def test_a_failed_read_ahead_leaves_the_lookups_to_read_the_rest(fake: Any) -> None:
    log = [BASE + i for i in range(3000)]
    topic = fake({("t", 0): log})
    reader = ReadTimestamps({}, first_read=16)
    starts, ends = {("t", 0): 0}, {("t", 0): 3000}
    cut = cut_at_timestamp(starts, ends, 1000, reader.lookup(starts, ends, 1001))
    messages = topic.messages

    def failing(ranges: Any, chunk: int = 7) -> Any:
        for i, item in enumerate(messages(ranges, chunk)):
            if i == 3:
                raise KafkaSourceError("the broker went away")
            yield item

    topic.messages = failing
    reader.prefetch(cut.ends, ends, {("t", 0): 1001}, chunk=100)
    reader._prefetch.join()
    topic.messages = messages
    second = cut_at_timestamp(cut.ends, ends, 1000, reader.lookup(cut.ends, ends, 1001))
    assert second.ends == {("t", 0): 2000} and second.timestamp == BASE + 2000
    # what the failed read got is kept once: no offset read twice
    offsets = list(reader._read[("t", 0)].offsets)
    assert offsets == sorted(set(offsets)) and offsets[0] == 1000


class WaitingConsumer:
    """A consumer whose ``consume`` waits its whole timeout unless it can fill the batch, as
    librdkafka's batch consume does; counting those waits."""

    class Record:
        def __init__(self, topic: str, partition: int, offset: int) -> None:
            self._key, self._offset = (topic, partition), offset

        def topic(self) -> str:
            return self._key[0]

        def partition(self) -> int:
            return self._key[1]

        def offset(self) -> int:
            return self._offset

        def error(self) -> None:
            return None

        def timestamp(self) -> tuple[int, int]:
            return 1, BASE + self._offset

    def __init__(self, ends: dict[tuple[str, int], int]) -> None:
        self.ends = ends
        self.positions: dict[tuple[str, int], int] = {}
        self.waits = 0

    def assign(self, partitions: list[Any]) -> None:
        self.positions = {(tp.topic, tp.partition): tp.offset for tp in partitions}

    def incremental_unassign(self, partitions: list[Any]) -> None:
        for tp in partitions:
            self.positions.pop((tp.topic, tp.partition), None)

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        out: list[Any] = []
        for key, position in self.positions.items():
            take = min(num_messages - len(out), self.ends[key] - position)
            out += [self.Record(*key, o) for o in range(position, position + take)]
            self.positions[key] = position + take
        if len(out) < num_messages:
            self.waits += 1
        return out


def test_a_read_asks_for_no_more_records_than_its_ranges_hold() -> None:
    """A read up to the end of the log that asked for a full batch at its end would wait the
    consumer's whole timeout (100 ms) for records that are not there."""
    consumer = WaitingConsumer({("bids", 0): 12_345, ("bids", 1): 3_000})
    reader = ReadTimestamps({})
    reader._consumer = consumer
    read: dict[tuple[str, int], list[int]] = {}
    for key, messages in reader._messages({("bids", 0): (0, 12_345), ("bids", 1): (500, 3_000)}):
        read.setdefault(key, []).extend(m.offset() for m in messages)
    assert consumer.waits == 0
    assert read == {("bids", 0): list(range(12_345)), ("bids", 1): list(range(500, 3_000))}
    assert [len(m) for _, m in reader._messages({("bids", 1): (2_999, 3_000)})] == [1]
    assert consumer.waits == 0


def test_a_backlog_s_cuts_read_no_more_than_the_source_read_ahead(fake: Any) -> None:
    """The source reads about a batch and a quarter ahead while a batch runs; the next cut
    (from the last cut, by the last batch's time span) then finds what it needs: its search
    once probed twice the batch ahead, and read up to twice the batch there while the batch
    waited. The first cut reads little more than its batch."""
    from streamtable.kafka.batch_cut import BatchCutter

    logs = {("bids", 0): [BASE + i // 10 for i in range(0, 800_000, 2)],
            ("bids", 1): [BASE + i // 10 for i in range(1, 800_000, 2)]}
    topic = fake(logs)
    reader = ReadTimestamps({}, first_read=4096)
    budget = 100_000
    cutter = BatchCutter(lambda s, e, b: reader.lookup(s, e, b + 1))
    starts = {key: 0 for key in logs}
    ends = {key: len(log) for key, log in logs.items()}
    read_in_cuts = []
    while sum(ends[k] - starts[k] for k in ends) > budget:
        before = topic.records_read()
        share = cutter.share(starts, {k: ends[k] - starts[k] for k in ends}, budget)
        read_in_cuts.append(topic.records_read() - before)
        starts = {k: starts[k] + share[k] for k in starts}
        assert sum(share.values()) == budget
        reader.prefetch(starts, ends, {k: min(budget + 1, n + n // 4 + 4096)
                                       for k, n in share.items()})
        if reader._prefetch is not None:
            reader._prefetch.join()  # the batch ran long enough
    assert len(read_in_cuts) == 7
    # the first cut, from the earliest first record, reads its batch and a third more (from no
    # time at all, twice its batch); every later cut finds what the read-ahead read
    assert read_in_cuts[0] <= budget * 4 // 3
    assert read_in_cuts[1:] == [0] * 6
