"""The memory budget of a micro-batch: batches sized so that a Python worker's memory fits.

``max.records.per.batch`` bounds a batch by records, which says nothing of memory: records of
1 KB and of 100 KB, or a stage that holds its input against one that streams it, differ a
hundredfold. ``worker.memory.budget.bytes`` bounds what one Python worker may add to its memory
while it runs a task of a batch. Each task measures it (the growth of its process's peak
resident memory over the memory it started with, from ``/proc/self``: the high-water mark is
reset when the task starts) and reports it with the records it processed (a worker's first
task apart: :func:`largest_growth`); after the batch the driver sizes the next one
(:class:`BatchSizer`): the budget over the largest growth per record
of the last :data:`WINDOW` batches measured, between :data:`MIN_BATCH_RECORDS` and
``max.records.per.batch``, growing at most :data:`GROWTH` times a batch while the growth is a
sizeable part of the budget. The first batch after a start is not measured yet: for a
topology with state it is sized for :data:`UNMEASURED_BYTES_PER_RECORD` a record
(:func:`first_batch_records`; 131,072 records at the default 256 MiB), and batches then grow at
most fourfold each until measured (or the last limit written bounds them, on a restart). A
stateless topology's tasks stream their records, so its first batch takes
``max.records.per.batch`` (Nexmark q0 peaked at 1.27 GB in one batch of 1,000,000 records, and
at 1.35 GB in ten). The source reads that limit from a file before it plans the next batch
(its planner runs in a process of its own).

Where ``/proc`` does not tell (not Linux), tasks report nothing and batches keep
``max.records.per.batch``.

``worker.memory.recycle.bytes`` bounds what a worker keeps between tasks: memory a task freed
is not all given back to the system (Python's and the C libraries' allocators keep it for later
allocations), so a worker reused for tens of batches held 3-6 times what a new one holds at a
task's start (Nexmark q18 at 10,000,000 events: 0.45-0.67 GB, against 0.11-0.14 GB in a new
worker). A task leaves :func:`recycle_above` its limit; after its results are sent, a worker
above it ends (see :func:`should_recycle` and the daemon), and Spark forks a new one from its
daemon for the next task.

>>> BatchSizer(budget=300 * 2**20, cap=1_000_000).next(1_000_000, 900 * 2**20)
333333
>>> BatchSizer(budget=300 * 2**20, cap=1_000_000).next(10_000, 1 * 2**20)
1000000
>>> BatchSizer(budget=300 * 2**20, cap=1_000_000).next(10_000, 60 * 2**20)
40000
>>> BatchSizer(budget=300 * 2**20, cap=1_000_000).next(2000, 900 * 2**20)
1000
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)

#: the count key a task reports its memory growth under (bytes; see :func:`largest_growth`)
GROWTH_KEY = "worker.memory.growth"
#: the count key of a task that was its worker's first (its one-time allocations included)
FIRST_GROWTH_KEY = "worker.memory.first-growth"
#: the smallest batch the budget shrinks to: below it the fixed cost of a batch dominates
MIN_BATCH_RECORDS = 1000
#: how much larger than the last batch the next may be
GROWTH = 4
#: how many measured batches the next batch's size looks back on (see :class:`BatchSizer`)
WINDOW = 8
#: the growth per record a first batch is sized for, before any batch was measured: about the
#: most measured (Nexmark q16's first batch of 1,000,000 records grew a worker by 1.7 GB; its
#: first of 262,144 by 643 MB, the worker's one-time growth included: 1.26x a 512 MiB budget)
UNMEASURED_BYTES_PER_RECORD = 2048

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int | None:
    """This process's resident memory now, or None where ``/proc`` does not tell."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def reset_peak() -> bool:
    """Reset this process's peak resident memory to its memory now (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_bytes() -> int | None:
    """This process's peak resident memory since the last :func:`reset_peak`."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


_recycle_above: int | None = None
_keeps_state: Callable[[], bool] | None = None


def recycle_above(limit: int, keeps_state: Callable[[], bool] | None = None) -> None:
    """End this worker after the task that runs now if its resident memory is then above
    ``limit`` bytes (0: never) and ``keeps_state()`` (the task's persistence's) says no: see
    :func:`should_recycle`."""
    global _recycle_above, _keeps_state
    _recycle_above = limit or None
    _keeps_state = keeps_state


def should_recycle() -> bool:
    """Whether this worker should end now that its task is done: its resident memory is above
    the limit the task left, and it keeps no working copy of the task's state in memory
    (in-memory stores: the next worker would rebuild them from the durable state).

    >>> recycle_above(1); should_recycle() == (resident_bytes() is not None)
    True
    >>> recycle_above(1, keeps_state=lambda: True); should_recycle()
    False
    >>> recycle_above(0); should_recycle()
    False
    """
    limit = _recycle_above
    if limit is None or (_keeps_state is not None and _keeps_state()):
        return False
    resident = resident_bytes()
    return resident is not None and resident > limit


