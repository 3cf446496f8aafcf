"""The burst bench's logic on synthetic data (no broker, no Spark): the rate schedule and the
pacer following it, the phases as sent, the recovery time, the backlog, the batches from the
application's log, and the figures of a whole run."""

from __future__ import annotations

import math
import time

import pytest
from bench.burst import PHASES, phases_of, schedule_of
from bench.burst_report import (
    Batch,
    Phase,
    batch_stats,
    drained_seconds,
    figures,
    latency_stats,
    memory_peaks,
    parse_app_log,
    reading,
    recovery_seconds,
    table,
    with_waiting,
)
from bench.burst_series import per_second
from bench.harness import PacerResult, RateSchedule, TreeSample, pace

# ------------------------------------------------------------------------- the schedule


def test_schedule_places_each_phase_records_at_its_rate():
    s = schedule_of(100, 10, warmup=1, steady=2, burst=1, recover=3)
    assert [s.first_index(k) for k in range(4)] == [0, 100, 300, 1300]
    assert s.total_records == 1600
    # evenly spaced within a phase, each phase starting where the last ended
    assert s.time_of(0) == 0.0
    assert s.time_of(150) == pytest.approx(1.5)
    assert s.time_of(300) == pytest.approx(3.0)
    assert s.time_of(301) == pytest.approx(3.001)
    assert s.time_of(1300) == pytest.approx(4.0)
    assert s.time_of(1599) == pytest.approx(6.99)


def test_schedule_records_by_is_the_inverse_of_time_of():
    s = RateSchedule(((2.5, 3.0), (1.0, 40.0), (2.0, 7.0)))
    for i in range(s.total_records):
        assert s.records_by(s.time_of(i)) == pytest.approx(i)
    # a phase of fractional records: 7.5 records in the first, the 8th belongs to the second
    assert s.first_index(1) == 8
    assert s.time_of(7) < 2.5 <= s.time_of(8)


def test_constant_schedule_is_the_single_rate_of_the_latency_runs():
    s = RateSchedule.constant(10_000.0)
    assert s.time_of(25_000) == pytest.approx(2.5)
    assert s.records_by(3.0) == pytest.approx(30_000)
    with pytest.raises(ValueError, match="endless"):
        _ = s.total_records


def test_schedule_refuses_a_rate_of_zero():
    with pytest.raises(ValueError, match="rate > 0"):
        RateSchedule(((1.0, 0.0),))


# ------------------------------------------------------------------------------ the pacer


