"""A contender still running at the runner's timeout is stopped and shown with the rate it had
reached, from its last progress event."""

from __future__ import annotations

import json
import types

from bench.contenders.common import Status
from bench.nexmark import runner
from bench.nexmark.contenders import bare_loop
from bench.nexmark.events import BID_TOPIC


def test_progress_events_are_at_most_one_a_second_unless_asked(tmp_path) -> None:
    status = Status(str(tmp_path / "status.jsonl"))
    status.progress(1, 10)
    status.progress(2, 10)
    status.progress(3, 10, every=0)
    events = [json.loads(line) for line in (tmp_path / "status.jsonl").read_text().splitlines()]
    assert [(e["event"], e["done"], e["total"]) for e in events] == [
        ("progress", 1, 10), ("progress", 3, 10)]


def test_the_partial_rate_is_the_share_of_the_input_read_by_the_last_progress() -> None:
    seconds, rate, reason = runner.partial_rate({"t": 130.0, "done": 300, "total": 1_200}, 100.0,
                                                1_000_000, 600)
    assert (seconds, rate) == (30.0, round(1_000_000 * 0.25 / 30, 1))
    assert "300 of 1,200 input records read in 30 s" in reason
    assert runner.partial_rate({"t": 90.0, "done": 1, "total": 2}, 100.0, 10, 600)[:2] == (
        None, None)  # a progress event from before the start is none of this run's


def test_a_contender_stopped_at_its_timeout_shows_the_rate_it_had_reached(
        nexmark_input, tmp_path, monkeypatch) -> None:
    bootstrap, bids = nexmark_input["bootstrap"], nexmark_input["counts"]["bid"]
    args = types.SimpleNamespace(events=nexmark_input["events"], timeout=6.0, rate=10_000, seed=42,
                                 grace_ms=60_000, config=[], keep_state=False)  # q1 needs no rate
    run_dir = tmp_path / "nexmark-run"
    run_dir.mkdir()
    monkeypatch.setattr(runner, "ROOT", tmp_path)
    # the bare loop waits for twice the bids the topic holds: it never catches up
    row = runner.run_one("q1", bare_loop.CONTENDER, args, bootstrap, run_dir,
                         expected=lambda: [], input_counts={BID_TOPIC: 2 * bids})
    assert row.status == "TIMEOUT", row.reason
    assert f"{bids:,} of {2 * bids:,} input records read" in row.reason
    assert row.seconds is not None and 0 < row.seconds < args.timeout
    assert row.rate == round(args.events * 0.5 / row.seconds, 1)


def test_a_spark_contender_counts_the_input_records_its_batches_read() -> None:
    from bench.nexmark.contenders.spark_progress import InputProgress, records_read

    class Source:
        def __init__(self, start: str | None, end: str) -> None:
            self.startOffset, self.endOffset = start, end

    first = Source("null", '{"bids": {"0": 4, "1": 3}, "@clock": {"0": 1}}')  # JSON's null
    assert records_read([first], {"bids": 10, "auctions": 5}) == {"bids": 7}
    second = Source('{"bids": {"0": 4, "1": 3}}', '{"bids": {"0": 6, "1": 3}}')
    assert records_read([second], {"bids": 10}) == {"bids": 2}

    class Reported(Status):
        def __init__(self) -> None:
            self.seen: list[tuple[int, int]] = []

        def progress(self, done: int, total: int, every: float = 1.0) -> None:
            self.seen.append((done, total))

    status = Reported()
    listener = InputProgress(status, {"bids": 10, "auctions": 5})
    for source in (first, second):
        listener.onQueryProgress(types.SimpleNamespace(
            progress=types.SimpleNamespace(sources=[source])))
    assert status.seen == [(7, 10), (9, 10)]
