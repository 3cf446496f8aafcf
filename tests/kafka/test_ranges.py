"""Reading offset ranges where they are processed (``streamtable.kafka.ranges``), against the
real broker."""

from __future__ import annotations

from collections.abc import Callable

from streamtable.kafka import ranges
from streamtable.kafka.ranges import RangeReader, reader_config


def _forget_kept_consumers() -> None:
    while ranges._IDLE:
        ranges._IDLE.popitem()[1][0].close()


def _offsets(reader: RangeReader, topic: str, start: int, end: int) -> list[int]:
    return [offset for run in reader.read(topic, 0, start, end) for offset in run.offsets]


def test_consecutive_ranges_are_read_exactly_by_one_kept_consumer(
        bootstrap: str, new_topic: Callable[[int], str], produce: Callable[..., None]) -> None:
    topic = new_topic(1)
    produce(topic, [(0, b"k%d" % i, b"v%d" % i, 1000 + i, [("h", b"%d" % i)] if i == 29 else None)
                    for i in range(30)])
    reader = RangeReader({"bootstrap.servers": bootstrap}, chunk=7)
    _forget_kept_consumers()
    assert _offsets(reader, topic, 0, 10) == list(range(10))
    kept = [c for c, _ in ranges._IDLE.values()]
    assert len(kept) == 1  # the consumer waits for the next range of about the same size
    assert _offsets(reader, topic, 10, 20) == list(range(10, 20))
    assert [c for c, _ in ranges._IDLE.values()] == kept  # the same consumer read it
    # to the end of the log, and a range read again (a replayed batch)
    assert _offsets(reader, topic, 20, 30) == list(range(20, 30))
    assert _offsets(reader, topic, 10, 20) == list(range(10, 20))
    runs = list(reader.read(topic, 0, 28, 30))
    records = [r for run in runs for r in run.records()]
    assert [(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value, r.headers)
            for r in records] == [(topic, 0, 28, 1028, b"k28", b"v28", ()),
                                  (topic, 0, 29, 1029, b"k29", b"v29", (("h", b"29"),))]
    _forget_kept_consumers()


def test_a_range_left_unfinished_does_not_keep_its_consumer(
        bootstrap: str, new_topic: Callable[[int], str], produce: Callable[..., None]) -> None:
    topic = new_topic(1)
    produce(topic, [(0, None, b"v%d" % i, 1000, None) for i in range(20)])
    reader = RangeReader({"bootstrap.servers": bootstrap}, chunk=5)
    _forget_kept_consumers()
    chunks = reader.read(topic, 0, 0, 20)
    assert next(chunks).offsets == list(range(5))
    chunks.close()  # a task that failed half way: the consumer's position is not trusted
    assert not ranges._IDLE
    assert _offsets(reader, topic, 0, 20) == list(range(20))
    _forget_kept_consumers()


def test_ranges_of_different_sizes_use_consumers_sized_for_them() -> None:
    small = reader_config({"bootstrap.servers": "b:1"}, 0, 3_000)
    similar = reader_config({"bootstrap.servers": "b:1"}, 100, 4_000)
    large = reader_config({"bootstrap.servers": "b:1"}, 0, 250_000)
    assert small["queued.min.messages"] == similar["queued.min.messages"] == 4096
    # a large range's reader queues no more records than QUEUED_RECORDS_MAX
    assert large["queued.min.messages"] == ranges.QUEUED_RECORDS_MAX == 16_384
