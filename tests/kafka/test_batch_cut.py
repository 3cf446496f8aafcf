"""The cut of a batch at a timestamp, against fake offset lookups (Kafka's offsetsForTimes)."""

from __future__ import annotations

import random
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from streamtable.kafka.batch_cut import BatchCutter, Found, cut_at_timestamp, split_budget

BASE = 1_436_918_400_000  # timestamps of today's size: the search must not crawl up to them


class FakeLog:
    """Partitions as lists of record timestamps (None: a record without one), answering
    ``lookup(T)`` as Kafka's ListOffsets by timestamp does: the earliest offset of the whole
    log whose timestamp is ``T`` or later, and that timestamp."""

    def __init__(self, logs: Mapping[str, list[int | None]], with_timestamps: bool = True):
        self.logs = logs
        self.with_timestamps = with_timestamps
        self.asked: list[int] = []

    def lookup(self, t: int) -> dict[str, Found]:
        assert t >= 0, "ListOffsets takes no negative timestamp"
        self.asked.append(t)
        out: dict[str, Found] = {}
        for key, log in self.logs.items():
            out[key] = next(((o, ts if self.with_timestamps else None)
                             for o, ts in enumerate(log) if ts is not None and ts >= t),
                            (None, None))
        return out

    def before(self, t: int, starts: Mapping[str, int], ends: Mapping[str, int]) -> int:
        """Records of the ranges before each partition's first record at or after ``t``."""
        total = 0
        for key, log in self.logs.items():
            first = next((o for o, ts in enumerate(log) if ts is not None and ts >= t), None)
            end = ends[key] if first is None else min(max(first, starts[key]), ends[key])
            total += end - starts[key]
        return total


def test_a_dense_and_a_sparse_partition_end_at_the_same_time() -> None:
    log = FakeLog({"bids": [BASE + i for i in range(0, 1000, 2)],      # every 2 ms
                   "persons": [BASE + i for i in range(0, 1000, 50)]})  # every 50 ms
    starts, ends = {"bids": 0, "persons": 0}, {"bids": 500, "persons": 20}
    cut = cut_at_timestamp(starts, ends, 104, log.lookup)
    # 104 records: the bids before BASE + 200 (100) and the persons before it (4)
    assert cut.ends == {"bids": 100, "persons": 4}
    assert cut.timestamp == BASE + 200
    by_count = split_budget({"bids": 500, "persons": 20}, 104)
    assert by_count == {"bids": 84, "persons": 20}  # what the cut replaces: persons run ahead


def test_records_at_the_cut_time_fill_the_budget_so_a_batch_always_progresses() -> None:
    log = FakeLog({"a": [BASE] * 10})  # one partition, every record at one timestamp
    cut = cut_at_timestamp({"a": 0}, {"a": 10}, 3, log.lookup)
    assert cut.ends == {"a": 3} and cut.timestamp == BASE
    cut = cut_at_timestamp({"a": 3}, {"a": 10}, 1, log.lookup, lower=BASE)
    assert cut.ends == {"a": 4}
    # two partitions both at that timestamp: the records at it are shared by count
    log = FakeLog({"a": [BASE] * 10, "b": [BASE - 5, BASE, BASE]})
    cut = cut_at_timestamp({"a": 0, "b": 0}, {"a": 10, "b": 3}, 5, log.lookup)
    assert cut.ends == {"a": 2, "b": 3} and cut.timestamp == BASE


def test_empty_partitions_and_partitions_past_their_start_are_left_alone() -> None:
    log = FakeLog({"a": [BASE + i for i in range(10)], "b": [BASE + 3], "c": []})
    cut = cut_at_timestamp({"a": 4, "b": 1, "c": 0}, {"a": 10, "b": 1, "c": 0}, 2, log.lookup)
    assert cut.ends == {"a": 6, "b": 1, "c": 0}
    assert all(t >= 0 for t in log.asked)


def test_a_batch_that_fits_needs_no_lookup() -> None:
    log = FakeLog({"a": [BASE, BASE + 1]})
    cut = cut_at_timestamp({"a": 0}, {"a": 2}, 2, log.lookup)
    assert cut.ends == {"a": 2} and cut.lookups == 0 and not log.asked


def test_a_lookup_that_knows_nothing_gives_the_split_by_count() -> None:
    # a broker that answers offset 0 for every timestamp (the development broker does)
    cut = cut_at_timestamp({"a": 5, "b": 0}, {"a": 50, "b": 4}, 10,
                           lambda t: {"a": (0, None), "b": (0, None)})
    assert cut.ends == {"a": 5 + 6, "b": 4}
    assert cut.ends["a"] - 5 + cut.ends["b"] == 10


