"""The application lease: one writer at a time, a refused second run naming the first, a killed
holder not blocking a restart, and a take-over that fences the old holder."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from streamtable.errors import LeaseHeldError, LeaseLostError
from streamtable.storage import storage_at
from streamtable.storage.lease import Lease

ROOT = Path(__file__).resolve().parents[2]


def _lease(location: Path, **kw: object) -> Lease:
    return Lease(storage_at(str(location)), "word-count", **kw)  # type: ignore[arg-type]


def test_a_second_run_is_refused_naming_the_first(tmp_path):
    first = _lease(tmp_path)
    held = first.acquire()
    with pytest.raises(LeaseHeldError) as e:
        _lease(tmp_path).acquire()
    message = str(e.value)
    assert f"host {socket.gethostname()}" in message and f"pid {os.getpid()}" in message
    since = time.strftime("%Y-%m-%d %H:%M", time.gmtime(held.since / 1000))
    assert f"since {since}" in message and "--take-over" in message
    first.check()  # the refused run changed nothing


def test_a_released_lease_is_taken_at_the_next_epoch(tmp_path):
    first = _lease(tmp_path)
    assert first.acquire().epoch == 1
    first.release()
    second = _lease(tmp_path)
    assert second.acquire().epoch == 2
    second.check()


def test_an_expired_heartbeat_frees_the_lease(tmp_path):
    now = [1_000_000]
    first = _lease(tmp_path, timeout_ms=5000, clock=lambda: now[0])
    first.acquire()
    now[0] += 4000
    first._beat()  # still beating: held
    now[0] += 4000
    with pytest.raises(LeaseHeldError):
        _lease(tmp_path, timeout_ms=5000, clock=lambda: now[0]).acquire()
    now[0] += 1001  # 5.001 s since the last beat
    second = _lease(tmp_path, timeout_ms=5000, clock=lambda: now[0])
    assert second.acquire().epoch == 2
    with pytest.raises(LeaseLostError, match="lease epoch 1"):
        first.check()


def test_a_holder_killed_on_this_host_does_not_block_a_restart(tmp_path):
    code = (f"import sys, time; sys.path.insert(0, {str(ROOT / 'src')!r})\n"
            "from streamtable.storage import storage_at\n"
            "from streamtable.storage.lease import Lease\n"
            f"Lease(storage_at({str(tmp_path)!r}), 'word-count').acquire()\n"
            "print('held', flush=True); time.sleep(600)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"held\n"
        with pytest.raises(LeaseHeldError, match=f"pid {child.pid}"):
            _lease(tmp_path).acquire()
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        child.kill()
    # the default timeout is 30 s: the restart goes on at once because the process is gone
    started = time.monotonic()
    assert _lease(tmp_path).acquire().epoch == 2
    assert time.monotonic() - started < 5


def test_taking_over_fences_the_holder_and_waits_until_it_stopped(tmp_path):
    old = _lease(tmp_path, timeout_ms=3000)
    old.acquire()
    lost: list[LeaseLostError] = []
    stopped = threading.Event()

    def on_lost(e: LeaseLostError) -> None:
        lost.append(e)
        time.sleep(0.5)  # the old run stops its query...
        stopped.set()
        old.release()  # ...then says so

    old.keep(on_lost)
    new = _lease(tmp_path, timeout_ms=3000)
    held = new.acquire(take_over=True)
    assert stopped.is_set(), "the new holder went on before the old one had stopped"
    assert held.epoch == 2 and len(lost) == 1
    assert f"pid {os.getpid()}" in str(lost[0]) and "fenced" in str(lost[0])
    with pytest.raises(LeaseLostError):
        old.check()
    new.check()
    new.release()


def test_taking_over_from_a_frozen_holder_waits_for_its_lease_to_expire(tmp_path):
    old = _lease(tmp_path, timeout_ms=2000)
    old.acquire()  # no heartbeat thread: a holder that stopped answering
    started = time.monotonic()
    _lease(tmp_path, timeout_ms=2000).acquire(take_over=True)
    assert 1.5 < time.monotonic() - started < 10
    with pytest.raises(LeaseLostError):
        old.check()


def test_of_two_runs_claiming_at_once_at_most_one_goes_on(tmp_path):
    """Both claim epoch 1, each having listed before the other wrote its claim."""
    a, b = _lease(tmp_path), _lease(tmp_path)
    listed = a.storage.list
    calls: list[str] = []

    def list_then_let_b_claim(directory: str) -> list[str]:
        names = listed(directory)
        if not calls:  # a's first listing (before its claim): b claims now, and wins
            calls.append("b")
            b.acquire()
        return names

    a.storage.list = list_then_let_b_claim  # type: ignore[method-assign]
    with pytest.raises(LeaseHeldError, match=f"pid {os.getpid()}"):
        a.acquire()
    assert a.held is None and b.held is not None
    assert [c.epoch for c in a.claims()] == [1, 1]
    b.check()  # a's claim, given up, does not fence b


def test_of_two_runs_claiming_at_the_same_instant_the_first_to_look_again_gives_up(tmp_path):
    """Both wrote their claims of epoch 1 before either listed again: b, looking first, sees
    a's claim and gives up; a then sees only b's given-up claim and goes on."""
    a, b = _lease(tmp_path), _lease(tmp_path)
    write, b_listed = a.storage.write, b.storage.list
    b_lists: list[int] = []

    def b_list(directory: str) -> list[str]:  # b's first listing predates a's claim
        b_lists.append(1)
        return [] if len(b_lists) == 1 else b_listed(directory)

    def write_then_let_b_claim(name: str, data: object) -> None:
        write(name, data)  # type: ignore[arg-type]
        if name.endswith(".beat") and not b_lists:
            with pytest.raises(LeaseHeldError, match=f"pid {os.getpid()}"):
                b.acquire()

    a.storage.write = write_then_let_b_claim  # type: ignore[method-assign]
    b.storage.list = b_list  # type: ignore[method-assign]
    assert a.acquire().epoch == 1
    assert b.held is None and [c.epoch for c in a.claims()] == [1, 1]
    a.check()
