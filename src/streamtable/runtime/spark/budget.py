"""The memory budget of a micro-batch: batches sized so that a Python worker's memory fits.

``max.records.per.batch`` bounds a batch by records, which says nothing of memory: records of
1 KB and of 100 KB, or a stage that holds its input against one that streams it, differ a
hundredfold. ``worker.memory.budget.bytes`` bounds what one Python worker may add to its memory
while it runs a task of a batch. Each task measures it (the growth of its process's peak
resident memory over the memory it started with, from ``/proc/self``: the high-water mark is
reset when the task starts) and reports it with the records it processed; after the batch the
driver sizes the next one: the batch's records scaled by the budget over the largest growth,
between :data:`MIN_BATCH_RECORDS` and ``max.records.per.batch``, growing at most
:data:`GROWTH` times a batch while the growth is a sizeable part of the budget. The first batch
after a start is not measured yet: ``max.records.per.batch`` (or the last limit written) bounds
it. The source reads that limit from a file before it plans the next
batch (its planner runs in a process of its own).

Where ``/proc`` does not tell (not Linux), tasks report nothing and batches keep
``max.records.per.batch``.

>>> next_batch_limit(1_000_000, 900 * 2**20, budget=300 * 2**20, cap=1_000_000)
333333
>>> next_batch_limit(10_000, 1 * 2**20, budget=300 * 2**20, cap=1_000_000)
1000000
>>> next_batch_limit(10_000, 60 * 2**20, budget=300 * 2**20, cap=1_000_000)
40000
>>> next_batch_limit(2000, 900 * 2**20, budget=300 * 2**20, cap=1_000_000)
1000
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

log = logging.getLogger(__name__)

#: the count key a task reports its memory growth under (bytes; the largest of a batch counts)
GROWTH_KEY = "worker.memory.growth"
#: the smallest batch the budget shrinks to: below it the fixed cost of a batch dominates
MIN_BATCH_RECORDS = 1000
#: how much larger than the last batch the next may be
GROWTH = 4

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


class TaskMemory:
    """Measures one task's memory growth: made when the task starts, :meth:`growth` at its
    end (None where it cannot be measured)."""

    __slots__ = ("_start",)

    def __init__(self) -> None:
        self._start = resident_bytes() if reset_peak() else None

    def growth(self) -> int | None:
        peak = peak_bytes()
        if self._start is None or peak is None:
            return None
        return max(0, peak - self._start)


def largest_growth(counts: Mapping[str, int]) -> int | None:
    """The largest growth the tasks of a batch reported (their counts' ``GROWTH_KEY:*``)."""
    found = [v for k, v in counts.items() if k.startswith(GROWTH_KEY + ":")]
    return max(found) if found else None


def next_batch_limit(records: int, growth: int, *, budget: int, cap: int) -> int:
    """The records of the next batch: ``records`` (the last batch's) scaled by ``budget`` over
    ``growth`` (its largest task's memory growth), at most :data:`GROWTH` times ``records``,
    within :data:`MIN_BATCH_RECORDS` and ``cap``. A growth under an eighth of the budget
    tells nothing to scale by (a small batch's growth is mostly noise): the cap."""
    if growth * 8 < budget:
        return cap
    scaled = records * budget // max(1, growth)
    return max(MIN_BATCH_RECORDS, min(cap, scaled, max(records, 1) * GROWTH))
