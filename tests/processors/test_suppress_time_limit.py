"""suppress(until_time_limit): the latest value of a key once stream time is the time limit
past its first held change, on any table; a bounded buffer shuts down or emits its oldest keys
early. The scenarios and expected records are Kafka Streams' SuppressScenarioTest."""

from __future__ import annotations

import random

import pytest

from streamtable import (
    BufferConfig,
    Materialized,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    TopologyTestDriver,
)
from streamtable.errors import ProcessingError

UNBOUNDED = BufferConfig.unbounded()


def _value_counts(suppressed: Suppressed, cache: bool):
    """Kafka's scenario: a table of k -> v, counted by value, suppressed and raw."""
    b = StreamsBuilder()
    counts = (b.table("input", Materialized.as_("input").with_caching_disabled())
              .group_by(lambda k, v: (v, k)).count())
    counts.suppress(suppressed).to_stream().to("output-suppressed")
    counts.to_stream().to("output-raw")
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 10**7 if cache else 0})
    return (driver, driver.create_input_topic("input"),
            driver.create_output_topic("output-raw"),
            driver.create_output_topic("output-suppressed"))


def _kvt(topic):
    return [(r.key, r.value, r.timestamp) for r in topic.read_records()]


@pytest.mark.parametrize("cache", [True, False])
def test_zero_time_limit_emits_immediately(cache):
    _, inp, raw, suppressed = _value_counts(Suppressed.until_time_limit(0, UNBOUNDED), cache)
    inp.pipe_input("k1", "v1", timestamp=0)
    inp.pipe_input("k1", "v2", timestamp=1)
    inp.pipe_input("k2", "v1", timestamp=2)
    expected = [("v1", 1, 0), ("v1", 0, 1), ("v2", 1, 1), ("v1", 1, 2)]
    assert _kvt(raw) == expected
    assert _kvt(suppressed) == expected
    inp.pipe_input("x", "x", timestamp=3)
    assert _kvt(raw) == _kvt(suppressed) == [("x", 1, 3)]
    inp.pipe_input("x", "y", timestamp=4)
    assert _kvt(raw) == [("x", 0, 4), ("y", 1, 4)]


@pytest.mark.parametrize("cache", [True, False])
def test_time_limit_suppresses_intermediate_updates(cache):
    _, inp, raw, suppressed = _value_counts(Suppressed.until_time_limit(2, UNBOUNDED), cache)
    inp.pipe_input("k1", "v1", timestamp=0)
    inp.pipe_input("k1", "v2", timestamp=1)
    inp.pipe_input("k2", "v1", timestamp=2)
    assert _kvt(raw) == [("v1", 1, 0), ("v1", 0, 1), ("v2", 1, 1), ("v1", 1, 2)]
    assert _kvt(suppressed) == [("v1", 1, 2)]
    inp.pipe_input("tick", "tick", timestamp=3)  # stream time 3: v2, held since 1, is due
    assert _kvt(raw) == [("tick", 1, 3)]
    assert _kvt(suppressed) == [("v2", 1, 1)]
    inp.pipe_input("tick", "tock", timestamp=4)
    assert _kvt(raw) == [("tick", 0, 4), ("tock", 1, 4)]
    # tick is held since 3 (its later update keeps that time), and it is only 4
    assert _kvt(suppressed) == []


@pytest.mark.parametrize("cache", [True, False])
def test_record_limit_emits_the_oldest_key_early(cache):
    _, inp, raw, suppressed = _value_counts(
        Suppressed.until_time_limit(2**62, BufferConfig.max_records_of(1).emit_early_when_full()),
        cache)
    inp.pipe_input("k1", "v1", timestamp=0)
    inp.pipe_input("k1", "v2", timestamp=1)
    inp.pipe_input("k2", "v1", timestamp=2)
    assert _kvt(raw) == [("v1", 1, 0), ("v1", 0, 1), ("v2", 1, 1), ("v1", 1, 2)]
    # consecutive updates of v1 are suppressed into the latter; the last waits for another key
    assert _kvt(suppressed) == [("v1", 0, 1), ("v2", 1, 1)]
    inp.pipe_input("x", "x", timestamp=3)
    assert _kvt(raw) == [("x", 1, 3)]
    assert _kvt(suppressed) == [("v1", 1, 2)]


def test_byte_limit_emits_early_and_a_full_strict_buffer_stops():
    _, inp, _, suppressed = _value_counts(
        Suppressed.until_time_limit(2**62, BufferConfig.max_bytes_of(1).emit_early_when_full()),
        cache=False)
    inp.pipe_input("k1", "v1", timestamp=0)
    inp.pipe_input("k1", "v2", timestamp=1)
    # no entry fits in one byte: each is emitted as soon as it is held
    assert _kvt(suppressed) == [("v1", 1, 0), ("v1", 0, 1), ("v2", 1, 1)]

    _, inp, _, _ = _value_counts(
        Suppressed.until_time_limit(100, BufferConfig.max_records_of(1)), cache=False)
    inp.pipe_input("k1", "v1", timestamp=0)
    with pytest.raises(ProcessingError, match="suppression buffer .* is full"):
        inp.pipe_input("k2", "v2", timestamp=1)


