"""One writer per application: a lease on the application's durable storage, with an epoch.

Two runs of one application (the same ``application.id`` and ``state.location``) must never
write at once: both would commit task state and produce output for the same batches. A run
holds the lease while it runs; a second run is refused at start, naming the holder (host, pid,
since when), unless the holder is gone or it is told to take over.

The lease is a directory of small objects under the location, ``<epoch>-<token>.<kind>``:

* ``.claim``: who claimed the lease at that epoch (host, pid, the process's start time, since);
* ``.beat``: the holder's last heartbeat (wall-clock ms), rewritten every third of
  ``lease.timeout.ms``;
* ``.released``: the holder stopped and writes no more.

Every object has a name of its own and is written by one process only, so the protocol needs
nothing but atomic writes and a consistent listing (local directories, shared mounts, S3 and
the other object stores give both): a run claims epoch ``e + 1`` by writing its claim, then
lists again and holds the lease if no other claim of that epoch or later is there (two runs
claiming at the same instant both see the other's claim, or the later one sees the earlier's:
at most one goes on). A claim of a later epoch fences the holder.

A holder is *gone* when it released the lease, when its heartbeat is older than
``lease.timeout.ms``, or at once when it ran on this host and its process no longer exists (a
``kill -9``: a restart on the same machine need not wait for the lease to expire). Taking over
from a live holder (``take_over=True``, ``streamtable run --take-over``) claims the next epoch,
then waits until the old holder has stopped and released, or its heartbeat has expired, before
the new run writes anything. The old holder checks the lease at every commit (each micro-batch,
before it writes results) and on every heartbeat: once superseded it fails with
:class:`~streamtable.errors.LeaseLostError`, stops its query and releases.

>>> import tempfile
>>> from streamtable.storage import storage_at
>>> first = Lease(storage_at(tempfile.mkdtemp()), "word-count")
>>> first.acquire().epoch
1
>>> second = Lease(first.storage, "word-count")
>>> second.acquire()                                  # doctest: +ELLIPSIS
Traceback (most recent call last):
streamtable.errors.LeaseHeldError: word-count is already running (host ..., pid ..., since ...), ...
>>> first.release(); second.acquire().epoch
2
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from streamtable.errors import LeaseHeldError, LeaseLostError
from streamtable.storage.base import DurableStorage

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS = 30_000
# claims kept behind the holder's (older epochs are deleted when a new one is won)
_KEEP_EPOCHS = 2


def _process_start(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot, Linux), which tells a pid
    reused by another process apart; None when unknown or the process does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # fields after the command name (in parentheses, which may hold spaces): starttime is 22nd
    fields = stat[stat.rfind(b")") + 2:].split()
    return int(fields[19]) if len(fields) > 19 else None


def _alive(pid: int, started: int | None) -> bool:
    """Whether process ``pid`` of this host still runs (and is the one that started at
    ``started``, when known)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    if started is None:
        return True
    now = _process_start(pid)
    return now is None or now == started


@dataclass(frozen=True)
class Holder:
    """One claim of the lease."""

    epoch: int
    token: str
    host: str
    pid: int
    since: int  # wall-clock ms of the claim
    started: int | None = None  # the process's start time, see _process_start

    @property
    def name(self) -> str:
        return f"{self.epoch:012d}-{self.token}"

    def describe(self) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.since / 1000))
        return f"host {self.host}, pid {self.pid}, since {since}"


