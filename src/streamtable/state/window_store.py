"""Window stores for the Processor API (Kafka Streams' ``WindowStore``).

A window store keeps values by key and window start time, for windows of one fixed size: a
processor puts ``(key, value, window_start)`` and fetches a key's windows in a time range. It
is a task store like every other (one per task, committed with the task, exactly once on
Spark): its windows are entries under :class:`~streamtable.state.windowed.Windowed` keys
``[start, start + window size)`` holding ``(value, timestamp)`` pairs, so interactive queries
read it as they read a windowed aggregation's store.

Retention follows Kafka Streams' window stores: the store's *observed stream time* is the
largest window start put into it; a window whose start is ``retention`` or more before it has
expired. A put of an expired window is dropped (and counted as a dropped record), fetches never
return one, and expired windows are deleted from the store in segments (every
``max(retention / 2, 60 s)`` of observed stream time, as Kafka's segmented stores drop whole
segments). The observed stream time is task state too (a small internal store of the task), so
a restarted task drops exactly what the first run would have dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from streamtable.state.stores import key_order
from streamtable.state.timestamped import ValueAndTimestamp
from streamtable.state.windowed import MAX_TIME, MIN_TIME, Windowed

if TYPE_CHECKING:
    from streamtable.state.base import KeyValueStore

log = logging.getLogger(__name__)

#: the task store that holds each window store's observed stream time
WINDOW_META_STORE = "__window-stores__"
#: Kafka Streams' smallest segment interval of a window store
MIN_SEGMENT_INTERVAL_MS = 60_000


def segment_interval(retention_ms: int) -> int:
    """How much observed stream time passes between two cleanups of expired windows (Kafka
    Streams' default segment interval of a window store).

    >>> segment_interval(1_000), segment_interval(3_600_000)
    (60000, 1800000)
    """
    return max(retention_ms // 2, MIN_SEGMENT_INTERVAL_MS)


def _ms(time: int | datetime | None, default: int) -> int:
    if time is None:
        return default
    if isinstance(time, datetime):
        return int(time.timestamp() * 1000)
    return int(time)


class WindowStore:
    """A task's window store as a processor reads and writes it (Kafka Streams'
    ``WindowStore``; with ``timestamped``, its ``TimestampedWindowStore``, whose values are
    :class:`~streamtable.state.timestamped.ValueAndTimestamp`).

    ``put(key, value, window_start)`` (``None`` deletes the window), ``fetch(key, time)`` (the
    value of one window), ``fetch(key, time_from, time_to)`` (``(window start, value)`` pairs of
    one key, in start order), ``fetch(key_from, key_to, time_from, time_to)``,
    ``fetch_all(time_from, time_to)`` and ``all()`` (``(Windowed, value)`` pairs in start order,
    then key order), and their ``backward_`` variants in reverse order. Times are epoch
    milliseconds (or ``datetime``); time ranges include both ends.

    With ``retain_duplicates`` every put adds a value (a window holds all its values in put
    order, a ``None`` value is ignored), as a stream-stream join's window store does.

    >>> from streamtable.state import InMemoryKeyValueStore
    >>> store = WindowStore(InMemoryKeyValueStore("clicks"), InMemoryKeyValueStore("meta"),
    ...                     window_size=10, retention=100)
    >>> store.put("alice", 3, 0); store.put("alice", 5, 10); store.put("bob", 1, 10)
    >>> list(store.fetch("alice", 0, 20)), store.fetch("alice", 10)
    ([(0, 3), (10, 5)], 5)
    >>> list(store.fetch_all(10, 10))
    [(Windowed(key='alice', start=10, end=20), 5), (Windowed(key='bob', start=10, end=20), 1)]
    >>> store.put("bob", 7, 200)            # observed stream time 200: windows before 101 expire
    >>> list(store.fetch("alice", 0, 20)), list(store.all())
    ([], [(Windowed(key='bob', start=200, end=210), 7)])
    """

    def __init__(self, store: KeyValueStore, meta: KeyValueStore, *, window_size: int,
                 retention: int, retain_duplicates: bool = False, timestamped: bool = False,
                 now: Callable[[], int] = lambda: -1,
                 on_expired: Callable[[], None] | None = None) -> None:
        if window_size <= 0:
            raise ValueError(f"window store {store.name!r}: the window size must be positive")
        if retention < window_size:
            raise ValueError(
                f"window store {store.name!r}: the retention period ({retention} ms) must be at "
                f"least the window size ({window_size} ms)")
        self.name = store.name
        self.window_size = window_size
        self.retention_period = retention
        self.retain_duplicates = retain_duplicates
        self.timestamped = timestamped
        self._store = store
        self._meta = meta
        self._now = now
        self._on_expired = on_expired
        self._segment = segment_interval(retention)

    # -- time ------------------------------------------------------------------------------
    # The store's time lives in the meta store, read at every operation rather than kept
    # here: several processors of a task may each have a view of one store.
    def _time(self) -> tuple[int, int]:
        """(observed stream time, the segment boundary before which windows were deleted)."""
        found = self._meta.get(self.name)
        return (-1, MIN_TIME) if found is None else found

    @property
    def observed_stream_time(self) -> int:
        """The largest window start put into the store (-1 before the first put)."""
        return self._time()[0]

    def _min_live(self, observed: int | None = None) -> int:
        """The earliest window start that has not expired."""
        if observed is None:
            observed = self._time()[0]
        if observed < 0:
            return MIN_TIME
        return observed - self.retention_period + 1

    def _window(self, key: Any, start: int) -> Windowed:
        return Windowed(key, start, min(start + self.window_size, MAX_TIME))

    def _advance(self, start: int) -> int:
        """Move the observed stream time to ``start`` if later; return it."""
        observed, cleaned = self._time()
        if start <= observed:
            return observed
        # the start of the earliest live segment: every window before it has expired
        boundary = self._min_live(start) // self._segment * self._segment
        if boundary > cleaned:
            self._drop_expired(boundary)
            cleaned = boundary
        self._meta.put(self.name, (start, cleaned))
        return start

    def _drop_expired(self, boundary: int) -> None:
        """Delete the windows starting before ``boundary``: Kafka drops a whole segment at a
        time, so this runs once per segment interval of observed stream time."""
        expired = [k for k, _ in self._store.items()
                   if type(k) is Windowed and k.start < boundary]
        for k in expired:
            self._store.delete(k)
        if expired:
            log.debug("window store %r: dropped %d expired windows (starting before %d)",
                      self.name, len(expired), boundary)

    # -- writing ---------------------------------------------------------------------------
    def put(self, key: Any, value: Any, window_start: int | datetime) -> None:
        """Put ``value`` into ``key``'s window starting at ``window_start``; ``None`` deletes
        the window (ignored with ``retain_duplicates``). A window that has already expired is
        dropped. A timestamped store takes a
        :class:`~streamtable.state.timestamped.ValueAndTimestamp` (or ``None``)."""
        if key is None:
            raise ValueError(f"window store {self.name!r}: a key must not be None")
        start = _ms(window_start, 0)
        observed = self._advance(start)
        if start < self._min_live(observed):
            log.warning("window store %r: skipping the put of key %r for expired window "
                        "start %d (observed stream time %d, retention %d ms)", self.name, key,
                        start, observed, self.retention_period)
            if self._on_expired is not None:
                self._on_expired()
            return
        window = self._window(key, start)
        if value is None:
            if not self.retain_duplicates:
                self._store.delete(window)
            return
        if self.timestamped:
            if not isinstance(value, tuple) or len(value) != 2:
                raise TypeError(f"timestamped window store {self.name!r} takes "
                                f"ValueAndTimestamp values, not {type(value).__name__}")
            stored, timestamp = value
        else:
            stored, timestamp = value, self._now()
        if self.retain_duplicates:
            old = self._store.get(window)
            values = (*old[0], stored) if old is not None else (stored,)
            self._store.put(window, (values, timestamp))
        else:
            self._store.put(window, (stored, timestamp))

    # -- reading ---------------------------------------------------------------------------
    def _values(self, stored: Any) -> list[Any]:
        """What a stored window shows: its values (several with ``retain_duplicates``)."""
        value, timestamp = stored
        values = value if self.retain_duplicates else (value,)
        if self.timestamped:
            return [ValueAndTimestamp(v, timestamp) for v in values]
        return list(values)

    def _key_windows(self, key: Any, time_from: int, time_to: int) -> list[tuple[Windowed, Any]]:
        lo = max(time_from, self._min_live())
        store = self._store
        out = []
        for k in store.keys_with_first(key):
            if type(k) is Windowed and lo <= k.start <= time_to and k.key == key:
                stored = store.get(k)
                if stored is not None:
                    out.append((k, stored))
        out.sort(key=lambda kv: kv[0].start)
        return out

    def _all_windows(self, time_from: int, time_to: int, key_from: Any = None,
                     key_to: Any = None) -> list[tuple[Windowed, Any]]:
        lo = max(time_from, self._min_live())
        kf = None if key_from is None else key_order(key_from)
        kt = None if key_to is None else key_order(key_to)
        out = []
        for k, stored in self._store.items():
            if type(k) is not Windowed or not lo <= k.start <= time_to:
                continue
            if kf is not None or kt is not None:
                ko = key_order(k.key)
                if (kf is not None and ko < kf) or (kt is not None and ko > kt):
                    continue
            out.append((k, stored))
        # Kafka's in-memory window store iterates by window start, then key
        out.sort(key=lambda kv: (kv[0].start, key_order(kv[0].key)))
        return out

    def _pairs(self, windows: list[tuple[Windowed, Any]]) -> list[tuple[Windowed, Any]]:
        return [(w, v) for w, stored in windows for v in self._values(stored)]

    def fetch(self, key: Any, *times: Any) -> Any:
        """``fetch(key, time)``: the value of ``key``'s window starting at ``time`` (``None``
        if absent or expired). ``fetch(key, time_from, time_to)``: an iterator of
        ``(window start, value)`` of ``key``'s windows starting in ``[time_from, time_to]``.
        ``fetch(key_from, key_to, time_from, time_to)``: an iterator of ``(Windowed, value)``
        of the keys in ``[key_from, key_to]`` (a ``None`` bound is open)."""
        if len(times) == 1:
            if key is None:
                raise ValueError(f"window store {self.name!r}: fetch needs a key")
            start = _ms(times[0], 0)
            if start < self._min_live():
                return None
            stored = self._store.get(self._window(key, start))
            return None if stored is None else self._values(stored)[0]
        if len(times) == 2:
            if key is None:
                raise ValueError(f"window store {self.name!r}: fetch needs a key")
            lo, hi = _ms(times[0], MIN_TIME), _ms(times[1], MAX_TIME)
            return iter([(w.start, v) for w, v in self._pairs(self._key_windows(key, lo, hi))])
        if len(times) == 3:
            key_to, lo, hi = times[0], _ms(times[1], MIN_TIME), _ms(times[2], MAX_TIME)
            if key is not None and key_to is not None and key_order(key) > key_order(key_to):
                log.warning("window store %r: returning nothing for a fetch with key_from > "
                            "key_to (%r > %r)", self.name, key, key_to)
                return iter([])
            return iter(self._pairs(self._all_windows(lo, hi, key, key_to)))
        raise TypeError("fetch(key, time), fetch(key, time_from, time_to) or "
                        "fetch(key_from, key_to, time_from, time_to)")

    def backward_fetch(self, key: Any, *times: Any) -> Iterator[Any]:
        """:meth:`fetch` of a time range (or of a key range), latest window first."""
        if len(times) not in (2, 3):
            raise TypeError("backward_fetch(key, time_from, time_to) or "
                            "backward_fetch(key_from, key_to, time_from, time_to)")
        return iter(list(self.fetch(key, *times))[::-1])

    def fetch_all(self, time_from: int | datetime | None = None,
                  time_to: int | datetime | None = None) -> Iterator[tuple[Windowed, Any]]:
        """``(Windowed, value)`` of every window starting in ``[time_from, time_to]``, by
        start, then key."""
        lo, hi = _ms(time_from, MIN_TIME), _ms(time_to, MAX_TIME)
        return iter(self._pairs(self._all_windows(lo, hi)))

    def backward_fetch_all(self, time_from: int | datetime | None = None,
                           time_to: int | datetime | None = None
                           ) -> Iterator[tuple[Windowed, Any]]:
        """:meth:`fetch_all`, latest window first."""
        return iter(list(self.fetch_all(time_from, time_to))[::-1])

    def all(self) -> Iterator[tuple[Windowed, Any]]:
        """``(Windowed, value)`` of every window that has not expired, by start, then key."""
        return self.fetch_all()

    def backward_all(self) -> Iterator[tuple[Windowed, Any]]:
        """:meth:`all`, latest window first."""
        return self.backward_fetch_all()

    def approximate_num_entries(self) -> int:
        """How many windows the store holds (expired ones included until their segment is
        dropped)."""
        return len(self._store)

    def __len__(self) -> int:
        return len(self._store)
