"""Sizes and durations of the public API take whole milliseconds or a ``timedelta``, and refuse
floats and booleans naming the argument (``streamtable.durations.to_ms``, used by every one)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamtable import (
    JoinWindows,
    Materialized,
    Processor,
    PunctuationType,
    Record,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    TopologyTestDriver,
)
from streamtable.durations import to_ms


def test_timedelta_is_converted_to_whole_milliseconds() -> None:
    assert to_ms(timedelta(minutes=2), "size_ms") == 120_000
    assert to_ms(timedelta(milliseconds=1, microseconds=999), "size_ms") == 1
    assert to_ms(timedelta(0), "grace_ms") == 0


def test_int_is_taken_as_milliseconds() -> None:
    assert to_ms(1500, "grace_ms") == 1500
    assert type(to_ms(1500, "grace_ms")) is int


@pytest.mark.parametrize("value", [1.0, 2.5, True, False, "60s", None])
def test_floats_booleans_and_others_are_refused_naming_the_argument(value: object) -> None:
    with pytest.raises(TypeError, match=r"^advance_ms must be whole milliseconds"):
        to_ms(value, "advance_ms")  # type: ignore[arg-type]


def test_windows_take_timedeltas() -> None:
    minute, second = timedelta(minutes=1), timedelta(seconds=1)
    assert TimeWindows.of(minute) == TimeWindows.of(60_000)
    assert TimeWindows.of(minute, second) == TimeWindows.of(60_000).with_grace(1000)
    assert TimeWindows.of_size_with_no_grace(minute) == TimeWindows.of(60_000)
    assert TimeWindows.of_size_and_grace(minute, second).grace == 1000
    assert TimeWindows.of(minute).advance_by(10 * second).advance == 10_000
    assert TimeWindows.of(minute).with_grace(second).grace == 1000
    assert SessionWindows.of_inactivity_gap(minute).gap == 60_000
    assert SessionWindows.of_inactivity_gap_and_grace(minute, second).grace == 1000
    assert SessionWindows.of_inactivity_gap(minute).with_grace(second).grace == 1000
    assert SlidingWindows.of_time_difference_and_grace(minute, second) == \
        SlidingWindows(60_000, 1000)
    assert SlidingWindows.of_time_difference_without_grace(minute).time_difference == 60_000
    assert JoinWindows.of_time_difference_and_grace(minute, second) == JoinWindows(60_000,
                                                                                   60_000, 1000)
    assert JoinWindows.of_time_difference_with_no_grace(minute).before(second).before_ms == 1000
    assert JoinWindows.of_time_difference_with_no_grace(minute).after(second).after_ms == 1000
    assert Suppressed.until_time_limit(minute).time_limit == 60_000
    assert Materialized.as_("s").with_retention(timedelta(hours=1)).retention == 3_600_000


@pytest.mark.parametrize("make, argument", [
    (lambda: TimeWindows.of(60.0), "size_ms"),
    (lambda: TimeWindows.of(60_000, 1.5), "grace_ms"),
    (lambda: TimeWindows.of_size_with_no_grace(60.0), "size_ms"),
    (lambda: TimeWindows.of(60_000).advance_by(1e3), "advance_ms"),
    (lambda: TimeWindows.of(60_000).with_grace(True), "grace_ms"),
    (lambda: SessionWindows.of_inactivity_gap(0.5), "gap_ms"),
    (lambda: SessionWindows.of_inactivity_gap(1000).with_grace(0.5), "grace_ms"),
    (lambda: SlidingWindows.of_time_difference_and_grace(10.0, 0), "time_difference_ms"),
    (lambda: JoinWindows.of_time_difference_and_grace(10, 0.0), "grace_ms"),
    (lambda: JoinWindows.of_time_difference_with_no_grace(10).before(1.0),
     "time_difference_ms"),
    (lambda: Suppressed.until_time_limit(1.0), "time_to_wait_for_more_records"),
    (lambda: Materialized.as_("s").with_retention(1.0), "retention_ms"),
])
def test_public_durations_refuse_floats_naming_the_argument(make, argument: str) -> None:
    with pytest.raises(TypeError, match=rf"^{argument} must be whole milliseconds"):
        make()


class _Ticker(Processor):
    def __init__(self, interval: object) -> None:
        self.interval = interval

    def init(self, context) -> None:  # type: ignore[no-untyped-def]
        context.schedule(self.interval, PunctuationType.WALL_CLOCK_TIME,
                         lambda now: context.forward(Record("tick", now, now)))

    def process(self, record: Record) -> None:
        pass


def _ticks(interval: object) -> TopologyTestDriver:
    b = StreamsBuilder()
    b.stream("in").process(lambda: _Ticker(interval)).to("ticks")
    return TopologyTestDriver(b.build(), initial_wall_clock_time_ms=0)


def test_punctuation_interval_and_driver_clock_take_timedeltas() -> None:
    driver = _ticks(timedelta(seconds=1))
    driver.advance_wall_clock_time(timedelta(seconds=1))
    driver.advance_wall_clock_time(1000)
    assert driver.create_output_topic("ticks").read_key_values() == [("tick", 1000),
                                                                      ("tick", 2000)]


def test_punctuation_interval_refuses_a_float() -> None:
    with pytest.raises(TypeError, match=r"^interval_ms must be whole milliseconds"):
        _ticks(1.0)


def test_input_topic_times_take_timedeltas() -> None:
    b = StreamsBuilder()
    b.stream("in").to("out")
    driver = TopologyTestDriver(b.build())
    topic = driver.create_input_topic("in", start_timestamp=0,
                                      auto_advance_ms=timedelta(seconds=5))
    topic.pipe_input("a", 1)
    topic.advance_time(timedelta(seconds=1))
    topic.pipe_input("b", 2)
    assert [r.timestamp for r in driver.create_output_topic("out").read_records()] == [0, 6000]
    with pytest.raises(TypeError, match=r"^ms must be whole milliseconds"):
        topic.advance_time(0.5)
    with pytest.raises(TypeError, match=r"^ms must be whole milliseconds"):
        driver.advance_wall_clock_time(0.5)
