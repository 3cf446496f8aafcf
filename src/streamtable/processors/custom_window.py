"""Windowed aggregation over custom windows (a user's :class:`~streamtable.windowing.Windows`
subclass): Kafka Streams' ``KStreamWindowAggregate`` with ``windowsFor`` asked of the windows.

Time windows have their own, tuned operator (``processors/window.py``); this one is the general
path: each record asks the windows which ones contain it, and every window (of any length) is
aggregated, closed and expired as a time window is. A window closes once stream time reaches its
end plus the grace period (a later record for it is dropped and counted); it expires from the
store once stream time is the retention past its start.
"""

from __future__ import annotations

from typing import Any

from streamtable.processors.api import Record
from streamtable.processors.window import ExpiringWindows
from streamtable.state.windowed import Windowed
from streamtable.windowing import Windows

__all__ = ["CustomWindowedAggregate", "window_bounds"]


def window_bounds(start: int, window: Any, windows: Windows) -> tuple[int, int]:
    """``(start, end)`` of one entry of ``windows.windows_for``: a
    :class:`~streamtable.windowing.Window`, a ``(start, end)`` pair or anything with ``start``
    and ``end``; the start must be its key.

    >>> from streamtable.windowing import Window
    >>> window_bounds(0, Window(0, 10), Windows()), window_bounds(5, (5, 8), Windows())
    ((0, 10), (5, 8))
    """
    bounds: tuple[Any, ...]
    if hasattr(window, "start") and hasattr(window, "end"):
        bounds = (window.start, window.end)
    else:
        try:
            bounds = tuple(window)
        except TypeError:
            bounds = ()
    if (len(bounds) != 2 or not all(isinstance(b, int) for b in bounds)
            or bounds[0] != start or bounds[1] <= bounds[0]):
        raise ValueError(
            f"{type(windows).__name__}.windows_for gave {start!r}: {window!r}; each entry "
            "must be start: Window(start, end) (or a (start, end) pair) with start < end, "
            "in epoch milliseconds")
    return bounds[0], bounds[1]


class CustomWindowedAggregate(ExpiringWindows[Windows]):
    """``aggregator(key, value, aggregate)`` from ``initializer()`` per open window of the
    record's timestamp, as ``windows.windows_for`` gives them, in start order."""

    def process(self, record: Record) -> None:
        if not self.admit(record):
            return
        key, value, ts, headers = record.key, record.value, record.timestamp, record.headers
        windows = self.windows
        close_time = self.context.stream_time - windows.grace_period_ms()
        get = self.store.get
        for start, window in sorted(windows.windows_for(ts).items()):
            start, end = window_bounds(start, window, windows)
            if end <= close_time:
                self.context.record_dropped(self.name, "late record for a closed window")
                continue
            wkey = Windowed(key, start, end)
            stored = get(wkey)
            if stored is None:
                old, agg, at = None, self.initializer(), ts
            else:
                old = agg = stored[0]
                at = max(stored[1], ts)
            self.write(wkey, self.aggregator(key, value, agg), old, at, headers)
