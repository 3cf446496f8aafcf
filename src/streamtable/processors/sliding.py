"""Sliding windows: Kafka Streams' ``SlidingWindows`` and ``KStreamSlidingWindowAggregate``.

A sliding window is ``[start, start + time_difference]``, both ends inclusive, and exists only
where records are: each record has a *left* window ending at its timestamp, and a *right* window
starting 1 ms after it, created once a later record falls into it. So every distinct set of
records that fits within ``time_difference`` of each other gets exactly one window. A record
updates every existing window that contains it, creates its own left window (seeded with the
aggregate of the records before it that it shares), its right window (seeded with the aggregate
of the records after it), and the right window of the record before it when this record falls
into that window.

Records earlier than ``time_difference`` (timestamps that would give windows with a negative
start) share the window ``[0, time_difference]``, as in Kafka Streams.
"""

from __future__ import annotations

from typing import Any

from streamtable.processors.api import Record
from streamtable.processors.window import KeyedWindows
from streamtable.state.windowed import Windowed
from streamtable.windowing import SlidingWindows

# (aggregate, timestamp of the newest record in it): what the store holds per window
Stored = tuple[Any, int]





class SlidingWindowedAggregate(KeyedWindows[SlidingWindows]):
    """``aggregator(key, value, aggregate)`` per sliding window (see the module docstring).

    A record needs its key's windows starting up to twice the time difference before it: a
    binary search among the key's windows, kept in start order (:class:`KeyedWindows`)."""

    def process(self, record: Record) -> None:
        if not self.admit(record):
            return
        ts = record.timestamp
        diff = self.windows.time_difference
        close_time = self.context.stream_time - self.windows.grace
        if ts + diff < close_time:
            self.context.record_dropped(self.name, "late record for a closed window")
            return
        if ts < diff:
            self._process_early(record, close_time)
        else:
            self._process(record, close_time)

    def _fetch(self, key: Any, time_from: int, time_to: int) -> list[tuple[Windowed, Stored]]:
        """The windows of ``key`` starting in ``[time_from, time_to]``, in start order."""
        get = self.store.get
        return [(w, get(w)) for w in self.between(key, time_from, time_to)]

    def _process(self, record: Record, close_time: int) -> None:
        # newest window first, as Kafka Streams does with a store that iterates backwards
        key, ts = record.key, record.timestamp
        diff = self.windows.time_difference
        starts: set[int] = set()
        left_agg: Stored | None = None
        right_agg: Stored | None = None
        left_exists = right_exists = False
        previous_ts: int | None = None
        for wkey, stored in reversed(self._fetch(key, max(0, ts - 2 * diff), ts + 1)):
            start = wkey.start
            starts.add(start)
            end = start + diff
            if start == ts + 1:
                right_exists = True
            elif end > ts:
                if right_agg is None:
                    right_agg = stored
                self._update(wkey, stored, True, record, close_time)
            elif end == ts:
                left_exists = True
                self._update(wkey, stored, True, record, close_time)
                if stored[1] >= ts:
                    return  # a record at this timestamp came before: every window exists
                previous_ts = stored[1]
            else:
                left_agg = stored
                previous_ts = stored[1]
                break
        self._create_windows(record, close_time, starts, right_agg, left_agg, left_exists,
                             right_exists, previous_ts)

    def _process_early(self, record: Record, close_time: int) -> None:
        """A record before ``time_difference``: it goes into the window ``[0, diff]`` that
        holds every early record, and into the right windows it falls in."""
        key, ts = record.key, record.timestamp
        combined: tuple[Windowed, Stored] | None = None
        right_agg: Stored | None = None
        right_exists = False
        starts: set[int] = set()
        previous_ts: int | None = None
        for wkey, stored in self._fetch(key, 0, ts + 1):
            start = wkey.start
            starts.add(start)
            if start == 0:
                combined = (wkey, stored)
                if stored[1] < ts:
                    previous_ts = stored[1]
            elif start <= ts:
                right_agg = stored
                self._update(wkey, stored, True, record, close_time)
            else:  # start == ts + 1
                right_exists = True
        # with no right window found, the combined window holds only records after this one
        # whenever its newest record is after it
        if right_agg is None and combined is not None and combined[1][1] > ts:
            right_agg = combined[1]
        if not right_exists and right_agg is not None and right_agg[1] > ts:
            self._create_right_window(record, right_agg)
        if previous_ts is not None and previous_ts + 1 not in starts:
            self._create_window(previous_ts + 1, (self.initializer(), ts), record, close_time)
        if combined is None:
            self._create_window(0, (self.initializer(), ts), record, close_time)
        else:
            self._update(combined[0], combined[1], True, record, close_time)

    def _create_windows(self, record: Record, close_time: int, starts: set[int],
                        right_agg: Stored | None, left_agg: Stored | None, left_exists: bool,
                        right_exists: bool, previous_ts: int | None) -> None:
        ts = record.timestamp
        diff = self.windows.time_difference
        if previous_ts is not None:
            # the previous record's right window, when this record falls into it
            start = previous_ts + 1
            if start not in starts and start + diff >= ts:
                self._create_window(start, (self.initializer(), ts), record, close_time)
        if not left_exists:
            # seeded with what the previous record's window holds when it is within reach
            if previous_ts is not None and left_agg is not None and ts - diff <= previous_ts:
                base: Stored = (left_agg[0], ts)
            else:
                base = (self.initializer(), ts)
            self._create_window(ts - diff, base, record, close_time)
        if not right_exists and right_agg is not None and right_agg[1] > ts:
            self._create_right_window(record, right_agg)

    def _create_right_window(self, record: Record, right_agg: Stored) -> None:
        """This record's right window holds what ``right_agg`` holds (the records after it),
        not the record itself."""
        start = record.timestamp + 1
        wkey = Windowed(record.key, start, start + self.windows.time_difference)
        self.write(wkey, right_agg[0], None, right_agg[1], record.headers)

    def _create_window(self, start: int, base: Stored, record: Record, close_time: int) -> None:
        wkey = Windowed(record.key, start, start + self.windows.time_difference)
        self._update(wkey, base, False, record, close_time)

    def _update(self, wkey: Windowed, stored: Stored, exists: bool, record: Record,
                close_time: int) -> None:
        """Add the record to a window (``exists``: the store holds it, with ``stored``; else
        ``stored`` is what a new window starts from)."""
        if wkey.end < close_time:
            self.context.record_dropped(self.name, "late record for a closed window")
            return
        agg, agg_ts = stored[0], stored[1]  # a store keeping headers holds them third
        new = self.aggregator(record.key, record.value, agg)
        ts = record.timestamp
        if exists:
            old = agg
            if agg_ts > ts:
                ts = agg_ts
        else:
            old = None
        if new is None or self.keep_headers:
            self.write(wkey, new, old, ts, record.headers)
            return
        # write(), inlined: the windows a record updates are many where a key is busy
        if old is None:
            self.track(wkey)
        self.store.put(wkey, (new, ts))
        self.forwarder.forward(wkey, new, old, ts, record.headers)