class Lease:
    """The lease of ``application_id`` on ``storage`` (the application's directory of its
    durable storage, ``<state.location>/<application.id>/lease``).

    ``timeout_ms``: how long a holder's heartbeat counts; ``clock``: wall-clock ms (tests may
    pass their own).
    """

    def __init__(self, storage: DurableStorage, application_id: str, *,
                 directory: str = "lease", timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 clock: Callable[[], int] | None = None) -> None:
        self.storage = storage
        self.application_id = application_id
        self.directory = directory
        self.timeout_ms = timeout_ms
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.held: Holder | None = None
        self.lost: LeaseLostError | None = None  # set once another run took the lease
        self._beats: threading.Thread | None = None
        self._stop_beats = threading.Event()

    # -- reading -----------------------------------------------------------------------------
    def _names(self) -> list[str]:
        return self.storage.list(self.directory)

    def _path(self, name: str) -> str:
        return f"{self.directory}/{name}"

    def _rivals(self, mine: str, names: list[str]) -> list[str]:
        """The claims among ``names`` (as ``<epoch>-<token>``) that fence the claim ``mine``:
        any other at its epoch or later that was not given up. Names only, no reads: this is
        the check of every commit."""
        epoch = mine.partition("-")[0]
        claims = [n[:-len(".claim")] for n in names if n.endswith(".claim")]
        return sorted(c for c in claims if c != mine and c.partition("-")[0] >= epoch
                      and f"{c}.released" not in names)

    def _describe(self, name: str) -> str:
        try:
            return Holder(**json.loads(self.storage.read(self._path(f"{name}.claim")))).describe()
        except FileNotFoundError:
            return f"lease claim {name}"

    def claims(self, names: list[str] | None = None) -> list[Holder]:
        """Every claim still stored, in (epoch, token) order."""
        holders = []
        for name in names if names is not None else self._names():
            if name.endswith(".claim"):
                try:
                    holders.append(Holder(**json.loads(self.storage.read(self._path(name)))))
                except FileNotFoundError:
                    continue  # deleted since the listing: an old epoch
        return sorted(holders, key=lambda h: (h.epoch, h.token))

    def gone(self, holder: Holder, names: list[str] | None = None) -> str | None:
        """Why ``holder`` no longer writes (released, heartbeat expired, process gone), or
        None while it may still."""
        names = names if names is not None else self._names()
        if f"{holder.name}.released" in names:
            return "it stopped"
        if holder.host == socket.gethostname() and not _alive(holder.pid, holder.started):
            return "its process no longer exists"
        beat = self._last_beat(holder)
        if self.clock() - beat > self.timeout_ms:
            return f"its last heartbeat is {(self.clock() - beat) / 1000:.0f} s old"
        return None

    def _last_beat(self, holder: Holder) -> int:
        try:
            return int(self.storage.read(self._path(f"{holder.name}.beat")))
        except FileNotFoundError:
            return holder.since

    # -- holding -----------------------------------------------------------------------------
    def acquire(self, *, take_over: bool = False) -> Holder:
        """Claim the lease: refused (:class:`LeaseHeldError`) while another run holds it,
        unless ``take_over``, which waits until that run has stopped or its lease expired."""
        names = self._names()
        claims = self.claims(names)
        live = [c for c in claims if self.gone(c, names) is None]
        if live and not take_over:
            raise LeaseHeldError(self.application_id, live[-1].describe(), self.timeout_ms)
        me = Holder(epoch=(claims[-1].epoch if claims else 0) + 1, token=secrets.token_hex(8),
                    host=socket.gethostname(), pid=os.getpid(), since=self.clock(),
                    started=_process_start(os.getpid()))
        self.storage.write(self._path(f"{me.name}.claim"), json.dumps(asdict(me)).encode())
        self.storage.write(self._path(f"{me.name}.beat"), str(self.clock()).encode())
        rivals = self._rivals(me.name, self._names())
        if rivals:
            # another run claimed at the same instant: neither may be sure to be alone, so
            # this one gives up (the other gives up too when it saw this claim)
            self.storage.write(self._path(f"{me.name}.released"), b"")
            raise LeaseHeldError(self.application_id, self._describe(rivals[-1]),
                                 self.timeout_ms)
        self.held = me
        self.lost = None
        for old in live:
            self._wait_for(old)
        self._forget_older(me)
        log.info("%s holds its lease at epoch %d", self.application_id, me.epoch)
        return me

    def _wait_for(self, old: Holder) -> None:
        """Wait until ``old`` has stopped (it notices the new claim at its next commit or
        heartbeat) or its lease has expired, heartbeating meanwhile."""
        log.warning("%s: taking over from the run at epoch %d (%s): waiting until it stops or "
                    "its lease expires (lease.timeout.ms=%d)", self.application_id, old.epoch,
                    old.describe(), self.timeout_ms)
        while (why := self.gone(old)) is None:
            time.sleep(min(0.2, self.timeout_ms / 3000))
            self._beat()
        log.warning("%s: took over from the run at epoch %d: %s", self.application_id,
                    old.epoch, why)

    def _forget_older(self, me: Holder) -> None:
        for name in self._names():
            epoch = name.partition("-")[0]
            if epoch.isdigit() and int(epoch) < me.epoch - _KEEP_EPOCHS:
                self.storage.delete(self._path(name))

    def check(self) -> None:
        """Raise :class:`LeaseLostError` when another run has claimed the lease since this
        one did (the fence each commit passes)."""
        if self.lost is not None:
            raise self.lost
        held = self.held
        if held is None:
            return
        names = self._names()
        rivals = self._rivals(held.name, names)
        if rivals or f"{held.name}.claim" not in names:
            self.lost = LeaseLostError(self.application_id, held.epoch,
                                       self._describe(rivals[-1]) if rivals else None)
            raise self.lost

    def _beat(self) -> None:
        if self.held is not None:
            self.storage.write(self._path(f"{self.held.name}.beat"), str(self.clock()).encode())

    def keep(self, on_lost: Callable[[LeaseLostError], None]) -> None:
        """Heartbeat in the background every third of the timeout, checking the lease each
        time; ``on_lost`` is called (once, on that thread) when another run has taken it."""
        interval = self.timeout_ms / 3000
        self._stop_beats.clear()

        def run() -> None:
            while not self._stop_beats.wait(interval):
                try:
                    self.check()
                    self._beat()
                except LeaseLostError as e:
                    log.error("%s", e)
                    on_lost(e)
                    return
                except Exception as e:  # storage unreachable for a moment: the next beat retries
                    log.warning("%s: heartbeat of its lease failed: %s", self.application_id, e)

        self._beats = threading.Thread(target=run, daemon=True,
                                       name=f"streamtable-lease-{self.application_id}")
        self._beats.start()

    def release(self) -> None:
        """Stop heartbeating and say this run writes no more (a run taking over goes on at
        once; a new run starts without waiting)."""
        self._stop_beats.set()
        beats = self._beats
        if beats is not None and beats is not threading.current_thread():
            beats.join(10)
        self._beats = None
        held, self.held = self.held, None
        if held is not None:
            self.storage.write(self._path(f"{held.name}.released"), b"")