def first_batch_records(budget: int) -> int | None:
    """The records of the first batch after a start under a worker's memory ``budget`` (bytes;
    0: none, and so no bound but ``max.records.per.batch``).

    >>> first_batch_records(512 * 2**20)
    262144
    >>> first_batch_records(1), first_batch_records(0)
    (1000, None)
    """
    if budget <= 0:
        return None
    return max(MIN_BATCH_RECORDS, budget // UNMEASURED_BYTES_PER_RECORD)


_tasks_measured = 0


class TaskMemory:
    """Measures one task's memory growth: made when the task starts, :meth:`growth` at its
    end (None where it cannot be measured). ``first``: the task is the first its worker runs,
    and its growth holds the worker's one-time allocations (RocksDB's block cache, Kafka
    clients, the allocators' arenas, imports) beside what its records took."""

    __slots__ = ("_start", "first")

    def __init__(self) -> None:
        global _tasks_measured
        _tasks_measured += 1
        self.first = _tasks_measured == 1
        self._start = resident_bytes() if reset_peak() else None

    @property
    def key(self) -> str:
        """The count key this task's growth is reported under."""
        return FIRST_GROWTH_KEY if self.first else GROWTH_KEY

    def growth(self) -> int | None:
        peak = peak_bytes()
        if self._start is None or peak is None:
            return None
        return max(0, peak - self._start)


def is_growth_key(key: str) -> bool:
    """Whether ``key`` is a count a task reported its memory growth under."""
    return key.startswith((GROWTH_KEY + ":", FIRST_GROWTH_KEY + ":"))


def largest_growth(counts: Mapping[str, int]) -> int | None:
    """The largest growth the tasks of a batch reported (``<key>:<subtopology>-<task>``),
    each sub-topology's from the tasks that ran in reused workers where it had any: a new
    worker's first task grows it by its one-time allocations too, and it starts with a third
    of what a reused worker may hold (``worker.memory.recycle.bytes``), so its peak is no
    higher. Sized from every task, Nexmark q18 at 10,000,000 events (workers replaced above
    384 MiB) ran 47 batches at 24,782 events/s; sized so, 40 batches at 28,532, its peak RSS
    the same (2.11 GB). Where all of a sub-topology's tasks ran in new workers, their growth
    counts.

    >>> largest_growth({"worker.memory.growth:0-0": 5, "worker.memory.first-growth:0-1": 9,
    ...                 "worker.memory.first-growth:1-0": 7, "records_in:bids": 100})
    7
    >>> largest_growth({"records_in:bids": 100}) is None
    True
    """
    reused: dict[str, int] = {}
    first: dict[str, int] = {}
    for key, value in counts.items():
        kind, _, task = key.partition(":")
        into = reused if kind == GROWTH_KEY else first if kind == FIRST_GROWTH_KEY else None
        if into is not None:
            subtopology = task.rpartition("-")[0]
            into[subtopology] = max(value, into.get(subtopology, 0))
    found = [reused.get(sub, first.get(sub, 0)) for sub in reused.keys() | first.keys()]
    return max(found) if found else None


class BatchSizer:
    """The records of each next batch under a worker's memory ``budget`` (bytes), at most
    ``cap``: the budget over the largest growth per record of the last ``window`` batches whose
    growth was a sizeable part of the budget (an eighth or more: a small batch's growth is
    mostly noise), at most :data:`GROWTH` times the last batch when that one was measured; the
    cap while none was.

    Not the last batch's growth alone: the growth per record of one workload varies from batch
    to batch (a worker using again memory an earlier batch freed, state that grows by more or
    by less), and a batch sized from a low reading outgrows the budget (measured: Nexmark q18 at
    10,000,000 events grew by 0.57 to 0.97 KB a record, and its batches swung between 526k and
    906k records, the largest growing by 880 MB against a budget of 512). A batch that grew
    for another reason (a first batch's imports) counts for ``window`` measured batches only.

    >>> sizer = BatchSizer(budget=300 * 2**20, cap=1_000_000)
    >>> sizer.next(900_000, 900 * 2**20)
    300000
    >>> sizer.next(300_000, 60 * 2**20)  # memory the last batch freed, used again
    300000
    >>> sizer.next(500, 2**20)  # caught up: too small to tell, the backlog's size stays
    300000
    """

    def __init__(self, budget: int, cap: int, window: int = WINDOW) -> None:
        self.budget = budget
        self.cap = cap
        # (growth, records) of the last measured batches
        self.measured: deque[tuple[int, int]] = deque(maxlen=window)

    def next(self, records: int, growth: int) -> int:
        """The next batch's records after one of ``records`` whose largest task grew by
        ``growth`` bytes."""
        sizeable = growth * 8 >= self.budget and records > 0
        if sizeable:
            self.measured.append((growth, records))
        sized_from = self.most_per_record()
        if sized_from is None:
            return self.cap
        most, of = sized_from
        limit = self.budget * of // max(1, most)
        if sizeable:
            limit = min(limit, records * GROWTH)
        return max(MIN_BATCH_RECORDS, min(self.cap, limit))

    def most_per_record(self) -> tuple[int, int] | None:
        """The measured batch the next one is sized from: (growth, records)."""
        return max(self.measured, key=lambda m: m[0] / m[1]) if self.measured else None