def test_records_without_timestamps_come_before_any_time() -> None:
    log = FakeLog({"a": [None, None, None, BASE, BASE + 1], "b": [BASE + 1]})
    cut = cut_at_timestamp({"a": 0, "b": 0}, {"a": 5, "b": 1}, 2, log.lookup)
    assert cut.ends == {"a": 2, "b": 0} and cut.timestamp is None
    cut = cut_at_timestamp({"a": 0, "b": 0}, {"a": 5, "b": 1}, 4, log.lookup)
    assert cut.ends == {"a": 4, "b": 0} and cut.timestamp == BASE + 1


def test_the_search_takes_about_two_lookups_per_bit_of_the_batchs_time_span() -> None:
    step = 100  # a record every 100 ms on four partitions, 10,000 each
    log = FakeLog({p: [BASE + i * step + j for i in range(10_000)] for j, p in enumerate("abcd")})
    starts = {p: 0 for p in "abcd"}
    ends = {p: 10_000 for p in "abcd"}
    # a batch spans 100,000 ms (17 bits): up from the first record, then back
    cut = cut_at_timestamp(starts, ends, 4_000, log.lookup)
    assert sum(cut.ends.values()) == 4_000 and cut.lookups <= 2 * 17 + 2
    again = cut_at_timestamp(cut.ends, ends, 4_000, log.lookup, lower=cut.timestamp)
    assert sum(again.ends.values()) - 4_000 == 4_000 and again.lookups <= 2 * 17 + 2
    assert again.ends == {p: 2_000 for p in "abcd"}
    # also without the timestamps found: from the last cut, not from 0
    plain = cut_at_timestamp(cut.ends, ends, 4_000, FakeLog(log.logs, False).lookup,
                             lower=cut.timestamp)
    assert plain.ends == again.ends and plain.lookups <= 2 * 17 + 2


def test_from_the_last_cut_and_its_span_a_search_takes_a_few_lookups() -> None:
    # records every 10 ms on four partitions, a little uneven; each batch 10,000 ms of them
    rng = random.Random(5)
    log = FakeLog({p: [BASE + i * 10 + rng.randrange(10) for i in range(20_000)]
                   for p in "abcd"})
    ends = {p: 20_000 for p in "abcd"}
    cutter = BatchCutter(lambda starts, ends, budget: log.lookup)
    starts = {p: 0 for p in "abcd"}
    lookups = []
    for _ in range(8):
        share = cutter.share(starts, {p: ends[p] - starts[p] for p in "abcd"}, 4_000)
        lookups.append(cutter.last_lookups)
        expected = cut_at_timestamp(starts, ends, 4_000, log.lookup)  # no hints
        assert share == {p: expected.ends[p] - starts[p] for p in "abcd"}
        starts = {p: starts[p] + share[p] for p in "abcd"}
    # the first two batches search from nothing and from the last cut; then from its span
    assert max(lookups[2:]) <= 8, str(lookups)


def test_records_that_thin_out_past_the_last_span_cost_a_few_lookups_more() -> None:
    """A burst of bids, then hours of nothing, beside a steady sparse topic: the search from
    the last cut, aimed where the burst's rate puts the budget, falls short again and again,
    and must widen its steps rather than creep a record a lookup (and hit MAX_LOOKUPS, whose
    fallback shares the rest by count and lets the bids of hours later into the batch)."""
    from bisect import bisect_left

    bids = ([BASE + i for i in range(98_000)]
            + [BASE + 20_000_000 + i for i in range(50_000)])
    persons = [BASE + 1000 * i for i in range(30_000)]
    logs = {"bids": bids, "persons": persons}
    asked = []

    def lookup(t: int) -> dict[str, Found]:
        asked.append(t)
        out: dict[str, Found] = {}
        for key, log in logs.items():
            i = bisect_left(log, t)
            out[key] = (i, log[i]) if i < len(log) else (None, None)
        return out

    starts = {"bids": 0, "persons": 0}
    ends = {"bids": len(bids), "persons": len(persons)}
    cut = cut_at_timestamp(starts, ends, 100_000, lookup, lower=BASE, span=100_000)
    assert cut.lookups <= 30, cut.lookups
    plain = cut_at_timestamp(starts, ends, 100_000, lookup)
    assert cut.ends == plain.ends == {"bids": 98_000, "persons": 2_000}


