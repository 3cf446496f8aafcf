"""Sliding windows, checked against Kafka Streams' own expectations (its
KStreamSlidingWindowAggregateTest: the same inputs, and the same results per window start,
values and timestamps), with caching on and off, forwarding every update or only final results.
"""

from __future__ import annotations

import pytest

from streamtable import (
    EmitStrategy,
    Materialized,
    SlidingWindows,
    StreamsBuilder,
    TopologyTestDriver,
    Windowed,
)

MODES = [(final, cache) for final in (False, True) for cache in (True, False)]


def _string_agg(windows, final, cache, store="store-name", reduce=False):
    b = StreamsBuilder()
    mat = Materialized.as_(store)
    mat = mat.with_caching_enabled() if cache else mat.with_caching_disabled()
    windowed = b.stream("topic").group_by_key().windowed_by(windows)
    if final:
        windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
    if reduce:
        table = windowed.reduce(lambda a, v: f"{a}+{v}", mat)
    else:
        table = windowed.aggregate(lambda: "0", lambda k, v, a: f"{a}+{v}", mat)
    table.to_stream(lambda w, v: (w.key, w.start, w.end)).to("out")
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 10**7 if cache else 0})
    return driver, driver.create_input_topic("topic"), driver.create_output_topic("out")


def _run(windows, final, cache, inputs, reduce=False):
    driver, topic, out = _string_agg(windows, final, cache, reduce=reduce)
    for value, ts in inputs:
        topic.pipe_input("A", value, timestamp=ts)
    return driver, out.read_records()


def _by_start(records, diff):
    """Kafka's gatherOutput: the set of (value, timestamp) forwarded per window start."""
    out: dict[int, set[tuple[str, int]]] = {}
    for r in records:
        key, start, end = r.key
        assert end == start + diff
        out.setdefault(start, set()).add((r.value, r.timestamp))
    return out


@pytest.mark.parametrize("final,cache", MODES)
def test_aggregate_small_input(final, cache):
    _, records = _run(SlidingWindows.of_time_difference_and_grace(10, 5), final, cache,
                      [("1", 10), ("2", 10), ("3", 14), ("4", 15), ("5", 20), ("6", 22),
                       ("7", 30)])
    if final:
        expected = {0: {("0+1+2", 10)}, 4: {("0+1+2+3", 14)}, 5: {("0+1+2+3+4", 15)},
                    10: {("0+1+2+3+4+5", 20)}, 11: {("0+3+4+5", 20)},
                    12: {("0+3+4+5+6", 22)}}
    else:
        expected = {
            0: {("0+1", 10), ("0+1+2", 10)},
            4: {("0+1+2+3", 14)},
            5: {("0+1+2+3+4", 15)},
            10: {("0+1+2+3+4+5", 20)},
            11: {("0+3", 14), ("0+3+4", 15), ("0+3+4+5", 20)},
            12: {("0+3+4+5+6", 22)},
            15: {("0+4", 15), ("0+4+5", 20), ("0+4+5+6", 22)},
            16: {("0+5", 20), ("0+5+6", 22)},
            20: {("0+5+6+7", 30)},
            21: {("0+6", 22), ("0+6+7", 30)},
            23: {("0+7", 30)},
        }
    assert _by_start(records, 10) == expected


@pytest.mark.parametrize("final,cache", MODES)
def test_reduce_small_input(final, cache):
    _, records = _run(SlidingWindows.of_time_difference_and_grace(10, 5), final, cache,
                      [("1", 10), ("2", 14), ("3", 15), ("4", 22), ("5", 26), ("6", 30)],
                      reduce=True)
    if final:
        expected = {0: {("1", 10)}, 4: {("1+2", 14)}, 5: {("1+2+3", 15)},
                    11: {("2+3", 15)}, 12: {("2+3+4", 22)}}
    else:
        expected = {
            0: {("1", 10)}, 4: {("1+2", 14)}, 5: {("1+2+3", 15)},
            11: {("2", 14), ("2+3", 15)}, 12: {("2+3+4", 22)},
            15: {("3", 15), ("3+4", 22)}, 16: {("4", 22), ("4+5", 26)},
            20: {("4+5+6", 30)}, 23: {("5", 26), ("5+6", 30)}, 27: {("6", 30)},
        }
    assert _by_start(records, 10) == expected


