"""Windowed aggregation of streams: tumbling and hopping time windows, and session windows,
each with a grace period.

A record updates every window that contains its timestamp and is still open; a window closes once
stream time reaches its end plus the grace period, and a record arriving for a closed window is
late: dropped and counted, never silently. Sessions grow and merge: a record joins every session
of its key that ends less than the inactivity gap before it or starts less than the gap after it.

What the operators keep besides their store is derived from it: Spark creates a task and its
operators anew for every micro-batch, so each operator reads it from the store in one pass at
its first record (at most once per batch; a task without records reads nothing), then keeps it
in step with every window it stores or deletes.

* Expiry: the windows by the time they expire, in a heap (:class:`ExpiringWindows`).
* Time windows: the windows grouped by start (their expiry time), each group by key
  (:class:`WindowedAggregate`): a record finds the stored key of each of its windows there, so
  the store and the record cache find it by identity, and expiry deletes a start's group at
  once.
* Sliding and session windows: the windows of each key in expiry order (:class:`KeyedWindows`):
  a record finds those of its key in its time range by binary search, rather than fetching and
  sorting all of them from the store.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from operator import attrgetter
from typing import Any, Generic, TypeVar

from streamtable.processors._operator import InternalProcessorContext
from streamtable.processors.api import Record
from streamtable.processors.table import StoringProcessor
from streamtable.records import Headers
from streamtable.state.windowed import Windowed
from streamtable.windowing import SessionWindows, TimeWindows

__all__ = ["ExpiringWindows", "KeyedWindows", "SessionWindowedAggregate", "WindowedAggregate"]

W = TypeVar("W")

# record keys of these types are equal only when they are the same value: a stored window of
# an equal key of such a type can stand for the record's (1 == 1.0 == True are not the same)
_PLAIN_KEYS = frozenset({str, int, bytes})


class ExpiringWindows(StoringProcessor, Generic[W]):
    """A windowed aggregation: ``aggregator(key, value, aggregate)`` from ``initializer()`` per
    window of ``windows``, in a store that keeps windows for ``retention`` ms (Kafka Streams'
    window and session stores' retention period).

    A window expires once stream time is ``retention`` past its start (a session: more than
    ``retention`` past its end): it is deleted from the store through the store's own
    ``delete``, so a runtime that persists the store's changes persists the deletion too.
    Nothing is forwarded for an expired window (Kafka Streams drops the store's old segments
    silently). ``retention`` is ``None`` for a store that keeps its windows forever.

    The windows to expire are kept in a heap of ``(expiry time, sequence, window)``, read from
    the store at the first record (:meth:`index_store`) and pushed to as windows are created; a
    window deleted in between is skipped when its turn comes.
    """

    # a session store's windows expire by their end, a window store's by their start
    expire_by_end = False
    # how long a window stays past ``retention`` (ms): a session ending exactly ``retention``
    # before stream time is still open, a record within the gap merges with it
    kept_past_retention = 0
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
        self._expiry: list[tuple[int, int, Any]] = []
        self._seq = 0
        self._indexed = False
        if self.keep_headers:
            self.write = self._write_with_headers  # type: ignore[method-assign]

    def index_store(self) -> None:
        """Read what the operator keeps besides the store from the store (once per task, at
        its first record): here, what expires when."""
        self._indexed = True
        if self.retention is None:
            return
        by_end = self.expire_by_end
        self._expiry = [(w.end if by_end else w.start, i, w)
                        for i, w in enumerate(k for k, _ in self.store.items())]
        heapq.heapify(self._expiry)
        self._seq = len(self._expiry)

    def track(self, wkey: Windowed) -> None:
        """Remember a window the store now holds (call once per newly stored window)."""
        if self.retention is not None:
            heapq.heappush(self._expiry,
                           (wkey.end if self.expire_by_end else wkey.start, self._seq, wkey))
            self._seq += 1

    def forget(self, wkey: Windowed) -> None:
        """A window the store held is deleted."""

    def expire(self, limit: int) -> None:
        """Delete the windows that expire at ``limit`` or before."""
        heap, store = self._expiry, self.store
        while heap and heap[0][0] <= limit:
            wkey = heapq.heappop(heap)[2]
            if store.get(wkey) is not None:
                store.delete(wkey)
                self.forget(wkey)

    def admit(self, record: Record) -> bool:
        """Start a record: delete the windows that stream time has left ``retention`` behind,
        then whether the record takes part (one with a null key or value is dropped and
        counted)."""
        # one method for both steps: a record pays one call before its windows
        if not self._indexed:
            self.index_store()
        if self.retention is not None:
            limit = self.context.stream_time - self.retention - self.kept_past_retention
            heap = self._expiry
            if heap and heap[0][0] <= limit:
                self.expire(limit)
        if record.key is None or record.value is None:
            self.context.record_dropped(self.name, self.null_reason)
            return False
        return True

    def write(self, wkey: Windowed, new: Any, old: Any, timestamp: int,
              headers: Headers) -> None:
        """Store a window's new aggregate (``None`` deletes it) and forward Change(new, old)
        at ``timestamp``: :meth:`emit` without a record per window."""
        if new is None:
            if self.store.delete(wkey) is not None:
                self.forget(wkey)
        else:
            if old is None:
                self.track(wkey)
            self.store.put(wkey, (new, timestamp))
        self.forwarder.forward(wkey, new, old, timestamp, headers)

    def _write_with_headers(self, wkey: Windowed, new: Any, old: Any, timestamp: int,
                            headers: Headers) -> None:
        """:meth:`write` into a store that keeps headers (``dsl.store.format=headers``)."""
        if new is None:
            if self.store.delete(wkey) is not None:
                self.forget(wkey)
        else:
            if old is None:
                self.track(wkey)
            self.store.put(wkey, (new, timestamp, headers))
        self.forwarder.forward(wkey, new, old, timestamp, headers)

    def emit(self, key: Any, new: Any, old: Any, record: Record, is_latest: bool = True,
             keep_empty: bool = False) -> None:
        self.write(key, new, old, record.timestamp, record.headers)


class KeyedWindows(ExpiringWindows[W]):
    """An aggregation that looks up the windows of a record's key by time (sliding and session
    windows): :meth:`windows_of` lists a key's windows in ``order`` (expiry time first).

    The lists are read from the store with the expiry heap, in the one pass over the store an
    operator makes, and kept in step as windows are stored, deleted and expired; the store's
    own index (``keys_with_first``) is not needed, so its puts do not maintain one.
    """

    order: Callable[[Windowed], tuple[int, int]] = attrgetter("start", "end")

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        self._by_key: dict[Any, list[Windowed]] = {}

    def index_store(self) -> None:
        self._indexed = True
        by_key: dict[Any, list[Windowed]] = {}
        heap: list[tuple[int, int, Any]] = []
        by_end = self.expire_by_end
        expires = self.retention is not None
        for i, (w, _) in enumerate(self.store.items()):
            windows = by_key.get(w.key)
            if windows is None:
                by_key[w.key] = [w]
            else:
                windows.append(w)
            if expires:
                heap.append((w.end if by_end else w.start, i, w))
        order = self.order
        for windows in by_key.values():
            windows.sort(key=order)  # a store's windows come mostly in time order already
        self._by_key = by_key
        if expires:
            heapq.heapify(heap)
            self._expiry = heap
            self._seq = len(heap)

    def windows_of(self, key: Any) -> list[Windowed]:
        """``key``'s windows in ``order`` (the operator's own list: not to be changed)."""
        windows = self._by_key.get(key)
        return [] if windows is None else windows

    def between(self, key: Any, lo: int, hi: int) -> list[Windowed]:
        """``key``'s windows with their first ``order`` time in ``[lo, hi]``."""
        windows = self._by_key.get(key)
        if windows is None:
            return []
        first = _END if self.expire_by_end else _START
        return windows[bisect_left(windows, lo, key=first):
                       bisect_right(windows, hi, key=first)]

    def track(self, wkey: Windowed) -> None:
        if self.retention is not None:
            heapq.heappush(self._expiry,
                           (wkey.end if self.expire_by_end else wkey.start, self._seq, wkey))
            self._seq += 1
        windows = self._by_key.get(wkey.key)
        if windows is None:
            self._by_key[wkey.key] = [wkey]
            return
        order = self.order
        at = order(wkey)
        if order(windows[-1]) < at:  # the common case: the key's latest window
            windows.append(wkey)
            return
        i = bisect_left(windows, at, key=order)
        while i < len(windows) and order(windows[i]) == at:
            if windows[i] == wkey:
                return  # stored already
            i += 1
        windows.insert(i, wkey)

    def expire(self, limit: int) -> None:
        heap, store, by_key = self._expiry, self.store, self._by_key
        while heap and heap[0][0] <= limit:
            wkey = heapq.heappop(heap)[2]
            if store.get(wkey) is not None:
                store.delete(wkey)
                windows = by_key.get(wkey.key)
                # windows expire in their key's order: the first of its list, as a rule
                if windows is not None and windows[0] is wkey:
                    del windows[0]
                    if not windows:
                        del by_key[wkey.key]
                else:
                    self.forget(wkey)

    def forget(self, wkey: Windowed) -> None:
        windows = self._by_key.get(wkey.key)
        if windows is None:
            return
        if windows[0] is wkey:  # the common case: the key's window that expires first
            del windows[0]
            if not windows:
                del self._by_key[wkey.key]
            return
        order = self.order
        at = order(wkey)
        i = bisect_left(windows, at, key=order)
        while i < len(windows) and order(windows[i]) == at:
            if windows[i] == wkey:
                del windows[i]
                if not windows:
                    del self._by_key[wkey.key]
                return
            i += 1