class FakeTime:
    """A clock that moves only when the pacer sleeps (or a slow producer works)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeProducer:
    """Records each produce() at the fake time; ``cost`` seconds per record (a slow producer),
    ``full_at``: indices whose first produce() raises BufferError (a full queue)."""

    def __init__(self, fake: FakeTime, cost: float = 0.0, full_at: set[int] | None = None):
        self.fake = fake
        self.cost = cost
        self.full_at = set(full_at or ())
        self.sent: list[tuple[float, bytes | None]] = []
        self.polls: list[float] = []
        self.flushed = False

    def produce(self, topic: str, key: bytes | None = None, value: bytes | None = None) -> None:
        n = len(self.sent)
        if n in self.full_at:
            self.full_at.discard(n)
            raise BufferError("queue full")
        self.fake.now += self.cost
        self.sent.append((self.fake.now, value))

    def poll(self, timeout: float) -> int:
        self.polls.append(timeout)
        return 0

    def flush(self, timeout: float) -> int:
        self.flushed = True
        return 0


def _records(n: int) -> list[tuple[bytes | None, bytes | None]]:
    return [(None, str(i).encode()) for i in range(n)]


def test_pacer_sends_each_record_when_its_schedule_says():
    fake = FakeTime()
    producer = FakeProducer(fake)
    s = RateSchedule(((1.0, 50.0), (0.5, 400.0), (1.0, 50.0)))
    records = _records(s.total_records)
    probes = {0, 10, 50, 120, 249, 299}
    res = pace("unused", "t", records, s, probes, producer=producer, clock=fake.clock,
               sleep=fake.sleep)
    assert res.sent == len(records) == 300
    assert [v for _, v in producer.sent] == [v for _, v in records]  # in order, once each
    for i, (t, _) in enumerate(producer.sent):
        due = res.started + s.time_of(i)
        # never early; at most one of the pacer's 1 ms sleeps late
        assert due - 1e-6 <= t <= due + 0.001 + 1e-6, i
    # the burst's 200 records went out within its half second
    burst = [t - res.started for t, _ in producer.sent[50:250]]
    assert 1.0 - 1e-6 <= min(burst) and max(burst) < 1.5
    assert set(res.send_times) == probes
    assert res.send_times[120] == producer.sent[120][0]
    assert res.max_lag <= 0.001 + 1e-6
    assert producer.flushed


def test_pacer_behind_its_schedule_sends_what_is_due_and_reports_its_lag():
    fake = FakeTime()
    producer = FakeProducer(fake, cost=1 / 100)  # can send 100 records/s at most
    s = RateSchedule(((1.0, 50.0), (1.0, 500.0)))
    res = pace("unused", "t", _records(s.total_records), s, set(), producer=producer,
               clock=fake.clock, sleep=fake.sleep)
    assert res.sent == 550
    # the second phase's 500 records at 100/s: 5 s instead of its 1 s, and the lag says so
    assert res.seconds == pytest.approx(6.0, abs=0.05)
    assert res.max_lag > 3.5


def test_pacer_retries_a_record_the_full_queue_refused():
    fake = FakeTime()
    producer = FakeProducer(fake, full_at={3, 7})
    res = pace("unused", "t", _records(20), 100.0, set(), producer=producer,
               clock=fake.clock, sleep=fake.sleep)
    assert res.sent == 20
    assert [v for _, v in producer.sent] == [str(i).encode() for i in range(20)]
    assert producer.polls.count(0.01) == 2  # it waited for room twice


def test_pacer_stops_when_told():
    import threading

    fake = FakeTime()
    stop = threading.Event()

    class StoppingProducer(FakeProducer):
        def produce(self, topic, key=None, value=None):  # type: ignore[no-untyped-def]
            super().produce(topic, key, value)
            if len(self.sent) == 5:
                stop.set()

    producer = StoppingProducer(fake)
    res = pace("unused", "t", _records(100), 10.0, set(), stop, producer=producer,
               clock=fake.clock, sleep=fake.sleep)
    assert res.sent == 5


def test_phases_as_sent_start_at_their_first_records_send_time():
    s = schedule_of(100, 10, warmup=1, steady=2, burst=1, recover=3)
    # the pacer fell 0.5 s behind in the burst: the phases follow what was sent
    pr = PacerResult(sent=1600, seconds=7.5, started=50.0,
                     send_times={0: 50.0, 100: 51.0, 300: 53.0, 1300: 54.5})
    phases = phases_of(s, pr)
    assert [p.name for p in phases] == list(PHASES)
    assert [(p.first, p.end) for p in phases] == [(0, 100), (100, 300), (300, 1300),
                                                   (1300, 1600)]
    assert [(p.start, p.stop) for p in phases] == [(50.0, 51.0), (51.0, 53.0), (53.0, 54.5),
                                                    (54.5, 57.5)]
    assert phases[2].rate == 1000
    assert phases[2].achieved_rate == pytest.approx(1000 / 1.5)


# --------------------------------------------------------------------------- the recovery


def test_recovery_is_the_first_probe_from_which_a_whole_window_is_under_the_threshold():
    # burst ended at 100; latency falls below 0.5 at 104, jumps once at 106, good from 107
    probes = ([(t, 9.0) for t in (95.0, 99.0)]  # sent in the burst: not considered
              + [(100.0 + k, lat) for k, lat in enumerate(
                  [8.0, 6.0, 4.0, 2.0, 0.4, 0.3, 0.9, 0.3, 0.2, 0.3, 0.2, 0.3, 0.2])])
    assert recovery_seconds(probes, 100.0, threshold=0.5, window=3.0) == 7.0
    # a window that fits before the relapse
    assert recovery_seconds(probes, 100.0, threshold=0.5, window=1.0) == 4.0


def test_recovery_is_zero_without_a_backlog():
    probes = [(100.0 + k * 0.5, 0.1) for k in range(30)]
    assert recovery_seconds(probes, 100.0, threshold=0.5, window=5.0) == 0.0


def test_a_probe_never_seen_is_not_recovered():
    probes = [(100.0 + k, None if k == 3 else 0.1) for k in range(12)]
    assert recovery_seconds(probes, 100.0, threshold=0.5, window=4.0) == 4.0
    assert recovery_seconds(probes, 100.0, threshold=0.5, window=2.0) == 0.0  # fits before


def test_no_recovery_when_the_run_ends_before_a_full_window():
    probes = [(100.0 + k, 5.0 if k < 8 else 0.1) for k in range(10)]
    assert recovery_seconds(probes, 100.0, threshold=0.5, window=3.0) is None
    assert recovery_seconds([], 100.0, threshold=0.5, window=3.0) is None


def test_a_latency_equal_to_the_threshold_counts_as_recovered():
    probes = [(100.0 + k, 0.5) for k in range(5)]
    assert recovery_seconds(probes, 100.0, threshold=0.5, window=2.0) == 0.0


# ------------------------------------------------------------------ batches and the backlog


LOG = """\
2026-01-02 03:04:05,250 streamtable.progress INFO app batch 7: 1200 records in 0.40 s (3000 records/s), 0 behind
2026-01-02 03:04:05,300 streamtable.app INFO something else
2026-01-02 03:04:06,000 streamtable.app INFO the last batch's tasks grew by up to 600 MB for 900000 records (budget 512 MB): the next batch takes at most 768000
2026-01-02 03:04:07,500 streamtable.progress INFO app batch 8: 768000 records in 9.10 s (84395 records/s)
"""  # noqa: E501


def test_app_log_gives_the_batches_and_the_budgets_limits():
    batches, limits = parse_app_log(LOG.splitlines())
    assert [(b.batch_id, b.records, b.seconds, b.behind) for b in batches] == [
        (7, 1200, 0.4, 0), (8, 768000, 9.1, None)]
    assert batches[1].t - batches[0].t == pytest.approx(2.25)
    expected_t = time.mktime(time.strptime("2026-01-02 03:04:05", "%Y-%m-%d %H:%M:%S")) + 0.25
    assert batches[0].t == pytest.approx(expected_t)
    assert [(x.growth_mb, x.records, x.budget_mb, x.limit) for x in limits] == [
        (600, 900000, 512, 768000)]


def test_waiting_is_what_was_sent_by_a_batchs_end_less_what_was_processed():
    sent = {i: 10.0 + i / 100 for i in range(0, 1000, 20)}  # 100 records/s from t=10
    batches = [Batch(t, k, r, 0.5, 0) for k, (t, r) in
               enumerate([(9.5, 2), (11.0, 80), (13.0, 150), (15.0, 270)])]
    out = with_waiting(batches, sent, since=10.0)
    assert [b.batch_id for b in out] == [1, 2, 3]  # the batch before the pacer is left out
    # by 11.0: records 0..100 sent (index 100 at 11.0) = 101; processed 80
    # by 13.0: 301 sent, 230 processed; by 15.0: 501 sent, 500 processed
    assert [b.waiting for b in out] == [21, 71, 1]


def test_batch_stats_cover_the_batches_ending_in_a_span():
    bs = [Batch(t, k, r, s, None, w) for k, (t, r, s, w) in enumerate(
        [(1.0, 100, 0.2, 10), (2.0, 300, 0.4, 50), (3.0, 200, 0.6, 20), (5.0, 9, 9.0, 999)])]
    st = batch_stats(bs, 1.0, 4.0)
    assert st == {"batches": 3, "records": 600, "median_records": 200, "max_records": 300,
                  "median_s": 0.4, "max_s": 0.6, "max_waiting": 50, "processed_per_s": 200.0}
    assert batch_stats(bs, 10.0, 20.0) == {"batches": 0}


def test_backlog_drained_at_the_first_batch_back_to_the_steady_waiting():
    bs = [Batch(t, 0, 1, 0.1, None, w) for t, w in
          [(5.0, 40), (9.0, 500), (11.0, 900), (13.0, 70), (14.0, 40), (16.0, 100)]]
    assert drained_seconds(bs, burst_start=8.0, burst_end=10.0, steady_waiting=60) == 4.0
    assert drained_seconds(bs, 8.0, 10.0, steady_waiting=1000) == 0.0
    assert drained_seconds(bs[:3], 8.0, 10.0, steady_waiting=60) is None


# ---------------------------------------------------------------------- figures of a run


def _run() -> tuple[list[Phase], dict[int, tuple[float, float | None]], list[Batch],
                    list[TreeSample]]:
    """A synthetic run: 10 s warm-up, 20 s steady, 10 s burst, 30 s after, probes every
    0.5 s; latency 0.2 s (steady p99 0.3 s), growing in the burst, back 12 s after it."""
    t0 = 1000.0
    spans = [(0, 10), (10, 30), (30, 40), (40, 70)]
    rates = [100, 100, 1000, 100]
    phases, first = [], 0
    for name, (a, b), rate in zip(PHASES, spans, rates, strict=True):
        n = (b - a) * rate
        phases.append(Phase(name, rate, first, first + n, t0 + a, t0 + b))
        first += n
    probes: dict[int, tuple[float, float | None]] = {}
    for p in phases:
        for i in range(p.first, p.end, 50 if p.rate == 100 else 500):
            s = p.start + (i - p.first) / p.rate
            if p.name == "burst":
                lat: float | None = 0.5 + (s - p.start)
            elif p.name == "after" and s < p.start + 12:
                lat = 10.0 - (s - p.start) * 0.8
            else:
                lat = 0.3 if i % 1000 == 0 else 0.2
            probes[i] = (s, lat)
    probes[max(probes)] = (probes[max(probes)][0], None)  # one never seen, at the very end
    batches = [Batch(t0 + t, k, r, 0.5, 0, w) for k, (t, r, w) in enumerate(
        [(15.0, 100, 50), (25.0, 100, 60), (35.0, 4000, 6000), (45.0, 8000, 3000),
         (53.0, 500, 55), (60.0, 100, 40)])]
    timeline = [TreeSample(t0 + t, rss * 2**20, pss * 2**20, w * 2**20) for t, rss, pss, w in
                [(5.0, 900, 700, 300), (20.0, 1000, 800, 350), (35.0, 1500, 1200, 600),
                 (60.0, 1100, 900, 400)]]
    return phases, probes, batches, timeline


def test_figures_of_a_run_split_by_period():
    phases, probes, batches, timeline = _run()
    fig = figures(phases, probes, ended=1075.0, batches=batches, limits=[],
                  timeline=timeline, factor=1.5, window=5.0)
    steady = fig["latency"]["steady"]
    assert steady["probes"] == 40 and steady["missing"] == 0
    assert steady["p50_ms"] == 200.0 and steady["p99_ms"] == 300.0
    burst = fig["latency"]["burst"]
    assert burst["max_ms"] == 10000.0 and burst["missing"] == 0
    after = fig["latency"]["after"]
    assert after["missing"] == 1 and after["lower_bound"]
    assert after["max_ms"] == 10000.0
    # threshold 450 ms: latency 10 - 0.8 x is at or under it from x = 11.94 s; probes every
    # 0.5 s: the one at 12.0 s (latency 0.2 s after the 12 s of decay)
    assert fig["recovery"]["threshold_ms"] == 450.0
    assert fig["recovery"]["seconds"] == 12.0
    assert fig["memory"]["steady"] == {"samples": 1, "rss_mb": 1000.0, "pss_mb": 800.0,
                                       "workers_pss_mb": 350.0}
    assert fig["memory"]["burst_and_after"]["rss_mb"] == 1500.0
    assert fig["memory"]["burst_and_after"]["workers_pss_mb"] == 600.0
    assert fig["memory"]["whole_run"]["samples"] == 4
    assert fig["batches"]["burst"]["max_records"] == 4000
    assert fig["backlog"] == {"max_waiting": 6000, "drained_s": 13.0}
    assert fig["phases"]["burst"]["achieved_rate"] == 1000.0


def test_the_report_gives_every_figure():
    phases, probes, batches, timeline = _run()
    fig = figures(phases, probes, ended=1075.0, batches=batches, limits=[],
                  timeline=timeline, factor=1.5, window=5.0)
    text = table(fig)
    rows = text.splitlines()[2:]
    assert [r.split(" | ")[0] for r in rows] == ["| steady", "| burst", "| after"]
    assert "| 1,000 | 800 | 350 |" in rows[0]  # steady memory peaks
    assert "| 1,500 | 1,200 | 600 |" in rows[1]
    assert "≥ 10,000" in rows[2]  # a probe never seen: a lower bound
    words = " ".join(reading(fig, {"max.records.per.batch": 1_000_000,
                                   "worker.memory.budget.bytes": 512 * 2**20}))
    assert "for good 12.0 s after the burst ended" in words
    assert "the backlog was gone 13.0 s after it" in words
    assert ("processed 400 records/s meanwhile: the backlog grew through the burst, up to "
            "6,000 records sent and not yet processed at a batch's end (6.0 s of burst input; "
            "at most 60 in the steady period)") in words


def test_per_second_series_has_a_row_a_second():
    phases, probes, batches, timeline = _run()
    rows = per_second(1000.0, phases, list(probes.values()), batches, timeline, 1070.0)
    assert len(rows) == 70
    assert rows[15]["phase"] == "steady" and rows[15]["probes_sent"] == 2
    assert rows[35]["phase"] == "burst" and rows[35]["batch_records"] == 4000
    assert rows[35]["rss_mb"] == 1500.0
    assert rows[69]["probes_missing"] == 1


def test_latency_stats_count_unseen_probes_with_their_bound():
    st = latency_stats([0.1, None, 0.2], bound=[5.0])
    assert st == {"probes": 3, "missing": 1, "lower_bound": True, "p50_ms": 200.0,
                  "p99_ms": 5000.0, "max_ms": 5000.0}


def test_memory_peaks_of_an_empty_span():
    assert memory_peaks([TreeSample(1.0, 1, 1, 1)], 5.0, math.inf) == {"samples": 0}


def test_an_application_that_stopped_is_said_first():
    phases, probes, batches, timeline = _run()
    fig = figures(phases, probes, ended=1075.0, batches=batches, limits=[],
                  timeline=timeline, factor=1.5, window=5.0)
    fig["app_stopped"] = {"exit_code": 1, "error": "KafkaSourceError: no answer"}
    words = reading(fig, {"max.records.per.batch": 1_000_000,
                          "worker.memory.budget.bytes": 512 * 2**20})
    assert words[0].startswith("The application stopped before the run ended")


def test_the_examples_in_the_burst_modules_docstrings_hold():
    import doctest

    import bench.burst
    import bench.burst_report
    import bench.harness

    for module in (bench.burst, bench.burst_report, bench.harness):
        failed, tried = doctest.testmod(module)
        assert tried > 0 and failed == 0, module.__name__