@pytest.mark.parametrize("final,cache", MODES)
def test_early_records_small_input(final, cache):
    _, records = _run(SlidingWindows.of_time_difference_and_grace(50, 0), final, cache,
                      [("1", 0), ("2", 5), ("3", 6), ("4", 3), ("5", 13), ("6", 10),
                       ("7", 70)])
    if final:
        expected = {0: {("0+1+2+3+4+5+6", 13)}, 1: {("0+2+3+4+5+6", 13)},
                    4: {("0+2+3+5+6", 13)}, 6: {("0+3+5+6", 13)}, 7: {("0+5+6", 13)},
                    11: {("0+5", 13)}}
    else:
        expected = {
            0: {("0+1", 0), ("0+1+2", 5), ("0+1+2+3", 6), ("0+1+2+3+4", 6),
                ("0+1+2+3+4+5", 13), ("0+1+2+3+4+5+6", 13)},
            1: {("0+2", 5), ("0+2+3", 6), ("0+2+3+4", 6), ("0+2+3+4+5", 13),
                ("0+2+3+4+5+6", 13)},
            4: {("0+2+3", 6), ("0+2+3+5", 13), ("0+2+3+5+6", 13)},
            6: {("0+3", 6), ("0+3+5", 13), ("0+3+5+6", 13)},
            7: {("0+5", 13), ("0+5+6", 13)},
            11: {("0+5", 13)},
            20: {("0+7", 70)},
        }
    assert _by_start(records, 50) == expected


@pytest.mark.parametrize("final,cache", MODES)
def test_early_records_repeated_input(final, cache):
    _, records = _run(SlidingWindows.of_time_difference_and_grace(5, 0), final, cache,
                      [("1", 0), ("2", 2), ("3", 4), ("4", 0), ("5", 2), ("6", 2), ("7", 0),
                       ("8", 7)])
    if final:
        expected = {0: {("0+1+2+3+4+5+6+7", 4)}, 1: {("0+2+3+5+6", 4)}}
    else:
        expected = {
            0: {("0+1", 0), ("0+1+2", 2), ("0+1+2+3+4+5", 4), ("0+1+2+3+4+5+6", 4),
                ("0+1+2+3", 4), ("0+1+2+3+4", 4), ("0+1+2+3+4+5+6+7", 4)},
            1: {("0+2+3+5+6", 4), ("0+2", 2), ("0+2+3", 4), ("0+2+3+5", 4)},
            2: {("0+2+3+5+6+8", 7)},
            3: {("0+3", 4), ("0+3+8", 7)},
            5: {("0+8", 7)},
        }
    assert _by_start(records, 5) == expected


@pytest.mark.parametrize("final,cache", MODES)
def test_no_grace_period_small_input(final, cache):
    _, records = _run(SlidingWindows.of_time_difference_without_grace(50), final, cache,
                      [("1", 100), ("2", 105), ("3", 106), ("4", 103), ("5", 113), ("6", 110)])
    if final:
        expected = {50: {("0+1", 100)}, 55: {("0+1+2", 105)}, 56: {("0+1+2+3+4", 106)}}
    else:
        expected = {
            50: {("0+1", 100)},
            55: {("0+1+2", 105)},
            56: {("0+1+2+3", 106), ("0+1+2+3+4", 106)},
            63: {("0+1+2+3+4+5", 113), ("0+1+2+3+4+5+6", 113)},
            101: {("0+2", 105), ("0+2+3", 106), ("0+2+3+4", 106), ("0+2+3+4+5", 113),
                  ("0+2+3+4+5+6", 113)},
            104: {("0+2+3", 106), ("0+2+3+5", 113), ("0+2+3+5+6", 113)},
            106: {("0+3", 106), ("0+3+5", 113), ("0+3+5+6", 113)},
            107: {("0+5", 113), ("0+5+6", 113)},
            111: {("0+5", 113)},
        }
    assert _by_start(records, 50) == expected


