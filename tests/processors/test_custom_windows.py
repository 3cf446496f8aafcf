"""Custom windows (a :class:`~streamtable.windowing.Windows` subclass) with count, reduce and
aggregate on the test driver: the same results as TimeWindows for the same windows, calendar
days in a time zone across daylight saving time, grace and suppression."""

from __future__ import annotations

import random

import pytest
from tests.processors.custom_windows import HOUR, DailyWindows, Hopping, paris

from streamtable import (
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    TopologyTestDriver,
    Windowed,
    Windows,
)


def _run(windows, records, op, batch_mode=False):
    b = StreamsBuilder()
    grouped = b.stream("in").group_by_key().windowed_by(windows)
    if op == "count":
        table = grouped.count("store")
    elif op == "reduce":
        table = grouped.reduce(lambda a, v: a + v, "store")
    else:
        table = grouped.aggregate(lambda: [], lambda k, v, a: [*a, v], "store")
    table.to_stream(lambda w, v: f"{w.key}@{w.start}-{w.end}").to("out")
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 0},
                                batch_mode=batch_mode)
    topic = driver.create_input_topic("in")
    for i, (k, v, ts) in enumerate(records):
        topic.pipe_input(k, v, timestamp=ts)
        if batch_mode and i % 7 == 6:
            driver.run_batch()
    if batch_mode:
        driver.run_batch()
    out = driver.create_output_topic("out").read_records()
    return [(r.key, r.value, r.timestamp) for r in out], driver


@pytest.mark.parametrize("op", ["count", "reduce", "aggregate"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_custom_hopping_windows_equal_time_windows(op, seed):
    rng = random.Random(seed)
    records = [(rng.choice("abc"), rng.randrange(1, 9), max(0, i * 700 - rng.randrange(0, 9000)))
               for i in range(150)]
    size, advance, grace = 5_000, 2_000, 3_000
    expected, reference = _run(TimeWindows.of(size).advance_by(advance).with_grace(grace),
                               records, op)
    got, driver = _run(Hopping(size, advance, grace), records, op)
    assert got == expected
    assert (driver.dropped_records.get("late record for a closed window")
            == reference.dropped_records.get("late record for a closed window"))
    assert driver.dropped_records.get("late record for a closed window")  # some were late
    batched, _ = _run(Hopping(size, advance, grace), records, op, batch_mode=True)
    ref_batched, _ = _run(TimeWindows.of(size).advance_by(advance).with_grace(grace), records,
                          op, batch_mode=True)
    assert batched == ref_batched


def test_daily_windows_in_a_time_zone_across_daylight_saving_time():
    sales = [("shop", 10, paris(2026, 3, 28, 9)), ("shop", 5, paris(2026, 3, 28, 23, 30)),
             ("shop", 7, paris(2026, 3, 29, 1)),   # DST begins at 2:00 on the 29th
             ("shop", 1, paris(2026, 3, 29, 23)),
             ("shop", 2, paris(2026, 3, 30, 0, 10)),
             ("shop", 4, paris(2026, 3, 29, 22)),  # within the grace period: the 29th is open
             ("shop", 3, paris(2026, 3, 30, 2)),
             ("shop", 100, paris(2026, 3, 29, 22))]  # late: the 29th closed at 1:00 on the 30th
    got, driver = _run(DailyWindows("Europe/Paris", grace_ms=HOUR), sales, "reduce")
    day28 = (paris(2026, 3, 28), paris(2026, 3, 29))
    day29 = (paris(2026, 3, 29), paris(2026, 3, 30))
    day30 = (paris(2026, 3, 30), paris(2026, 3, 31))
    assert day29[1] - day29[0] == 23 * HOUR and day28[1] - day28[0] == 24 * HOUR

    def key(day):
        return f"shop@{day[0]}-{day[1]}"

    assert [(k, v) for k, v, _ in got] == [
        (key(day28), 10), (key(day28), 15), (key(day29), 7), (key(day29), 8), (key(day30), 2),
        (key(day29), 12), (key(day30), 5)]
    assert driver.dropped_records == {"late record for a closed window": 1}
    assert driver.get_window_store("store").fetch("shop", day29[0], day29[0]) == [(day29[0], 12)]
    assert driver.get_window_store("store").fetch_windows("shop", day30[0], day30[0]) == [
        (Windowed("shop", *day30), 5)]


def test_daily_windows_final_results_with_suppression():
    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(DailyWindows("America/New_York"))
     .count("per-day").suppress(Suppressed.until_window_closes())
     .to_stream(lambda w, v: w.start).to("out"))
    driver = TopologyTestDriver(b.build())
    topic = driver.create_input_topic("in")
    ny = DailyWindows("America/New_York")
    t0 = next(iter(ny.windows_for(1_700_000_000_000)))  # a midnight in New York
    for ts in (t0 + 1, t0 + 5 * HOUR, t0 + 23 * HOUR):
        topic.pipe_input("k", "x", timestamp=ts)
    out = driver.create_output_topic("out")
    assert out.read_key_values() == []  # the day is not over
    topic.pipe_input("k", "x", timestamp=t0 + 24 * HOUR)  # next day: the first one closes
    assert out.read_key_values() == [(t0, 3)]


class BadWindows(Windows):
    def windows_for(self, timestamp):
        return {timestamp: (timestamp + 1, timestamp + 10)}

    def size(self):
        return 10


def test_windows_for_giving_a_start_other_than_its_key_is_an_error_naming_the_class():
    b = StreamsBuilder()
    b.stream("in").group_by_key().windowed_by(BadWindows()).count()
    driver = TopologyTestDriver(b.build())
    with pytest.raises(Exception, match="BadWindows.windows_for gave"):
        driver.create_input_topic("in").pipe_input("k", "v", timestamp=5)


def test_retention_below_size_plus_grace_is_refused():
    from streamtable import Materialized

    b = StreamsBuilder()
    with pytest.raises(ValueError, match=r"size\(\) plus grace_period_ms\(\)"):
        (b.stream("in").group_by_key().windowed_by(DailyWindows("UTC", grace_ms=HOUR))
         .count(Materialized.as_("s").with_retention(24 * HOUR)))
