"""Key-value stores.

Every store the DSL creates holds ``(value, timestamp)`` pairs, like Kafka Streams' timestamped
stores. Users query them through :class:`ReadOnlyKeyValueStore`, which shows values only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any

from streamtable.errors import TopologyError
from streamtable.state.timestamped import ValueTimestampHeaders
from streamtable.state.windowed import SessionQueries, Windowed, WindowQueries, windows_in

if TYPE_CHECKING:
    from streamtable.state.base import KeyValueStore
    from streamtable.state.spec import StoreSpec

# window and session stores hold their windows under Windowed keys: key-value stores that are
# queried by key and time range; versioned stores hold their older versions that way too
SUPPORTED_KINDS = ("key-value", "window", "session", "versioned")


class _ExpiredUpTo:
    """The type of :data:`EXPIRED_UP_TO` (one object, also after a pickle's round trip)."""

    __slots__ = ()

    def __reduce__(self) -> str:
        return "EXPIRED_UP_TO"

    def __repr__(self) -> str:
        return "EXPIRED_UP_TO"


#: The key under which a store's changes record an expiry: ``{EXPIRED_UP_TO: t}`` deletes every
#: key that :func:`expired_by` ``t`` (a join window's records past their retention): one entry
#: for a whole expiry instead of a deletion per record, as Kafka Streams drops a window
#: store's segment without changelog records. A restore applies it before the other entries.
EXPIRED_UP_TO = _ExpiredUpTo()

_INT64 = 2**63


def all_int64(items: Iterable[Any]) -> bool:
    """Whether every item is an int of 64 bits.

    >>> all_int64((1, -2**63)), all_int64((1, 2**63)), all_int64((1, True))
    (True, False, False)
    """
    return all(type(i) is int and -_INT64 <= i < _INT64 for i in items)


def expired_by(key: Any, up_to: int) -> bool:
    """Whether an expiry up to ``up_to`` deletes ``key``: a tuple ``(first, second, *ints)``
    whose elements after the first are 64-bit ints, with ``second <= up_to``.

    >>> expired_by(("k", 5, 0), 5), expired_by(("k", 6, 0), 5), expired_by(("k", 5, "x"), 5)
    (True, False, False)
    """
    return bool(expired_keys((key,), up_to))


def expired_keys(keys: Iterable[Any], up_to: int) -> list[Any]:
    """The keys of ``keys`` that an expiry up to ``up_to`` deletes (:func:`expired_by`), one
    check inline per key: a call per key made the scan twice as long (a restore scans a whole
    join window store with it: a quarter of a worker's catch-up in Nexmark q4).

    >>> expired_keys([("k", 5, 0), ("k", 6, 0), ("k", 5, "x"), (None,), "k"], 5)
    [('k', 5, 0)]
    """
    low = -_INT64
    return [k for k in keys if type(k) is tuple and len(k) > 1 and type(k[1]) is int
            and low <= k[1] <= up_to and k[1] < _INT64
            and (type(k[2]) is int and low <= k[2] < _INT64 if len(k) == 3  # (key, ts, seq)
                 else all_int64(k[2:]))]


def check_store_kind(spec: StoreSpec) -> None:
    """Raise for a store kind these stores cannot hold."""
    if spec.kind not in SUPPORTED_KINDS:
        raise TopologyError(
            f"store {spec.name!r} is a {spec.kind!r} store; supported kinds: {SUPPORTED_KINDS}"
        )


def key_order(key: Any) -> tuple[Any, ...]:
    """Sort key for store iteration: keys of one type in their natural order, types apart.

    Kafka Streams orders by serialized bytes; for strings (the common case) that is the same
    order as Python's, and it keeps integers numeric.

    >>> sorted([Windowed("b", 0, 1), ("a", 2), "z", 3, b"x", Windowed("a", 5, 6)], key=key_order)
    [3, 'z', b'x', ('a', 2), Windowed(key='a', start=5, end=6), Windowed(key='b', start=0, end=1)]
    """
    # the common exact types first (one type() instead of a chain of isinstance checks)
    t = type(key)
    if t is str:
        return (2, key)
    if t is Windowed:
        return (5, key_order(key.key), key.start, key.end)
    if t is int or t is float:
        return (1, key)
    if isinstance(key, (int, float)) and not isinstance(key, bool):
        return (1, key)
    if isinstance(key, str):
        return (2, key)
    if isinstance(key, bytes):
        return (3, key)
    if isinstance(key, tuple):
        return (4, tuple(key_order(k) for k in key))
    if isinstance(key, Windowed):
        return (5, key_order(key.key), key.start, key.end)
    return (9, type(key).__name__, repr(key))


# key types whose own order is their key_order (among keys all of that one type)
_SELF_ORDERED = frozenset({str, bytes, int})
_first = itemgetter(0)
_second = itemgetter(1)
_start_end = attrgetter("start", "end")


def _entry_order(entry: tuple[Any, Any]) -> tuple[Any, ...]:
    return key_order(entry[0])


def sort_entries(entries: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Sort ``(key, value)`` entries in place by their keys' :func:`key_order`, and return
    them. Keys all of one plain type (``str``, ``bytes`` or ``int``: the common case) sort by
    themselves, without a Python call per key.

    >>> sort_entries([("b", 1), ("a", 2)]), sort_entries([(2, "x"), ("a", "y"), (1, "z")])
    ([('a', 2), ('b', 1)], [(1, 'z'), (2, 'x'), ('a', 'y')])
    """
    kinds = set(map(type, map(_first, entries)))
    if len(kinds) == 1 and kinds <= _SELF_ORDERED:
        entries.sort(key=_first)
    else:
        entries.sort(key=_entry_order)
    return entries


def sorted_keys(keys: Iterable[Any]) -> list[Any]:
    """``keys`` in :func:`key_order` (keys of one plain type sort by themselves).

    >>> sorted_keys(["b", "a"]), sorted_keys([Windowed("b", 0, 1), Windowed("a", 5, 6)])[0]
    (['a', 'b'], Windowed(key='a', start=5, end=6))
    """
    keys = list(keys)
    kinds = set(map(type, keys))
    if len(kinds) == 1 and kinds <= _SELF_ORDERED:
        keys.sort()
    else:
        keys.sort(key=key_order)
    return keys


class _Plain:
    """What the index files a key that is neither a tuple nor windowed under (no
    ``keys_with_first`` asks for it)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<plain keys>"


_PLAIN = _Plain()


def first_of(key: Any) -> Any:
    """``key[0]``: the first element of a tuple key, the key of a windowed key; a key of
    another kind (a versioned store's plain keys) is filed apart.

    >>> first_of(("AAPL", 1)), first_of(Windowed("a", 0, 5)), first_of("AAPL")
    ('AAPL', 'a', <plain keys>)
    """
    t = type(key)
    if t is Windowed:
        return key.key
    if t is tuple or isinstance(key, tuple):
        return key[0] if key else _PLAIN
    return _PLAIN


def file_by_first(index: dict[Any, set[Any]], key: Any) -> None:
    """Add a tuple or windowed ``key`` to ``index`` under its first element (a plain key is
    never asked for by ``keys_with_first``: it is left out).

    >>> index = {}; file_by_first(index, ("AAPL", 1)); file_by_first(index, "x"); index
    {'AAPL': {('AAPL', 1)}}
    """
    first = first_of(key)
    if first is not _PLAIN:
        index.setdefault(first, set()).add(key)


def in_range(items: Iterable[tuple[Any, Any]], from_key: Any = None,
             to_key: Any = None) -> Iterator[tuple[Any, Any]]:
    """The entries of key-ordered ``items`` with ``from_key <= key <= to_key`` (a ``None``
    bound is open)."""
    lo = None if from_key is None else key_order(from_key)
    hi = None if to_key is None else key_order(to_key)
    for k, v in items:
        ko = key_order(k)
        if (lo is None or ko >= lo) and (hi is None or ko <= hi):
            yield k, v


def with_prefix(items: Iterable[tuple[Any, Any]],
                prefix: str | bytes) -> Iterator[tuple[Any, Any]]:
    """The entries of ``items`` whose key (of the prefix's type) starts with ``prefix``."""
    for k, v in items:
        if isinstance(k, type(prefix)) and k.startswith(prefix):  # type: ignore[arg-type]
            yield k, v


class InMemoryKeyValueStore:
    """A dict-backed store. With ``track_changes`` it remembers which keys changed since the last
    :meth:`drain_changes`, so a runtime can persist exactly the delta of a commit.

    >>> s = InMemoryKeyValueStore("counts")
    >>> s.put("a", (1, 10)); s.get("a")
    (1, 10)
    """

    def __init__(self, name: str, track_changes: bool = False) -> None:
        self.name = name
        self._data: dict[Any, Any] = {}
        self.track_changes = track_changes
        self._changes: dict[Any, Any] = {}
        # tuple and windowed keys by their first element, built on first use (for prefix lookups)
        self._index: dict[Any, set[Any]] | None = None
        # how many deltas were applied by :meth:`restore` (an index kept over the store by its
        # operators is in step with it while this stays the same)
        self.restores = 0

    def get(self, key: Any) -> Any:
        return self._data.get(key)

    def put(self, key: Any, value: Any) -> None:
        if value is None:
            self.delete(key)
            return
        data = self._data
        if self._index is None:
            data[key] = value
        else:
            n = len(data)
            data[key] = value
            if len(data) != n:  # a new key (an update leaves the index as it is)
                file_by_first(self._index, key)
        if self.track_changes:
            self._changes[key] = value

    def delete(self, key: Any) -> Any:
        old = self._data.pop(key, None)
        if self.track_changes:
            self._changes[key] = None
        if self._index is not None and old is not None:
            self._unindex(key)
        return old

    def _unindex(self, key: Any) -> None:
        assert self._index is not None
        first = first_of(key)
        keys = self._index.get(first)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._index[first]

    def keys_with_first(self, first: Any) -> list[Any]:
        """The tuple keys whose first element is ``first`` (e.g. all ``(fk, pk)`` of one fk),
        in key order.

        >>> s = InMemoryKeyValueStore("subs"); s.put(("AAPL", 1), "h"); s.put(("FB", 2), "h")
        >>> s.keys_with_first("AAPL")
        [('AAPL', 1)]
        """
        if self._index is None:
            index: dict[Any, set[Any]] = {}
            for k in self._data:
                file_by_first(index, k)
            self._index = index
        keys = self._index.get(first)
        if not keys:
            return []
        if all(type(k) is Windowed for k in keys):
            # windows of one key: their key order is their order by start, then end
            return sorted(keys, key=_start_end)
        if (all(type(k) is tuple and len(k) == 2 for k in keys)
                and len(seconds := set(map(type, map(_second, keys)))) == 1
                and seconds <= _SELF_ORDERED):
            # pairs with one first element and second elements of one plain type
            return sorted(keys, key=_second)
        return sorted(keys, key=key_order)

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(self._data.items())

    def __len__(self) -> int:
        return len(self._data)

    def delete_expired(self, keys: Iterable[Any], up_to: int) -> None:
        """Delete ``keys``: every key of the store that :func:`expired_by` ``up_to`` (a join
        window's expired records, which its owner keeps an index of), recorded as one change,
        :data:`EXPIRED_UP_TO`.

        >>> s = InMemoryKeyValueStore("w", track_changes=True)
        >>> s.put(("k", 5, 0), ("v", 5)); s.put(("k", 9, 0), ("v", 9))
        >>> s.delete_expired([("k", 5, 0)], 6); s.drain_changes()
        {('k', 9, 0): ('v', 9), EXPIRED_UP_TO: 6}
        """
        data, changes = self._data, self._changes
        for k in keys:
            if data.pop(k, None) is not None and self._index is not None:
                self._unindex(k)
            if self.track_changes:
                changes.pop(k, None)
        if self.track_changes and up_to > changes.get(EXPIRED_UP_TO, up_to - 1):
            changes[EXPIRED_UP_TO] = up_to

    def drain_changes(self) -> dict[Any, Any]:
        """Return and forget the keys written since the last call (``None`` = deleted)."""
        changes, self._changes = self._changes, {}
        return changes

    def restore(self, items: dict[Any, Any], fresh: bool = False) -> None:
        """Apply a delta (``None`` deletes) without recording it as a change (``fresh``: the
        keys are known to be absent). Entries a RocksDB copy wrote as it keeps them
        (:class:`~streamtable.state.rocksdb.EncodedEntries`, a snapshot's) are decoded."""
        decoded = getattr(items, "decoded", None)
        if decoded is not None:
            items = decoded()
        data = self._data
        up_to = items.get(EXPIRED_UP_TO)
        if up_to is not None:
            for k in expired_keys(data, up_to):
                del data[k]
        for k, v in items.items():
            if v is None:
                data.pop(k, None)
            elif k is not EXPIRED_UP_TO:
                data[k] = v
        self._index = None
        self.restores += 1


class InMemoryStoreBackend:
    """The :class:`~streamtable.state.base.StoreBackend` of the test driver: plain in-memory
    stores, kept by name so that tests can query them.

    >>> from streamtable.state.spec import StoreSpec
    >>> backend = InMemoryStoreBackend()
    >>> backend.create(StoreSpec("counts"), 0) is backend.stores["counts"]
    True
    """

    def __init__(self) -> None:
        self.stores: dict[str, InMemoryKeyValueStore] = {}

    def create(self, spec: StoreSpec, task_id: int) -> InMemoryKeyValueStore:
        check_store_kind(spec)
        store = self.stores[spec.name] = InMemoryKeyValueStore(spec.name)
        return store


class TaskStoresView:
    """One store of a sub-topology as the union of its tasks' stores (each task holds the keys
    of its own partition), read-only: what a batch host's stores look like to a query.

    >>> a = InMemoryKeyValueStore("s"); a.put("x", (1, 0))
    >>> b = InMemoryKeyValueStore("s"); b.put("y", (2, 0))
    >>> view = TaskStoresView("s", lambda: [a, b])
    >>> view.get("y"), len(view), sorted(view.items())
    ((2, 0), 2, [('x', (1, 0)), ('y', (2, 0))])
    """

    def __init__(self, name: str, stores: Callable[[], list[KeyValueStore]]) -> None:
        self.name = name
        self._stores = stores  # the tasks' stores as they are now

    def get(self, key: Any) -> Any:
        for store in self._stores():
            if (found := store.get(key)) is not None:
                return found
        return None

    def put(self, key: Any, value: Any) -> None:
        raise TypeError(f"store {self.name!r} is read-only here")

    def delete(self, key: Any) -> Any:
        raise TypeError(f"store {self.name!r} is read-only here")

    def items(self) -> Iterator[tuple[Any, Any]]:
        for store in self._stores():
            yield from store.items()

    def keys_with_first(self, first: Any) -> list[Any]:
        keys = [k for store in self._stores() for k in store.keys_with_first(first)]
        return sorted_keys(keys)

    def __len__(self) -> int:
        return sum(len(store) for store in self._stores())


class ReadOnlyKeyValueStore:
    """The query view of a store: ``get``, ``all``, ``range``, ``prefix_scan``,
    ``approximate_num_entries``. Iteration is in key order.

    >>> s = InMemoryKeyValueStore("s"); s.put("b", (2, 0)); s.put("a", (1, 0))
    >>> view = ReadOnlyKeyValueStore(s)
    >>> list(view.all())
    [('a', 1), ('b', 2)]
    >>> view.get("b")
    2
    """

    def __init__(self, store: KeyValueStore, timestamped: bool = False,
                 headers: bool = False) -> None:
        self._store = store
        self._timestamped = timestamped
        self._headers = headers
        self.name = store.name

    def _show(self, stored: Any) -> Any:
        if stored is None:
            return None
        if self._headers:
            return ValueTimestampHeaders.of_stored(stored)
        # a store keeping headers holds them third (dsl.store.format=headers)
        return stored[:2] if self._timestamped else stored[0]

    def get(self, key: Any) -> Any:
        return self._show(self._store.get(key))

    def all(self) -> Iterator[tuple[Any, Any]]:
        entries = sort_entries(list(self._store.items()))
        if self._timestamped or self._headers:
            show = self._show
            return ((k, show(v)) for k, v in entries)
        return ((k, v[0]) for k, v in entries)  # a store holds no None

    def range(self, from_key: Any = None, to_key: Any = None) -> Iterator[tuple[Any, Any]]:
        """Entries with ``from_key <= key <= to_key`` (either bound may be ``None``)."""
        return in_range(self.all(), from_key, to_key)

    def prefix_scan(self, prefix: str | bytes) -> Iterator[tuple[Any, Any]]:
        return with_prefix(self.all(), prefix)

    def approximate_num_entries(self) -> int:
        return len(self._store)

    def __len__(self) -> int:
        return len(self._store)

    def __contains__(self, key: Any) -> bool:
        return self._store.get(key) is not None

    def to_dict(self) -> dict[Any, Any]:
        """All entries as a dict (handy in tests)."""
        return dict(self.all())


class InMemoryWindows:
    """The windows of an in-memory store, for :class:`WindowQueries` / :class:`SessionQueries`:
    those of one key come from the store's index of keys, in start order."""

    def __init__(self, store: KeyValueStore, timestamped: bool = False) -> None:
        self._store = store
        self._timestamped = timestamped

    def __call__(self, key: Any, time_from: int, time_to: int) -> list[tuple[Windowed, Any]]:
        store = self._store
        if key is None:
            entries: Iterable[tuple[Any, Any]] = store.items()
        else:
            entries = ((k, store.get(k)) for k in store.keys_with_first(key))
        found = sorted(windows_in(entries, key, time_from, time_to),
                       key=lambda kv: key_order(kv[0]))
        if self._timestamped:
            return [(k, v[:2]) for k, v in found]
        return [(k, v[0]) for k, v in found]


class ReadOnlyWindowStore(WindowQueries):
    """The query view of a window store: ``fetch(key, time_from, time_to)`` gives
    ``(window start, value)`` pairs, ``fetch_all(time_from, time_to)`` ``(Windowed, value)``
    pairs; ``get(Windowed)`` one window.

    >>> s = InMemoryKeyValueStore("w"); s.put(Windowed("a", 10, 20), (2, 15))
    >>> ReadOnlyWindowStore(s).fetch("a", 0, 10)
    [(10, 2)]
    """

    def __init__(self, store: KeyValueStore, timestamped: bool = False) -> None:
        super().__init__(InMemoryWindows(store, timestamped))
        self._view = ReadOnlyKeyValueStore(store, timestamped)
        self.name = store.name

    def get(self, window: Windowed) -> Any:
        return self._view.get(window)

    def __len__(self) -> int:
        return len(self._view)


class ReadOnlySessionStore(SessionQueries):
    """The query view of a session store: ``fetch(key)`` and
    ``find_sessions(key, earliest_session_end, latest_session_start)``, as
    ``(Windowed, value)`` pairs.

    >>> s = InMemoryKeyValueStore("s"); s.put(Windowed("a", 0, 4), (2, 4))
    >>> ReadOnlySessionStore(s).fetch("a")
    [(Windowed(key='a', start=0, end=4), 2)]
    """

    def __init__(self, store: KeyValueStore, timestamped: bool = False) -> None:
        super().__init__(InMemoryWindows(store, timestamped))
        self.name = store.name
        self._store = store

    def __len__(self) -> int:
        return len(self._store)