@pytest.mark.parametrize("final,cache", MODES)
def test_records_for_expired_windows_are_skipped_and_counted(final, cache):
    driver, topic, out = _string_agg(SlidingWindows.of_time_difference_and_grace(10, 90),
                                     final, cache)
    for value, ts in [("100", 200), ("0", 100), ("1", 101), ("2", 102), ("3", 103), ("4", 104),
                      ("5", 105), ("6", 15), ("101", 300), ("102", 400)]:
        topic.pipe_input("k", value, timestamp=ts)
    # Kafka: seven records skipped, each for its left window, which closed at 110
    assert driver.dropped_records == {"late record for a closed window": 7}
    got = [(tuple(r.key), r.value, r.timestamp) for r in out.read_records()]
    expected = [(("k", 190, 200), "0+100", 200), (("k", 290, 300), "0+101", 300)]
    if not final:
        expected.append((("k", 390, 400), "0+102", 400))
    assert got == expected


def test_unordered_updates_without_cache_follow_kafkas_order():
    """Without a cache every update is forwarded as it happens: for a record, the windows it
    falls into newest first, then the windows it creates (the previous record's right window,
    its own left window, its own right window)."""
    _, records = _run(SlidingWindows.of_time_difference_and_grace(10, 5), False, False,
                      [("1", 10), ("2", 14), ("3", 12)])
    assert [(r.key[1], r.value, r.timestamp) for r in records] == [
        (0, "0+1", 10),
        (11, "0+2", 14), (4, "0+1+2", 14),  # 2 creates 1's right window, then its own left
        (11, "0+2+3", 14),                  # 3 falls into [11, 21], then [4, 14]
        (4, "0+1+2+3", 14),
        (2, "0+1+3", 12),                   # its left window, seeded with [0, 10]'s "0+1"
        (13, "0+2", 14),                    # its right window: only 2 is after it
    ]


def test_window_store_fetch_and_retention():
    driver, topic, _ = _string_agg(SlidingWindows.of_time_difference_and_grace(10, 5), False,
                                   False)
    for value, ts in [("1", 10), ("2", 14), ("3", 30)]:
        topic.pipe_input("A", value, timestamp=ts)
    store = driver.get_window_store("store-name")
    # retention 2 * 10 + 5: at stream time 30 the windows starting at 5 or before are gone
    assert store.fetch("A", 0, 100) == [(11, "0+2"), (20, "0+3")]
    assert store.fetch_all(15, 25) == [(Windowed("A", 20, 30), "0+3")]
    topic.pipe_input("B", "9", timestamp=31)  # stream time 31: [4, 14] is gone too
    assert store.fetch("A", 0, 100) == [(11, "0+2"), (20, "0+3")]
    assert [w for w, _ in store.fetch_all()] == [
        Windowed("A", 11, 21), Windowed("A", 20, 30), Windowed("B", 21, 31)]
    with pytest.raises(TypeError, match="not a session store"):
        driver.get_session_store("store-name")


def test_retention_shorter_than_windows_need_is_refused():
    b = StreamsBuilder()
    windowed = b.stream("t").group_by_key().windowed_by(
        SlidingWindows.of_time_difference_and_grace(10, 5))
    with pytest.raises(ValueError, match="twice the time difference plus the grace"):
        windowed.count(Materialized.as_("c").with_retention(24))
    windowed.count(Materialized.as_("c").with_retention(25))


