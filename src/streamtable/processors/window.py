"""Windowed aggregation of streams: tumbling and hopping time windows, and session windows,
each with a grace period.

A record updates every window that contains its timestamp and is still open; a window closes once
stream time reaches its end plus the grace period, and a record arriving for a closed window is
late: dropped and counted, never silently. Sessions grow and merge: a record joins every session
of its key that ends less than the inactivity gap before it or starts less than the gap after it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from streamtable.processors._operator import InternalProcessorContext
from streamtable.processors.api import Record
from streamtable.processors.table import StoringProcessor
from streamtable.state.windowed import Windowed
from streamtable.windowing import SessionWindows, TimeWindows

__all__ = ["ExpiringWindows", "SessionWindowedAggregate", "WindowedAggregate"]

W = TypeVar("W")


class ExpiringWindows(StoringProcessor, Generic[W]):
    """A windowed aggregation: ``aggregator(key, value, aggregate)`` from ``initializer()`` per
    window of ``windows``, in a store that keeps windows for ``retention`` ms (Kafka Streams'
    window and session stores' retention period).

    A window expires once stream time is ``retention`` past its start (a session: past its
    end): it is deleted from the store through the store's own ``delete``, so a runtime that
    persists the store's changes persists the deletion too. Nothing is forwarded for an
    expired window (Kafka Streams drops the store's old segments silently). ``retention`` is
    ``None`` for a store that keeps its windows forever.
    """

    # a session store's windows expire by their end, a window store's by their start
    expire_by_end = False
    # what a record with a null key or value is counted as when dropped
    null_reason = "null key or value in a windowed aggregation"

    def __init__(self, store_name: str, windows: W, initializer: Callable[[], Any],
                 aggregator: Callable[[Any, Any, Any], Any],
                 retention: int | None = None) -> None:
        self.store_name = store_name
        self.windows = windows
        self.initializer = initializer
        self.aggregator = aggregator
        self.retention = retention

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        self._expiry: list[tuple[int, int, Windowed]] = []
        self._seq = 0
        if self.retention is not None:
            by_end = self.expire_by_end
            self._expiry = [(w.end if by_end else w.start, i, w)
                            for i, (w, _) in enumerate(self.store.items())]
            heapq.heapify(self._expiry)
            self._seq = len(self._expiry)

    def track(self, wkey: Windowed) -> None:
        """Remember a window the store now holds (call once per newly stored window)."""
        if self.retention is not None:
            heapq.heappush(self._expiry,
                           (wkey.end if self.expire_by_end else wkey.start, self._seq, wkey))
            self._seq += 1

    def admit(self, record: Record) -> bool:
        """Start a record: delete the windows that stream time has left ``retention`` behind,
        then whether the record takes part (one with a null key or value is dropped and
        counted)."""
        # one method for both steps: a record pays one call before its windows
        if self.retention is not None:
            limit = self.context.stream_time - self.retention
            heap = self._expiry
            while heap and heap[0][0] <= limit:
                wkey = heapq.heappop(heap)[2]
                if self.store.get(wkey) is not None:
                    self.store.delete(wkey)
        if record.key is None or record.value is None:
            self.context.record_dropped(self.name, self.null_reason)
            return False
        return True

    def emit(self, key: Any, new: Any, old: Any, record: Record) -> None:
        if old is None and new is not None:
            self.track(key)
        super().emit(key, new, old, record)





class WindowedAggregate(ExpiringWindows[TimeWindows]):
    """``aggregator(key, value, aggregate)`` per open window of the record's timestamp."""

    def process(self, record: Record) -> None:
        if not self.admit(record):
            return
        key = record.key
        close_time = self.context.stream_time - self.windows.grace
        for start, end in self.windows.windows_for(record.timestamp):
            if end <= close_time:
                self.context.record_dropped(self.name, "late record for a closed window")
                continue
            wkey = Windowed(key, start, end)
            stored = self.store.get(wkey)
            if stored is None:
                old, agg, ts = None, self.initializer(), record.timestamp
            else:
                old, agg, ts = stored[0], stored[0], max(record.timestamp, stored[1])
            new = self.aggregator(key, record.value, agg)
            self.emit(wkey, new, old, record.with_timestamp(ts))





class SessionWindowedAggregate(ExpiringWindows[SessionWindows]):
    """Aggregation per session (Kafka Streams' ``KStreamSessionWindowAggregate``).

    A record finds the sessions of its key it falls into or next to (within the gap), merges
    them with ``merger(key, aggregate1, aggregate2)`` into one session spanning them all, and
    adds itself with ``aggregator(key, value, aggregate)``. Each replaced session is deleted
    (a tombstone is forwarded for it), then the merged session is forwarded; both carry the
    session's end as timestamp. A session stays open for the inactivity gap after its end (a
    later record could still extend it) plus the grace period: a record whose merged session
    ends before stream time minus gap and grace is late, dropped and counted.
    """

    expire_by_end = True
    null_reason = "null key or value in a session aggregation"

    def __init__(self, store_name: str, windows: SessionWindows, initializer: Callable[[], Any],
                 aggregator: Callable[[Any, Any, Any], Any],
                 merger: Callable[[Any, Any, Any], Any], retention: int | None = None) -> None:
        super().__init__(store_name, windows, initializer, aggregator, retention)
        self.merger = merger

    def process(self, record: Record) -> None:
        if not self.admit(record):
            return
        key, ts = record.key, record.timestamp
        gap = self.windows.gap
        close_time = self.context.stream_time - self.windows.grace - gap
        start, end = ts, ts
        agg = self.initializer()
        merged = []
        sessions = sorted(self.store.keys_with_first(key), key=lambda w: (w.end, w.start))
        for wkey in sessions:
            if wkey.end >= ts - gap and wkey.start <= ts + gap:
                session_agg = self.store.get(wkey)[0]
                agg = self.merger(key, agg, session_agg)
                start, end = min(start, wkey.start), max(end, wkey.end)
                merged.append((wkey, session_agg))
        if end < close_time:
            self.context.record_dropped(self.name, "late record for a closed session")
            return
        if (start, end) != (ts, ts):
            # every merged session is replaced, even one the record fell inside: Kafka Streams
            # forwards its tombstone before the new session (a record cache folds the two)
            for wkey, session_agg in merged:
                self.emit(wkey, None, session_agg, record.with_timestamp(wkey.end))
        agg = self.aggregator(key, record.value, agg)
        self.emit(Windowed(key, start, end), agg, None, record.with_timestamp(end))
