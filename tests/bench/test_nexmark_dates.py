"""The queries', the peers' and the checker's DATE_FORMAT agree with ``datetime``'s, across day
and minute boundaries and before 1970."""

from __future__ import annotations

import random
from datetime import datetime, timezone

from bench.nexmark.dates import DAY_MS, day, minute


def test_day_and_minute_agree_with_datetime() -> None:
    rng = random.Random(7)
    edges = [k * DAY_MS + d for k in (-3, -1, 0, 1, 16_631, 16_632) for d in (-1, 0, 1)]
    for ms in edges + [rng.randrange(-10 * DAY_MS, 20_000 * DAY_MS) for _ in range(5000)]:
        t = datetime.fromtimestamp(ms // 1000, timezone.utc)
        assert day(ms) == t.strftime("%Y-%m-%d"), ms
        assert minute(ms) == t.strftime("%H:%M"), ms
