"""Windowed keys and the queries of window and session stores.

A windowed aggregation keeps its windows in a key-value store under :class:`Windowed` keys. What
makes it a window store (or a session store) for users is how it is queried, Kafka Streams'
``ReadOnlyWindowStore`` / ``ReadOnlySessionStore``: by key and a range of window start times, or
by the sessions of a key. :class:`WindowQueries` answers those queries over any source that can
list the windows of one key (or of all keys) with start times in a range; the test driver's
in-memory stores and the serving stores of a runtime both provide one.
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

#: the widest time range: what an unbounded query asks for
MIN_TIME = -(2**63)
MAX_TIME = 2**63 - 1


@dataclass(frozen=True, order=True)
class Windowed:
    """A key within a time window ``[start, end)`` (milliseconds), the key of windowed tables.
    Sliding and session windows include their end.

    >>> Windowed("mark", 0, 600_000)
    Windowed(key='mark', start=0, end=600000)
    >>> Windowed("a", 0, 4) == Windowed("a", 0, 4), Windowed("a", 0, 4) == ("a", 0, 4)
    (True, False)
    >>> sorted([Windowed("b", 0, 4), Windowed("a", 5, 9), Windowed("a", 0, 4)])[0]
    Windowed(key='a', start=0, end=4)
    """

    # Every window of a windowed aggregation is a key of several dicts (the store, its changes,
    # its index, the record cache), each hashing and comparing it: slots, a hash computed once
    # and an equality test without tuples make that a fraction of a dataclass's cost. The
    # pickled form is the dataclass's (``__getstate__``), so stored state reads either way.
    __slots__ = ("key", "start", "end", "_hash")

    key: Any
    start: int
    end: int
    if TYPE_CHECKING:  # a slot, not a field
        _hash: int | None

    def __init__(self, key: Any, start: int, end: int) -> None:
        _set_key(self, key)
        _set_start(self, start)
        _set_end(self, end)
        _set_hash(self, None)  # computed on first use: a key may be unhashable

    def __hash__(self) -> int:
        h: int | None = self._hash
        if h is None:
            h = hash((self.key, self.start, self.end))
            _set_hash(self, h)
        return h

    def __eq__(self, other: Any) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        # what the dataclass compared, ``(key, start, end)`` tuples, without building them
        # (the key compares like a tuple item: identity first)
        return (self.start == other.start and self.end == other.end
                and (self.key is other.key or bool(self.key == other.key)))

    def __getstate__(self) -> dict[str, Any]:
        return {"key": self.key, "start": self.start, "end": self.end}

    def __setstate__(self, state: dict[str, Any]) -> None:
        _set_key(self, state["key"])
        _set_start(self, state["start"])
        _set_end(self, state["end"])
        _set_hash(self, None)

    def __getitem__(self, index: int) -> Any:
        """``(key, start, end)[index]``: stores index windowed keys by their key."""
        return (self.key, self.start, self.end)[index]


# the slots' own setters: a frozen dataclass refuses setattr, and object.__setattr__ is slower
_slots: Any = vars(Windowed)
_set_key = _slots["key"].__set__
_set_start = _slots["start"].__set__
_set_end = _slots["end"].__set__
_set_hash = _slots["_hash"].__set__


#: ``windows(key or None for every key, earliest start, latest start)``: the windows with a
#: start in the range, as ``(Windowed, value)`` pairs in key order, then start order
WindowSource = Callable[[Any, int, int], Iterable[tuple[Windowed, Any]]]


def _bounds(time_from: int | None, time_to: int | None) -> tuple[int, int]:
    return (MIN_TIME if time_from is None else time_from,
            MAX_TIME if time_to is None else time_to)


class WindowQueries:
    """Queries of a window store (Kafka Streams' ``ReadOnlyWindowStore``).

    >>> rows = {Windowed("a", 0, 10): 3, Windowed("a", 10, 20): 1, Windowed("b", 0, 10): 5}
    >>> def windows(key, lo, hi):
    ...     return sorted((w, v) for w, v in rows.items()
    ...                   if (key is None or w.key == key) and lo <= w.start <= hi)
    >>> store = WindowQueries(windows)
    >>> store.fetch("a", 0, 10)
    [(0, 3), (10, 1)]
    >>> store.fetch_all(5, 15)
    [(Windowed(key='a', start=10, end=20), 1)]
    """

    def __init__(self, windows: WindowSource) -> None:
        self._windows = windows

    def fetch(self, key: Any, time_from: int | None = None,
              time_to: int | None = None) -> list[tuple[int, Any]]:
        """The windows of ``key`` whose start is in ``[time_from, time_to]``, as
        ``(window start, value)`` pairs in start order (Kafka's ``WindowStoreIterator``)."""
        if key is None:
            raise ValueError("fetch needs a key")
        lo, hi = _bounds(time_from, time_to)
        return [(w.start, v) for w, v in self._windows(key, lo, hi)]

    def fetch_windows(self, key: Any, time_from: int | None = None,
                      time_to: int | None = None) -> list[tuple[Windowed, Any]]:
        """Like :meth:`fetch`, with the whole :class:`Windowed` key of each window."""
        if key is None:
            raise ValueError("fetch needs a key")
        lo, hi = _bounds(time_from, time_to)
        return list(self._windows(key, lo, hi))

    def fetch_all(self, time_from: int | None = None,
                  time_to: int | None = None) -> list[tuple[Windowed, Any]]:
        """Every window (of every key) whose start is in ``[time_from, time_to]``, in key order,
        then start order."""
        lo, hi = _bounds(time_from, time_to)
        return list(self._windows(None, lo, hi))

    def all_windows(self) -> list[tuple[Windowed, Any]]:
        """Every window the store holds."""
        return self.fetch_all()


class SessionQueries:
    """Queries of a session store (Kafka Streams' ``ReadOnlySessionStore``): the sessions of a
    key, or those of a key that end at or after ``earliest_session_end`` and start at or
    before ``latest_session_start``.

    >>> rows = {Windowed("a", 0, 4): 2, Windowed("a", 20, 20): 1}
    >>> def windows(key, lo, hi):
    ...     return sorted((w, v) for w, v in rows.items()
    ...                   if (key is None or w.key == key) and lo <= w.start <= hi)
    >>> sessions = SessionQueries(windows)
    >>> sessions.fetch("a")
    [(Windowed(key='a', start=0, end=4), 2), (Windowed(key='a', start=20, end=20), 1)]
    >>> sessions.find_sessions("a", 5, 30)
    [(Windowed(key='a', start=20, end=20), 1)]
    """

    def __init__(self, windows: WindowSource) -> None:
        self._windows = windows

    def fetch(self, key: Any) -> list[tuple[Windowed, Any]]:
        """Every session of ``key``, in start order."""
        if key is None:
            raise ValueError("fetch needs a key")
        return list(self._windows(key, MIN_TIME, MAX_TIME))

    def find_sessions(self, key: Any, earliest_session_end: int,
                      latest_session_start: int) -> list[tuple[Windowed, Any]]:
        """The sessions of ``key`` with ``end >= earliest_session_end`` and
        ``start <= latest_session_start``."""
        if key is None:
            raise ValueError("find_sessions needs a key")
        return [(w, v) for w, v in self._windows(key, MIN_TIME, latest_session_start)
                if w.end >= earliest_session_end]

    def fetch_all(self) -> list[tuple[Windowed, Any]]:
        """Every session of every key."""
        return list(self._windows(None, MIN_TIME, MAX_TIME))


def windows_in(entries: Iterable[tuple[Any, Any]], key: Any, time_from: int,
               time_to: int) -> Iterator[tuple[Windowed, Any]]:
    """The windowed entries of ``entries`` of ``key`` (``None``: any) with a start in
    ``[time_from, time_to]``; other keys are skipped."""
    for k, v in entries:
        if (isinstance(k, Windowed) and (key is None or k.key == key)
                and time_from <= k.start <= time_to):
            yield k, v


# How a windowed key is stored as bytes, wherever stores keep bytes (the serving stores, the
# RocksDB working copies): the key, then start, then end, so that byte order sorts the windows
# of one key by start time and the windows of a key starting in a range are one range of bytes.
_LENGTH = struct.Struct(">I")
_TIMES = struct.Struct(">QQ")
_BIAS = 2**63  # times plus 2**63 are unsigned, so their bytes order like the signed times


def window_key_prefix(key: Any) -> bytes:
    """The bytes every window of ``key`` starts with."""
    data = pickle.dumps(key, protocol=5)
    return _LENGTH.pack(len(data)) + data


def encode_windowed(window: Windowed) -> bytes:
    """``window`` as bytes that sort by key, then start, then end.

    >>> decode_windowed(encode_windowed(Windowed("a", -5, 5)))
    Windowed(key='a', start=-5, end=5)
    >>> encode_windowed(Windowed("a", 9, 19)) < encode_windowed(Windowed("a", 10, 20))
    True
    """
    return window_key_prefix(window.key) + _TIMES.pack(window.start + _BIAS, window.end + _BIAS)


def decode_windowed(data: bytes) -> Windowed:
    (n,) = _LENGTH.unpack_from(data)
    start, end = _TIMES.unpack_from(data, 4 + n)
    return Windowed(pickle.loads(data[4:4 + n]), start - _BIAS, end - _BIAS)


def encoded_window_range(key: Any, time_from: int, time_to: int) -> tuple[bytes, bytes]:
    """The lowest and highest encodings of ``key``'s windows starting in
    ``[time_from, time_to]``."""
    prefix = window_key_prefix(key)
    return (prefix + struct.pack(">Q", time_from + _BIAS) + bytes(8),
            prefix + struct.pack(">Q", time_to + _BIAS) + b"\xff" * 8)