_START: Callable[[Windowed], int] = attrgetter("start")
_END: Callable[[Windowed], int] = attrgetter("end")


class WindowedAggregate(ExpiringWindows[TimeWindows]):
    """``aggregator(key, value, aggregate)`` per open window of the record's timestamp.

    The windows to expire are grouped by start, then by key: ``{start: {key: window}}``, with
    a heap of ``(start, sequence, group)``. A record looks its windows up there, and uses the
    stored window as the key of the store and the record cache when it is the record's key's.
    """

    def index_store(self) -> None:
        self._indexed = True
        self._by_start: dict[int, dict[Any, Windowed]] = {}
        if self.retention is None:
            return
        size = self.windows.size
        for w, _ in self.store.items():
            group = self._group(w.start)
            if w.end - w.start == size and w.key not in group:
                group[w.key] = w
            else:  # a window of another size (the windows changed): expires by start all the same
                group[object()] = w

    def _group(self, start: int) -> dict[Any, Windowed]:
        group = self._by_start.get(start)
        if group is None:
            group = self._by_start[start] = {}
            heapq.heappush(self._expiry, (start, self._seq, group))
            self._seq += 1
        return group

    def track(self, wkey: Windowed) -> None:
        if self.retention is not None:
            group = self._group(wkey.start)
            if wkey.key not in group:
                group[wkey.key] = wkey

    def expire(self, limit: int) -> None:
        heap, store = self._expiry, self.store
        while heap and heap[0][0] <= limit:
            start, _, group = heapq.heappop(heap)
            del self._by_start[start]
            for wkey in group.values():
                if store.get(wkey) is not None:
                    store.delete(wkey)

    def process(self, record: Record) -> None:
        if not self.admit(record):
            return
        key, value, ts, headers = record.key, record.value, record.timestamp, record.headers
        windows = self.windows
        size, advance = windows.size, windows.advance
        close_time = self.context.stream_time - windows.grace
        by_start = self._by_start if self.retention is not None else None
        reuse = type(key) in _PLAIN_KEYS
        get, put = self.store.get, self.store.put
        forward = self.forwarder.forward
        aggregator = self.aggregator
        keep_headers = self.keep_headers
        # TimeWindows.windows_for, earliest first
        start = max(0, ts - size + advance) // advance * advance
        while start <= ts:
            end = start + size
            if end <= close_time:
                self.context.record_dropped(self.name, "late record for a closed window")
                start += advance
                continue
            wkey = None
            if by_start is not None:
                group = by_start.get(start)
                if group is not None:
                    wkey = group.get(key)
                    if wkey is not None and not (wkey.key is key or (
                            reuse and type(wkey.key) is type(key))):
                        wkey = None
            if wkey is None:
                wkey = Windowed(key, start, end)
            stored = get(wkey)
            if stored is None:
                old, agg, at = None, self.initializer(), ts
            else:
                old = agg = stored[0]
                at = stored[1] if stored[1] > ts else ts
            new = aggregator(key, value, agg)
            if new is None or keep_headers:
                self.write(wkey, new, old, at, headers)
            else:  # write(), inlined: five windows a record on hopping windows
                if old is None:
                    self.track(wkey)
                put(wkey, (new, at))
                forward(wkey, new, old, at, headers)
            start += advance