def test_until_window_closes_refuses_to_emit_early():
    with pytest.raises(ValueError, match="shuts down when full"):
        Suppressed.until_window_closes(BufferConfig.max_bytes_of(10).emit_early_when_full())
    with pytest.raises(ValueError, match="must not be negative"):
        Suppressed.until_time_limit(-1)


@pytest.mark.parametrize("cache", [True, False])
def test_time_limit_on_a_windowed_table(cache):
    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(TimeWindows.of(100)).count()
     .suppress(Suppressed.until_time_limit(10))
     .to_stream(lambda w, v: f"{w.key}@{w.start}").to("out"))
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 10**7 if cache else 0})
    inp, out = driver.create_input_topic("in"), driver.create_output_topic("out")
    for ts in (0, 5, 9):
        inp.pipe_input("a", "x", timestamp=ts)
    assert _kvt(out) == []
    inp.pipe_input("b", "x", timestamp=10)  # a@0, held since 0, is due
    assert _kvt(out) == [("a@0", 3, 9)]
    inp.pipe_input("a", "x", timestamp=25)  # b@0 (held since 10) is due, a@0 again (since 25) not
    assert _kvt(out) == [("b@0", 1, 10)]


@pytest.mark.parametrize("seed", range(3))
def test_batches_equal_record_by_record_with_emit_early(seed):
    """The Spark runtime's micro-batches (the driver's batch mode) give the same final values
    per key as record-by-record processing; the buffer's stream time carries over batches."""
    rng = random.Random(seed)
    records = [(f"k{rng.randrange(6)}", f"v{rng.randrange(4)}", i * 3 + rng.randrange(5))
               for i in range(150)]
    cuts = set(rng.sample(range(1, 150), 6))
    results = []
    for batch_mode in (False, True):
        b = StreamsBuilder()
        (b.table("input").group_by(lambda k, v: (v, k)).count()
         .suppress(Suppressed.until_time_limit(
             20, BufferConfig.max_records_of(3).emit_early_when_full()))
         .to_stream().to("out"))
        driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 0},
                                    batch_mode=batch_mode)
        inp = driver.create_input_topic("input")
        for i, (k, v, ts) in enumerate(records):
            if batch_mode and i in cuts:
                driver.run_batch()
            inp.pipe_input(k, v, timestamp=ts)
        inp.pipe_input("end", "tick", timestamp=10_000)  # everything held is due
        if batch_mode:
            driver.run_batch()
        results.append(driver.create_output_topic("out").read_key_values_to_map())
    assert results[0] == results[1]
    assert sum(results[0].values()) == 6  # each of the six keys counted once
    assert "tick" not in results[0]  # held since 10_000: not due yet


def test_keys_held_since_one_time_leave_in_key_order():
    """Kafka Streams' buffer orders by time, then key: of two keys held since 5, the smaller
    leaves first when the buffer is full, even if it came last (and so after a restart, where
    the buffer is read back in whatever order its store lists it)."""
    b = StreamsBuilder()
    (b.table("input").suppress(Suppressed.until_time_limit(
        100, BufferConfig.max_records_of(1).emit_early_when_full())).to_stream().to("out"))
    driver = TopologyTestDriver(b.build())
    inp, out = driver.create_input_topic("input"), driver.create_output_topic("out")
    inp.pipe_input("b", 1, timestamp=5)
    inp.pipe_input("a", 2, timestamp=5)
    assert _kvt(out) == [("a", 2, 5)]
    inp.pipe_input("c", 3, timestamp=6)
    assert _kvt(out) == [("b", 1, 5)]


@pytest.mark.parametrize("cache", [True, False])
def test_a_time_limit_keeps_tombstones(cache):
    """Kafka's KTableSuppressProcessorTest: with a time limit a deletion is not dropped (only
    final results of windows may drop theirs)."""
    b = StreamsBuilder()
    (b.table("input", Materialized.as_("input")).suppress(Suppressed.until_time_limit(10))
     .to_stream().to("out"))
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 10**7 if cache else 0})
    inp, out = driver.create_input_topic("input"), driver.create_output_topic("out")
    inp.pipe_input("k", 1, timestamp=0)
    inp.pipe_input("k", None, timestamp=4)
    inp.pipe_input("other", 2, timestamp=10)  # k, held since 0, is due: its latest is deleted
    assert _kvt(out) == [("k", None, 4)]