def first_from(data: Mapping[str, list[int | None]], key: str, t: int,
               starts: Mapping[str, int], ends: Mapping[str, int]) -> int:
    """The offset of ``key``'s first record at or after ``t`` in its range (-1: its start)."""
    if t < 0:
        return starts[key]
    o = next((i for i, ts in enumerate(data[key]) if ts is not None and ts >= t), None)
    return ends[key] if o is None else min(max(o, starts[key]), ends[key])


logs = st.dictionaries(
    st.sampled_from("abcde"),
    st.lists(st.one_of(st.none(), st.integers(BASE, BASE + 60)), max_size=25),
    min_size=1)


@settings(max_examples=400, deadline=None)
@given(logs, st.data(), st.integers(1, 60), st.booleans(), st.booleans())
def test_the_cut_is_the_latest_timestamp_whose_records_fit(
        data: dict[str, list[int | None]], draw: st.DataObject, budget: int,
        with_timestamps: bool, monotonic: bool) -> None:
    if monotonic:  # offsetsForTimes on partitions in order, and on partitions out of order
        data = {k: sorted(v, key=lambda t: -1 if t is None else t) for k, v in data.items()}
    log = FakeLog(data, with_timestamps)
    starts = {k: draw.draw(st.integers(0, len(v))) for k, v in data.items()}
    ends = {k: draw.draw(st.integers(starts[k], len(v))) for k, v in data.items()}
    lower = draw.draw(st.one_of(st.none(), st.integers(BASE - 5, BASE + 70)))
    span = draw.draw(st.one_of(st.none(), st.integers(1, 80)))
    cut = cut_at_timestamp(starts, ends, budget, log.lookup, lower=lower, span=span)
    available = sum(ends[k] - starts[k] for k in data)
    taken = sum(cut.ends[k] - starts[k] for k in data)
    assert taken == min(budget, available)
    assert all(starts[k] <= cut.ends[k] <= ends[k] for k in data)
    if available <= budget:
        assert cut.ends == ends
        return
    # the latest timestamp before which the records fit: the records before a timestamp only
    # grow with it, so the one whose successor does not fit
    if log.before(0, starts, ends) > budget:  # records without a timestamp fill the budget
        assert cut.timestamp is None
    else:
        assert cut.timestamp is not None
        assert log.before(cut.timestamp, starts, ends) <= budget
        assert log.before(cut.timestamp + 1, starts, ends) > budget
    # every partition is cut between its first record at or after T and its first after T
    t = cut.timestamp if cut.timestamp is not None else -1
    for k in data:
        assert (first_from(data, k, t, starts, ends) <= cut.ends[k]
                <= first_from(data, k, max(t + 1, 0), starts, ends)), k
    # the same cut whether the lookup tells the timestamps it found or not, whatever the hint
    plain = cut_at_timestamp(starts, ends, budget, FakeLog(data, False).lookup)
    assert plain.ends == cut.ends and plain.timestamp == cut.timestamp


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from("abcde"),
                       st.lists(st.integers(BASE, BASE + 8), max_size=25), min_size=2),
       st.data(), st.integers(1, 12))
def test_a_tables_records_at_the_cut_go_in_before_the_others_at_the_cut(
        data: dict[str, list[int]], draw: st.DataObject, budget: int) -> None:
    # few distinct timestamps: most cuts fall among records of equal time
    data = {k: sorted(v) for k, v in data.items()}
    tables = set(draw.draw(st.sets(st.sampled_from(sorted(data)), min_size=1)))
    log = FakeLog(data)
    starts = {k: 0 for k in data}
    ends = {k: len(v) for k, v in data.items()}
    while starts != ends:
        cut = cut_at_timestamp(starts, ends, budget, log.lookup, first_at_cut=tables)
        assert sum(cut.ends[k] - starts[k] for k in data) == min(
            budget, sum(ends[k] - starts[k] for k in data))
        # a stream record in this batch or an earlier one: every table record of its time or
        # earlier is there too, so a task processing tables first at equal times sees them
        latest_stream = max((data[k][cut.ends[k] - 1] for k in data
                             if k not in tables and cut.ends[k] > 0), default=None)
        if latest_stream is not None:
            for k in tables:
                left = data[k][cut.ends[k]:]
                assert not left or left[0] > latest_stream, (k, cut)
        starts = cut.ends
