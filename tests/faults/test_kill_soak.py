"""The kill -9 test, many times in a row (slow: ``make soak``; ``STREAMTABLE_SOAK_KILLS``
kills, 100 by default), printing what it survived."""

from __future__ import annotations

import os

import pytest
from tests.runtime.spark.test_kill_and_restart import kill_rounds

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_kill_soak(bootstrap, tmp_path):
    counts = kill_rounds(bootstrap, tmp_path, int(os.environ.get("STREAMTABLE_SOAK_KILLS", 100)))
    print("soak:", counts)
    assert counts["divergences"] == 0, counts
