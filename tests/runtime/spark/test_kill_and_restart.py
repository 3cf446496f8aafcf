"""kill -9 the running application at random points, restart it, and still get exactly the
reference result: no record lost, no duplicate in the table's output."""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from tests.runtime.spark.kafka_util import new_topics, produce
from tests.runtime.spark.test_kafka_end_to_end import expected_counts, output_counts
from tests.runtime.spark.word_count_cli import APP_ID, CliRun, run_cli, served_counts, write_app

pytestmark = pytest.mark.spark

WORDS = "kafka streams spark table stream join window state store topic partition".split()


def _last_batch(log_dir: Path) -> int:
    return max((int(p.name) for p in log_dir.glob("[0-9]*")), default=-1)


def kill_rounds(bootstrap: str, tmp_path: Path, rounds: int, seed: int = 7) -> dict[str, Any]:
    """Run word count through ``rounds`` of (produce, start, kill -9 at a random moment),
    restart it to catch up, compare the store and the output with the input, and return the
    counts: kills, batches replayed (planned by a killed run, not committed), input lines,
    output records checked, and divergences: words counted wrong in the store or the output,
    or whose output repeats or goes back."""
    rng = random.Random(seed)
    src, out = new_topics(bootstrap, 2, "kill-lines", "kill-counts")
    app = write_app(tmp_path, src, out)
    state = tmp_path / "state"
    checkpoint = state / APP_ID / "checkpoint" / "query"
    lines: list[str] = []
    batches_before_kill = []
    replayed = 0
    for _round in range(rounds):
        chunk = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))
                 for _ in range(1500)]
        lines.extend(chunk)
        produce(bootstrap, src, [(None, line.encode()) for line in chunk])
        run = CliRun(app, bootstrap, state)
        # kill after a random number of finished batches, at a random moment of the next one
        target = rng.randint(1, 3)
        run.wait_for(lambda t=target, r=run: r.batches_done() >= t, 300, "the first batches")
        time.sleep(rng.uniform(0, 2.5))
        run.stop(signal.SIGKILL)
        batches_before_kill.append(run.batches_done())
        if _last_batch(checkpoint / "offsets") > _last_batch(checkpoint / "commits"):
            replayed += 1
        if rounds > 2:
            print(f"kill {_round + 1}/{rounds}: {replayed} batches left to replay so far",
                  flush=True)
    final = run_cli(app, bootstrap, state, "--until-caught-up")
    _, err = final.communicate(timeout=300)
    assert final.returncode == 0, err.decode()[-3000:]
    # the kills landed while batches were being processed, not only before the first one
    assert sum(batches_before_kill) > 0, batches_before_kill
    expected = dict(expected_counts(lines))
    store = served_counts(state)
    per_word = output_counts(bootstrap, out)
    final_output = {w: seq[-1] for w, seq in per_word.items()}
    # a word counted wrong in the store, or last written wrong, or written twice / going back
    wrong = sorted({w for w in expected.keys() | store.keys() if store.get(w) != expected.get(w)}
                   | {w for w in expected.keys() | final_output.keys()
                      if final_output.get(w) != expected.get(w)}
                   | {w for w, seq in per_word.items() if seq != sorted(set(seq))})
    return {"kills": rounds, "batches replayed": replayed, "input lines": len(lines),
            "output records checked": sum(len(seq) for seq in per_word.values()),
            "divergences": len(wrong),
            "diverging words": wrong[:5]}


def test_kill_9_at_random_points_then_restart_gives_exact_result(bootstrap, tmp_path):
    counts = kill_rounds(bootstrap, tmp_path, rounds=2)
    print(counts)
    assert counts["divergences"] == 0, counts
