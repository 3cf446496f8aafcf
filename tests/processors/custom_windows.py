"""Custom windows for the tests: calendar days in a time zone, and hopping windows written as a
:class:`~streamtable.windowing.Windows` subclass (to compare with TimeWindows)."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from streamtable import Window, Windows

HOUR = 3_600_000


class DailyWindows(Windows):
    """Calendar days in ``zone``: 23 or 25 hours long when daylight saving time begins or
    ends."""

    def __init__(self, zone: str, grace_ms: int = 0) -> None:
        self.zone = ZoneInfo(zone)
        self.grace_ms = grace_ms

    def windows_for(self, timestamp: int) -> dict[int, Window]:
        day = datetime.fromtimestamp(timestamp / 1000, self.zone).date()
        start, end = (datetime.combine(d, time(), self.zone)
                      for d in (day, day + timedelta(days=1)))
        window = Window(int(start.timestamp() * 1000), int(end.timestamp() * 1000))
        return {window.start: window}

    def size(self) -> int:
        return 25 * HOUR

    def grace_period_ms(self) -> int:
        return self.grace_ms


class Hopping(Windows):
    """TimeWindows.of(size).advance_by(advance).with_grace(grace), as custom windows giving
    ``(start, end)`` pairs."""

    def __init__(self, size: int, advance: int, grace: int) -> None:
        self.size_ms, self.advance, self.grace = size, advance, grace

    def windows_for(self, timestamp: int) -> dict[int, tuple[int, int]]:
        start = max(0, timestamp - self.size_ms + self.advance) // self.advance * self.advance
        out = {}
        while start <= timestamp:
            out[start] = (start, start + self.size_ms)
            start += self.advance
        return out

    def size(self) -> int:
        return self.size_ms

    def grace_period_ms(self) -> int:
        return self.grace


def paris(*args: int) -> int:
    """Epoch ms of a wall-clock time in Paris."""
    return int(datetime(*args, tzinfo=ZoneInfo("Europe/Paris")).timestamp() * 1000)
