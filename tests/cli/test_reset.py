"""``streamtable reset`` holds the application's lease while it resets: a reset while a run of
the application writes would take the state from under it (or the run would write it back), so
it is refused naming the run, and nothing is reset."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtable.cli import main
from streamtable.config import StreamsConfig
from streamtable.runtime.spark.app import application_location
from streamtable.storage import storage_at
from streamtable.storage.lease import Lease

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "examples" / "word_count" / "app.py")
APP_ID = "reset-me"


def _running(state: Path) -> Lease:
    """A run of the application holding its lease (this process: alive)."""
    config = StreamsConfig({"application.id": APP_ID, "state.dir": str(state)})
    lease = Lease(storage_at(application_location(config)), APP_ID)
    lease.acquire()
    return lease


def _state(state: Path) -> Path:
    kept = state / APP_ID / "run-1" / "task-state"
    kept.mkdir(parents=True)
    (kept / "0-abc.snap").write_bytes(b"state")
    return kept


def test_a_reset_is_refused_while_the_application_runs_and_resets_once_it_stopped(
        tmp_path: Path) -> None:
    kept = _state(tmp_path)
    run = _running(tmp_path)
    args = ["reset", APP, "--state-dir", str(tmp_path), "--application-id", APP_ID]
    with pytest.raises(SystemExit) as refused:
        main(args)
    message = str(refused.value)
    assert message.startswith(f"streamtable: {APP_ID} is running (host ")
    assert "stop it before resetting its state; nothing was reset" in message
    assert kept.exists()

    run.release()
    assert main(args) == 0
    assert not (tmp_path / APP_ID).exists()  # the state and the lease with it


def test_a_reset_of_one_store_is_refused_while_the_application_runs(tmp_path: Path) -> None:
    kept = _state(tmp_path)
    run = _running(tmp_path)
    with pytest.raises(SystemExit, match=f"{APP_ID} is running .* nothing was reset"):
        main(["reset", APP, "--store", "counts", "--state-dir", str(tmp_path),
              "--application-id", APP_ID])
    assert kept.exists()
    run.release()
    # once it stopped, the reset goes on to the state (this one never ran a topology)
    with pytest.raises(SystemExit, match="has no state to reset stores of"):
        main(["reset", APP, "--store", "counts", "--state-dir", str(tmp_path),
              "--application-id", APP_ID])
    # the reset released the lease it held: a run starts at once
    held = _running(tmp_path).held
    assert held is not None and held.epoch == 3