class SessionWindowedAggregate(KeyedWindows[SessionWindows]):
    """Aggregation per session (Kafka Streams' ``KStreamSessionWindowAggregate``).

    A record finds the sessions of its key it falls into or next to (within the gap), merges
    them with ``merger(key, aggregate1, aggregate2)`` into one session spanning them all, and
    adds itself with ``aggregator(key, value, aggregate)``. Each replaced session is deleted
    (a tombstone is forwarded for it), then the merged session is forwarded; both carry the
    session's end as timestamp. A session stays open for the inactivity gap after its end (a
    later record could still extend it) plus the grace period: a record whose merged session
    ends before stream time minus gap and grace is late, dropped and counted.

    A key's sessions are kept in end order: those ending at or after the record's timestamp
    minus the gap are found by a binary search, and only they are checked for their start.
    """

    expire_by_end = True
    # expiry never takes what a merge can still reach: with the default retention (gap plus
    # grace) a session expires once closed, when its end is before stream time minus gap and
    # grace (Kafka Streams: a record at t merges with a session ending at t - gap or later)
    kept_past_retention = 1
    null_reason = "null key or value in a session aggregation"
    order = attrgetter("end", "start")

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
        sessions = self.windows_of(key)
        get = self.store.get
        latest_start = ts + gap
        for wkey in sessions[bisect_left(sessions, ts - gap, key=_END):]:
            if wkey.start <= latest_start:
                session_agg = get(wkey)[0]
                agg = self.merger(key, agg, session_agg)
                start, end = min(start, wkey.start), max(end, wkey.end)
                merged.append((wkey, session_agg))
        if end < close_time:
            self.context.record_dropped(self.name, "late record for a closed session")
            return
        headers = record.headers
        if (start, end) != (ts, ts):
            # every merged session is replaced, even one the record fell inside: Kafka Streams
            # forwards its tombstone before the new session (a record cache folds the two)
            for wkey, session_agg in merged:
                self.write(wkey, None, session_agg, wkey.end, headers)
        agg = self.aggregator(key, record.value, agg)
        self.write(Windowed(key, start, end), agg, None, end, headers)
