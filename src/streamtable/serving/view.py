"""What every serving store shares: the read-only view of one store over encoded rows, and how a
batch's changes split into deletions and upserts.

A serving store keeps one row per ``(store, key)``: the key and the ``(value, timestamp)`` pair in
the encoding of :mod:`streamtable.serving.codec`, and the task (partition) that holds the key. It
answers the four reads of :class:`StoreRows`; :class:`StoreView` decodes and orders them the way
the in-memory stores do (``streamtable.state.stores``), whatever database holds the rows.

>>> from streamtable.serving.codec import encode_key, encode_value
>>> class Rows:
...     rows = {encode_key(k): (encode_value((v, 10)), 0) for k, v in {"b": 2, "a": 1}.items()}
...     def read_value(self, store, key): return self.rows.get(key, (None,))[0]
...     def read_rows(self, store): return [(k, v) for k, (v, _) in self.rows.items()]
...     def read_task_keys(self, store, task):
...         return [k for k, (_, t) in self.rows.items() if t == task]
...     def count_rows(self, store): return len(self.rows)
>>> view = StoreView(Rows(), "counts")
>>> list(view.all()), view.get_with_timestamp("b"), view.keys_of_task(0)
([('a', 1), ('b', 2)], (2, 10), ['a', 'b'])
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from streamtable.serving.base import StoreChange
from streamtable.serving.codec import (
    all_windows_range,
    decode_key,
    decode_value,
    encode_key,
    is_windowed,
    window_key_range,
)
from streamtable.state.stores import in_range, sort_entries, sorted_keys, with_prefix
from streamtable.state.versioned import ReadOnlyVersionedKeyValueStore, StoreTime
from streamtable.state.windowed import MIN_TIME, SessionQueries, Windowed, WindowQueries

__all__ = ["SessionStoreView", "StoreRows", "StoreView", "VersionedStoreView", "WindowStoreView",
           "split_changes", "store_view"]


class StoreRows(Protocol):
    """The reads a serving store answers, in encoded form (keys and values as the codec's
    bytes)."""

    def read_value(self, store: str, key: bytes) -> bytes | None:
        """The encoded ``(value, timestamp)`` of one encoded key, None when absent."""
        ...

    def read_rows(self, store: str) -> list[tuple[bytes, bytes]]:
        """Every ``(encoded key, encoded (value, timestamp))`` of a store, in any order."""
        ...

    def read_task_keys(self, store: str, task: int) -> list[bytes]:
        """The encoded keys one task holds, in any order."""
        ...

    def read_key_range(self, store: str, low: bytes, high: bytes) -> list[tuple[bytes, bytes]]:
        """The ``(encoded key, encoded (value, timestamp))`` rows with ``low <= key <= high``
        (bytewise), in key order."""
        ...

    def count_rows(self, store: str) -> int: ...


def split_changes(
    changes: Iterable[StoreChange],
) -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes, bytes, int]]]:
    """A batch's changes as ``(store, key)`` deletions and ``(store, key, value, task)`` upserts,
    each in the batch's order. A serving store applies the deletions first, then the upserts.

    >>> split_changes([("s", b"k1", b"v", 0), ("s", b"k2", None, 1)])
    ([('s', b'k2')], [('s', b'k1', b'v', 0)])
    """
    deletes: list[tuple[str, bytes]] = []
    upserts: list[tuple[str, bytes, bytes, int]] = []
    for store, key, value, task in changes:
        if value is None:
            deletes.append((store, key))
        else:
            upserts.append((store, key, value, task))
    return deletes, upserts


class StoreView:
    """Read-only queries of one store, like Kafka Streams' ``ReadOnlyKeyValueStore``:
    ``get``, ``all``, ``range``, ``prefix_scan``, ``approximate_num_entries``.

    Iteration is in key order (``streamtable.state.stores.key_order``); each call reads what the
    serving store holds at that moment (one query, so one batch's changes are seen whole or not at
    all)."""

    def __init__(self, serving: StoreRows, name: str) -> None:
        self._serving = serving
        self.name = name

    def get(self, key: Any) -> Any:
        found = self.get_with_timestamp(key)
        return None if found is None else found[0]

    def get_with_timestamp(self, key: Any) -> tuple[Any, int] | None:
        data = self._serving.read_value(self.name, encode_key(key))
        # a store keeping headers (dsl.store.format=headers) holds them third: queries show
        # values and timestamps, as Kafka Streams' store() does
        return None if data is None else decode_value(data)[:2]

    def _rows(self) -> list[tuple[Any, Any]]:
        items = [(decode_key(k), decode_value(v)[0])
                 for k, v in self._serving.read_rows(self.name)]
        return sort_entries(items)

    def all(self) -> Iterator[tuple[Any, Any]]:
        return iter(self._rows())

    def range(self, from_key: Any = None, to_key: Any = None) -> Iterator[tuple[Any, Any]]:
        return in_range(self._rows(), from_key, to_key)

    def prefix_scan(self, prefix: str | bytes) -> Iterator[tuple[Any, Any]]:
        return with_prefix(self._rows(), prefix)

    def keys_of_task(self, task: int) -> list[Any]:
        """Keys held by one task (partition): how work such as emails is sharded."""
        keys = self._serving.read_task_keys(self.name, task)
        return sorted_keys(decode_key(k) for k in keys)

    def approximate_num_entries(self) -> int:
        return self._serving.count_rows(self.name)

    def to_dict(self) -> dict[Any, Any]:
        return dict(self._rows())

    def __len__(self) -> int:
        return self.approximate_num_entries()


class ServingWindows:
    """The windows of a serving store's windowed keys, for the window and session queries: the
    windows of one key come from one scan of a range of encoded keys."""

    def __init__(self, serving: StoreRows, name: str) -> None:
        self._serving = serving
        self._name = name

    def __call__(self, key: Any, time_from: int, time_to: int) -> list[tuple[Windowed, Any]]:
        low, high = all_windows_range() if key is None else window_key_range(key, time_from,
                                                                              time_to)
        found = []
        for k, v in self._serving.read_key_range(self._name, low, high):
            wkey = decode_key(k)
            if time_from <= wkey.start <= time_to:
                found.append((wkey, decode_value(v)[0]))
        return found if key is not None else sort_entries(found)


class WindowStoreView(StoreView, WindowQueries):
    """A window store of a serving store: the key-value reads of :class:`StoreView` (keys are
    ``Windowed``) and Kafka Streams' window queries, ``fetch(key, time_from, time_to)`` and
    ``fetch_all(time_from, time_to)``."""

    def __init__(self, serving: StoreRows, name: str) -> None:
        StoreView.__init__(self, serving, name)
        WindowQueries.__init__(self, ServingWindows(serving, name))


class SessionStoreView(StoreView, SessionQueries):
    """A session store of a serving store: the key-value reads of :class:`StoreView` and
    Kafka Streams' session queries, ``fetch(key)`` and ``find_sessions(key, earliest_end,
    latest_start)``."""

    def __init__(self, serving: StoreRows, name: str) -> None:
        StoreView.__init__(self, serving, name)
        SessionQueries.__init__(self, ServingWindows(serving, name))


class ServingVersionRows:
    """A versioned store's rows in a serving store (``state.versioned``'s layout: a key's latest
    value under the key, its older versions under ``Windowed(key, valid_from, valid_to)``, each
    task's stream time under ``StoreTime(task)``), as
    :class:`~streamtable.state.versioned.VersionRows`: a key's versions are one range of
    encoded keys."""

    def __init__(self, serving: StoreRows, name: str) -> None:
        self._serving = serving
        self._name = name

    def _get(self, key: Any) -> Any:
        data = self._serving.read_value(self._name, encode_key(key))
        return None if data is None else decode_value(data)

    def latest(self, key: Any) -> tuple[Any, int] | None:
        return self._get(key)  # type: ignore[no-any-return]

    def history(self, key: Any, time_to: int) -> list[tuple[Windowed, tuple[Any, ...]]]:
        low, high = window_key_range(key, MIN_TIME, time_to)
        return [(decode_key(k), decode_value(v))
                for k, v in self._serving.read_key_range(self._name, low, high)]

    def stream_time(self, task: int) -> tuple[int, int] | None:
        return self._get(StoreTime(task))  # type: ignore[no-any-return]

    def latest_entries(self) -> list[tuple[Any, tuple[Any, int]]]:
        rows = []
        for k, v in self._serving.read_rows(self._name):
            if is_windowed(k):  # an older version
                continue
            key = decode_key(k)
            if type(key) is not StoreTime:
                rows.append((key, decode_value(v)))
        return rows


class VersionedStoreView(ReadOnlyVersionedKeyValueStore):
    """A versioned store of a serving store: ``get(key)`` the latest value, ``get(key,
    as_of=ts)`` the value valid at ``ts``, ``get_record``, ``versions``, and ``all``,
    ``range``, ``prefix_scan`` over the latest values (see
    :class:`~streamtable.state.versioned.ReadOnlyVersionedKeyValueStore`)."""

    def __init__(self, serving: StoreRows, name: str) -> None:
        super().__init__(ServingVersionRows(serving, name), name)
        self._serving = serving

    def keys_of_task(self, task: int) -> list[Any]:
        """The keys with a latest value held by one task (partition)."""
        keys = (decode_key(k) for k in self._serving.read_task_keys(self.name, task)
                if not is_windowed(k))
        return sorted_keys(k for k in keys if type(k) is not StoreTime)


def store_view(serving: StoreRows, name: str,
               kind: str = "key-value") -> StoreView | VersionedStoreView:
    """The view of one store of a serving store, with the queries its kind of store answers
    (``key-value``, ``window``, ``session`` or ``versioned``)."""
    if kind == "window":
        return WindowStoreView(serving, name)
    if kind == "session":
        return SessionStoreView(serving, name)
    if kind == "versioned":
        return VersionedStoreView(serving, name)
    return StoreView(serving, name)
