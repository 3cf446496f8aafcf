"""Two ``streamtable run`` of one application on one state directory never both write: the
second is refused naming the first; after a ``kill -9`` of the first a restart goes on at once;
with ``--take-over`` the running one is fenced and stops, and the output topic holds every count
once (slow: four runs of Spark one after the other)."""

from __future__ import annotations

import signal

import pytest
from tests.runtime.spark.kafka_util import new_topics, produce
from tests.runtime.spark.test_kafka_end_to_end import expected_counts
from tests.runtime.spark.word_count_cli import (
    CliRun,
    assert_exact_output,
    served_counts,
    write_app,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _lines(n: int, salt: str) -> list[str]:
    words = "kafka streams spark table stream join window state store topic".split()
    return [" ".join(words[(i * 3 + j) % len(words)] for j in range(1 + i % 4)) + f" {salt}"
            for i in range(n)]


def test_one_writer_refused_restarted_after_kill_and_taken_over(tmp_path, bootstrap):
    src, out = new_topics(bootstrap, 2, "writer-lines", "writer-counts")
    state = tmp_path / "state"
    app = write_app(tmp_path, src, out)
    batches = [_lines(1500, "first"), _lines(600, "second"), _lines(3000, "third")]
    produce(bootstrap, src, [(None, line.encode()) for line in batches[0]])
    first = CliRun(app, bootstrap, state)
    runs = [first]
    try:
        first.wait_for(lambda: first.batches_done() >= 2, 300, "the first batches")

        # a second run on the same state: refused, naming the first, before it writes anything
        second = CliRun(app, bootstrap, state)
        runs.append(second)
        assert second.proc.wait(120) == 1, second.text[-3000:]
        second._reader.join(10)
        assert "already running" in second.text, second.text[-3000:]
        assert f"pid {first.proc.pid}" in second.text, second.text[-3000:]
        assert first.proc.poll() is None, first.text[-3000:]

        # the first killed mid-run: a restart on this host does not wait for its lease
        first.stop(signal.SIGKILL)
        produce(bootstrap, src, [(None, line.encode()) for line in batches[1]])
        third = CliRun(app, bootstrap, state)
        runs.append(third)
        expected = dict(expected_counts(batches[0] + batches[1]))
        third.wait_for(lambda: served_counts(state).get("second") == expected["second"], 300,
                       "the restart after kill -9")

        # a new deployment takes over while the third run works through a backlog
        produce(bootstrap, src, [(None, line.encode()) for line in batches[2]])
        done = third.batches_done()
        third.wait_for(lambda: third.batches_done() >= done + 2, 300, "the backlog's batches")
        fourth = CliRun(app, bootstrap, state, "--take-over")
        runs.append(fourth)
        assert third.proc.wait(120) == 1, third.text[-3000:]
        third._reader.join(10)
        assert "taken over by another run" in third.text, third.text[-3000:]
        assert f"pid {fourth.proc.pid}" in third.text, third.text[-3000:]
        expected = dict(expected_counts(batches[0] + batches[1] + batches[2]))
        fourth.wait_for(lambda: served_counts(state).get("third") == expected["third"], 300,
                        "the run that took over")
        assert "taking over from the run" in fourth.text, fourth.text[-3000:]
    finally:
        for run in runs:
            if run.proc.poll() is None:
                run.stop()
    assert served_counts(state) == expected
    # nothing lost, no count produced twice (the fenced run wrote none after the take-over)
    assert_exact_output(bootstrap, out, expected)