LARGE_INPUT = [("A", "1", 10), ("A", "2", 20), ("A", "3", 22), ("A", "4", 15), ("B", "1", 12),
               ("B", "2", 13), ("B", "3", 18), ("B", "4", 19), ("B", "5", 25), ("B", "6", 14),
               ("C", "1", 11), ("C", "2", 15), ("C", "3", 16), ("C", "4", 21), ("C", "5", 23),
               ("D", "4", 11), ("D", "2", 12), ("D", "3", 29), ("D", "5", 16)]


@pytest.mark.parametrize("final,cache", MODES)
def test_aggregate_large_input(final, cache):
    """Kafka's testAggregateLargeInput: every update per window, in order (the output sorted
    stably by key and window start)."""
    driver, topic, out = _string_agg(
        SlidingWindows.of_time_difference_and_grace(10, 10 if final else 50), final, cache)
    for key, value, ts in LARGE_INPUT:
        topic.pipe_input(key, value, timestamp=ts)
    got = sorted(((*r.key, r.value, r.timestamp) for r in out.read_records()),
                 key=lambda r: (r[0], r[1]))
    if final:
        expected = [
            ("A", 0, 10, "0+1", 10), ("A", 5, 15, "0+1+4", 15),
            ("B", 2, 12, "0+1", 12), ("B", 3, 13, "0+1+2", 13), ("B", 8, 18, "0+1+2+3+6", 18),
            ("C", 5, 15, "0+2", 15), ("C", 6, 16, "0+2+3", 16)]
    else:
        expected = [
            ("A", 0, 10, "0+1", 10), ("A", 5, 15, "0+1+4", 15), ("A", 10, 20, "0+1+2", 20),
            ("A", 10, 20, "0+1+2+4", 20), ("A", 11, 21, "0+2", 20), ("A", 11, 21, "0+2+4", 20),
            ("A", 12, 22, "0+2+3", 22), ("A", 12, 22, "0+2+3+4", 22),
            ("A", 16, 26, "0+2+3", 22), ("A", 21, 31, "0+3", 22),
            ("B", 2, 12, "0+1", 12), ("B", 3, 13, "0+1+2", 13), ("B", 4, 14, "0+1+2+6", 14),
            ("B", 8, 18, "0+1+2+3", 18), ("B", 8, 18, "0+1+2+3+6", 18),
            ("B", 9, 19, "0+1+2+3+4", 19), ("B", 9, 19, "0+1+2+3+4+6", 19),
            ("B", 13, 23, "0+2", 13), ("B", 13, 23, "0+2+3", 18), ("B", 13, 23, "0+2+3+4", 19),
            ("B", 13, 23, "0+2+3+4+6", 19), ("B", 14, 24, "0+3", 18),
            ("B", 14, 24, "0+3+4", 19), ("B", 14, 24, "0+3+4+6", 19),
            ("B", 15, 25, "0+3+4+5", 25), ("B", 19, 29, "0+4", 19), ("B", 19, 29, "0+4+5", 25),
            ("B", 20, 30, "0+5", 25),
            ("C", 1, 11, "0+1", 11), ("C", 5, 15, "0+1+2", 15), ("C", 6, 16, "0+1+2+3", 16),
            ("C", 11, 21, "0+1+2+3+4", 21), ("C", 12, 22, "0+2", 15),
            ("C", 12, 22, "0+2+3", 16), ("C", 12, 22, "0+2+3+4", 21),
            ("C", 13, 23, "0+2+3+4+5", 23), ("C", 16, 26, "0+3", 16),
            ("C", 16, 26, "0+3+4", 21), ("C", 16, 26, "0+3+4+5", 23),
            ("C", 17, 27, "0+4", 21), ("C", 17, 27, "0+4+5", 23), ("C", 22, 32, "0+5", 23),
            ("D", 1, 11, "0+4", 11), ("D", 2, 12, "0+4+2", 12), ("D", 6, 16, "0+4+2+5", 16),
            ("D", 12, 22, "0+2", 12), ("D", 12, 22, "0+2+5", 16), ("D", 13, 23, "0+5", 16),
            ("D", 19, 29, "0+3", 29)]
    assert got == expected
