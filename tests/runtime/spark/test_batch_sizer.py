"""The next batch's size under the workers' memory budget, from the growth the tasks measured:
the largest growth per record of the last batches, as a worker reuses the memory an earlier
batch freed and then reads a small growth for a batch that needed as much."""

from __future__ import annotations

from streamtable.runtime.spark.budget import GROWTH, MIN_BATCH_RECORDS, WINDOW, BatchSizer

MB = 2**20
BUDGET = 512 * MB
CAP = 1_000_000


def _growths(sizer: BatchSizer, batches: int) -> list[int]:
    """What each batch of a backlog grows by when its records cost 1 KB and 600 B in turn (a
    worker using again memory the batch before freed, or records of other sizes)."""
    records, grown = CAP, []
    for i in range(batches):
        grown.append(records * (1024 if i % 2 == 0 else 600))
        records = sizer.next(records, grown[-1])
    return grown


def test_batches_stay_within_the_budget_when_the_growth_per_record_varies():
    assert max(_growths(BatchSizer(BUDGET, CAP), 20)[1:]) <= BUDGET
    # sized from the last batch alone, every other batch went over it by three quarters
    assert max(_growths(BatchSizer(BUDGET, CAP, window=1), 20)[1:]) > 1.7 * BUDGET


def test_a_batch_that_grew_for_another_reason_counts_for_a_window_of_batches():
    sizer = BatchSizer(BUDGET, CAP)
    assert sizer.next(100_000, 512 * MB) == 100_000  # 5 KB a record: a first batch's imports
    sizes = [sizer.next(100_000, 100_000 * 1024) for _ in range(WINDOW)]
    assert sizes[:-1] == [100_000] * (WINDOW - 1)
    assert sizes[-1] == 100_000 * GROWTH  # the first batch left the window: 1 KB a record


def test_small_batches_tell_nothing_and_keep_the_size_a_backlog_needs():
    sizer = BatchSizer(BUDGET, CAP)
    assert sizer.next(10_000, MB) == CAP  # nothing measured yet: the cap
    assert sizer.next(CAP, 1024 * MB) == CAP // 2
    assert sizer.next(200, MB) == CAP // 2  # caught up: not one batch of 800 records next
    assert BatchSizer(BUDGET, CAP).next(100, 1024 * MB) == MIN_BATCH_RECORDS
