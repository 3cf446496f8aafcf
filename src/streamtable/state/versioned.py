"""Versioned key-value stores (Kafka Streams' ``VersionedKeyValueStore``, KIP-889).

A versioned store keeps every value of a key with its validity interval ``[timestamp, next
timestamp)`` for a *history retention* period, so a key can be read as of any time within it.
It is a task store like every other (one per task, committed with the task, exactly once on
Spark): its entries are

* the key itself, holding the key's latest value as ``(value, timestamp)``, only while that
  value is not a tombstone: every reader of a plain store (a join looking a row up) reads the
  latest value unchanged;
* ``Windowed(key, valid_from, valid_to)``, holding ``(value, valid_from, task)`` for each older
  version (``value`` ``None`` for a tombstone), and ``Windowed(key, t, t)`` for a tombstone that
  is the latest version;
* ``StoreTime(task)``, holding the store's observed stream time and its history retention, so
  that a query of the task's rows (the serving store's copy included) knows which times have
  expired.

The store's *observed stream time* is the largest timestamp put into it. A put older than the
observed stream time minus the history retention (the store's grace period, as in Kafka
Streams) is refused: :meth:`VersionedKeyValueStore.put` returns
``PUT_RETURN_CODE_NOT_PUT`` and the record is counted as dropped. A query as of a time older
than that returns only a latest value old enough, never history.

Versions expire by time: each older version is filed, in a small index of the task (the
internal store ``__versioned-stores__``), under the segment of its ``valid_to`` (Kafka's
segment interval, :func:`default_segment_interval`), and once the observed stream time has
left a whole segment behind, the versions of that segment's keys are deleted; nothing else is
read. A version may therefore stay up to one segment interval after it expired, invisible to
every query, as in Kafka's segmented store.

>>> from streamtable.state import InMemoryKeyValueStore
>>> rates = VersionedKeyValueStore(InMemoryKeyValueStore("rates"),
...                                InMemoryKeyValueStore("meta"), history_retention=60_000)
>>> rates.put("EUR", 1.10, 1_000), rates.put("EUR", 1.12, 5_000)
(-1, -1)
>>> rates.put("EUR", 1.11, 3_000)            # out of order, inside the history retention
5000
>>> rates.get("EUR")
VersionedRecord(value=1.12, timestamp=5000, valid_to=None)
>>> rates.get("EUR", as_of=4_000)
VersionedRecord(value=1.11, timestamp=3000, valid_to=5000)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from streamtable.state.stores import in_range, sort_entries, with_prefix
from streamtable.state.windowed import MAX_TIME, MIN_TIME, Windowed

if TYPE_CHECKING:
    from streamtable.state.base import KeyValueStore

log = logging.getLogger(__name__)

#: what :meth:`VersionedKeyValueStore.put` returns when the value put is the key's latest
PUT_RETURN_CODE_VALID_TO_UNDEFINED = -1
#: what :meth:`VersionedKeyValueStore.put` returns when the put was refused (too old)
PUT_RETURN_CODE_NOT_PUT = MIN_TIME
#: the task store that files each versioned store's older versions by the segment they expire in
VERSIONED_META_STORE = "__versioned-stores__"


def default_segment_interval(history_retention_ms: int) -> int:
    """Kafka Streams' default segment interval of a versioned store: how much observed stream
    time passes between two deletions of expired versions.

    >>> default_segment_interval(60_000), default_segment_interval(300_000)
    (20000, 60000)
    >>> default_segment_interval(3_600_000), default_segment_interval(86_400_000)
    (300000, 3600000)
    """
    h = history_retention_ms
    if h <= 60_000:
        return max(h // 3, 2_000)
    if h <= 300_000:
        return max(h // 5, 20_000)
    if h <= 3_600_000:
        return max(h // 12, 60_000)
    return max(h // 24, 300_000)


def renamed_versioned_meta(entries: Iterable[tuple[Any, Any]],
                           renames: Mapping[str, str]) -> dict[Any, Any]:
    """The entries of ``VERSIONED_META_STORE`` that belong to the stores named in ``renames``
    (old name -> new name), under the new names: what an upgrade of the topology carries over
    with those stores.

    >>> renamed_versioned_meta([("a", frozenset({10})), ((("a", 10), "k"), True),
    ...                         ((("b", 10), "k"), True)], {"a": "rates"})
    {'rates': frozenset({10}), (('rates', 10), 'k'): True}
    """
    out: dict[Any, Any] = {}
    for key, value in entries:
        if type(key) is str:
            if key in renames:
                out[renames[key]] = value
        elif type(key) is tuple and len(key) == 2 and type(key[0]) is tuple:
            (store, end), filed = key
            if store in renames:
                out[((renames[store], end), filed)] = value
    return out


class VersionedRecord(NamedTuple):
    """A value of a versioned store with its validity interval: valid from ``timestamp``
    (inclusive) to ``valid_to`` (exclusive; ``None`` for the key's latest value, whose end is
    not known yet). Kafka Streams' ``VersionedRecord``.

    >>> VersionedRecord("a", 10, 20)
    VersionedRecord(value='a', timestamp=10, valid_to=20)
    """

    value: Any
    timestamp: int
    valid_to: int | None = None


@dataclass(frozen=True)
class StoreTime:
    """The key under which a task's versioned store keeps its observed stream time (a key of
    its own kind, never a user's).

    >>> StoreTime(2)
    StoreTime(task=2)
    """

    task: int


class VersionRows(Protocol):
    """What a versioned store's reads need from where its rows are: a task's store, the union
    of the tasks' stores, or a serving store."""

    def latest(self, key: Any) -> tuple[Any, int] | None:
        """The key's latest ``(value, timestamp)``, None when absent or deleted."""
        ...

    def history(self, key: Any, time_to: int) -> list[tuple[Windowed, tuple[Any, ...]]]:
        """The key's older versions valid from ``time_to`` or before, in any order."""
        ...

    def stream_time(self, task: int) -> tuple[int, int] | None:
        """``(observed stream time, history retention)`` of the store of ``task``."""
        ...

    def latest_entries(self) -> Iterable[tuple[Any, tuple[Any, int]]]:
        """Every key's latest ``(value, timestamp)``, in any order."""
        ...


def find_version(rows: VersionRows, key: Any, as_of: int | None) -> VersionedRecord | None:
    """The version of ``key`` valid at ``as_of`` (its latest when ``None``), by Kafka Streams'
    rules: the latest value when it is old enough; else, unless ``as_of`` is older than the
    store's history retention, the older version whose interval holds ``as_of``."""
    latest = rows.latest(key)
    if latest is not None and (as_of is None or latest[1] <= as_of):
        return VersionedRecord(latest[0], latest[1])
    if as_of is None:
        return None
    found = None
    for window, stored in rows.history(key, as_of):
        if found is None or window.start > found[0].start:
            found = (window, stored)
    if found is None:
        return None
    window, (value, valid_from, task) = found
    time = rows.stream_time(task)
    if time is not None and as_of < time[0] - time[1]:
        return None  # older than the history retention: Kafka Streams answers nothing
    if value is None or window.end <= as_of:
        return None
    return VersionedRecord(value, valid_from, window.end)


def find_versions(rows: VersionRows, key: Any, time_from: int | None,
                  time_to: int | None) -> list[VersionedRecord]:
    """The versions of ``key`` valid at some time in ``[time_from, time_to]``, oldest first
    (Kafka Streams' ``MultiVersionedKeyQuery``): tombstones are left out, and so is history
    when ``time_to`` is older than the history retention."""
    lo = MIN_TIME if time_from is None else time_from
    hi = MAX_TIME if time_to is None else time_to
    found = []
    for window, (value, valid_from, task) in rows.history(key, hi):
        time = rows.stream_time(task)
        cutoff = MIN_TIME if time is None else time[0] - time[1]
        if (value is not None and window.end > lo and window.end > cutoff and hi >= cutoff
                and window.end > window.start):
            found.append(VersionedRecord(value, valid_from, window.end))
    latest = rows.latest(key)
    if latest is not None and latest[1] <= hi:
        found.append(VersionedRecord(latest[0], latest[1]))
    found.sort(key=lambda r: r.timestamp)
    return found


def _is_version_row(key: Any) -> bool:
    return type(key) is Windowed or type(key) is StoreTime


class StoreVersionRows:
    """The rows of a versioned store kept as task store entries (one task's store, or the union
    of the tasks' stores) as :class:`VersionRows`."""

    def __init__(self, store: KeyValueStore) -> None:
        self._store = store

    def latest(self, key: Any) -> tuple[Any, int] | None:
        found = self._store.get(key)
        return None if found is None else (found[0], found[1])

    def history(self, key: Any, time_to: int) -> list[tuple[Windowed, tuple[Any, ...]]]:
        store = self._store
        out = []
        for k in store.keys_with_first(key):
            if type(k) is Windowed and k.start <= time_to and k.key == key:
                stored = store.get(k)
                if stored is not None:
                    out.append((k, stored))
        return out

    def stream_time(self, task: int) -> tuple[int, int] | None:
        found = self._store.get(StoreTime(task))
        return None if found is None else (found[0], found[1])

    def latest_entries(self) -> Iterator[tuple[Any, tuple[Any, int]]]:
        return ((k, v) for k, v in self._store.items() if not _is_version_row(k))


class ReadOnlyVersionedKeyValueStore:
    """The query view of a versioned store (``app.store(name)``, ``driver.get_key_value_store``,
    the HTTP API): ``get(key)`` is the latest value, ``get(key, as_of=ts)`` the value valid at
    ``ts``; ``get_record`` gives the whole :class:`VersionedRecord` (value, timestamp,
    valid_to); ``versions(key, time_from, time_to)`` every version valid in a time range;
    ``all``, ``range`` and ``prefix_scan`` list the latest values, in key order.

    >>> from streamtable.state import InMemoryKeyValueStore
    >>> rows = InMemoryKeyValueStore("rates")
    >>> store = VersionedKeyValueStore(rows, InMemoryKeyValueStore("meta"),
    ...                                history_retention=60_000)
    >>> _ = store.put("EUR", 1.10, 1_000), store.put("EUR", 1.12, 5_000)
    >>> view = ReadOnlyVersionedKeyValueStore(StoreVersionRows(rows), "rates")
    >>> view.get("EUR"), view.get("EUR", as_of=2_000), list(view.all())
    (1.12, 1.1, [('EUR', 1.12)])
    >>> [tuple(r) for r in view.versions("EUR")]
    [(1.1, 1000, 5000), (1.12, 5000, None)]
    """

    def __init__(self, rows: VersionRows, name: str) -> None:
        self._rows = rows
        self.name = name

    def get(self, key: Any, as_of: int | None = None) -> Any:
        """The latest value of ``key``, or with ``as_of`` its value at that time (epoch ms);
        ``None`` when there is none."""
        found = find_version(self._rows, key, as_of)
        return None if found is None else found.value

    def get_record(self, key: Any, as_of: int | None = None) -> VersionedRecord | None:
        """Like :meth:`get`, the value with its validity interval."""
        return find_version(self._rows, key, as_of)

    def get_with_timestamp(self, key: Any) -> tuple[Any, int] | None:
        return self._rows.latest(key)

    def versions(self, key: Any, time_from: int | None = None,
                 time_to: int | None = None) -> list[VersionedRecord]:
        """Every version of ``key`` valid at some time in ``[time_from, time_to]`` (either
        bound optional), oldest first; tombstones are left out."""
        return find_versions(self._rows, key, time_from, time_to)

    def _latest(self) -> list[tuple[Any, Any]]:
        return sort_entries([(k, v[0]) for k, v in self._rows.latest_entries()])

    def all(self) -> Iterator[tuple[Any, Any]]:
        return iter(self._latest())

    def range(self, from_key: Any = None, to_key: Any = None) -> Iterator[tuple[Any, Any]]:
        return in_range(self._latest(), from_key, to_key)

    def prefix_scan(self, prefix: str | bytes) -> Iterator[tuple[Any, Any]]:
        return with_prefix(self._latest(), prefix)

    def approximate_num_entries(self) -> int:
        return len(self._latest())

    def to_dict(self) -> dict[Any, Any]:
        return dict(self._latest())

    def __len__(self) -> int:
        return self.approximate_num_entries()

    def __contains__(self, key: Any) -> bool:
        return self._rows.latest(key) is not None


class VersionedKeyValueStore:
    """A task's versioned store as processors read and write it (Kafka Streams'
    ``VersionedKeyValueStore``): ``put(key, value, timestamp)``, ``delete(key, timestamp)``,
    ``get(key)`` and ``get(key, as_of)`` (see the module docstring).

    ``store`` holds the rows, ``meta`` is the task's index of versions by expiry segment;
    ``task`` names the task in the store's time row; ``on_expired`` is called for every put
    refused as too old (the task counts it as a dropped record). A processor gets one from
    ``context.get_state_store(name)`` for a store built with
    ``Stores.versioned_key_value_store_builder`` (or a versioned table's store).

    >>> from streamtable.state import InMemoryKeyValueStore
    >>> prices = VersionedKeyValueStore(InMemoryKeyValueStore("prices"),
    ...                                 InMemoryKeyValueStore("meta"), history_retention=100)
    >>> prices.put("AAPL", 190, 10), prices.put("AAPL", 191, 20), prices.put("AAPL", 189, 15)
    (-1, -1, 20)
    >>> prices.delete("AAPL", 30)
    VersionedRecord(value=191, timestamp=20, valid_to=None)
    >>> prices.get("AAPL"), prices.get("AAPL", 17)
    (None, VersionedRecord(value=189, timestamp=15, valid_to=20))
    >>> prices.put("AAPL", 1, -200) == VersionedKeyValueStore.PUT_RETURN_CODE_NOT_PUT
    True
    """

    PUT_RETURN_CODE_VALID_TO_UNDEFINED = PUT_RETURN_CODE_VALID_TO_UNDEFINED
    PUT_RETURN_CODE_NOT_PUT = PUT_RETURN_CODE_NOT_PUT

    def __init__(self, store: KeyValueStore, meta: KeyValueStore, *, history_retention: int,
                 segment_interval: int | None = None, task: int = 0,
                 on_expired: Callable[[], None] | None = None) -> None:
        if history_retention < 0:
            raise ValueError(f"versioned store {store.name!r}: the history retention must not "
                             f"be negative, not {history_retention} ms")
        self.name = store.name
        self.history_retention = history_retention
        self.segment_interval = (default_segment_interval(history_retention)
                                 if segment_interval is None else segment_interval)
        if self.segment_interval <= 0:
            raise ValueError(f"versioned store {store.name!r}: the segment interval must be "
                             f"positive, not {self.segment_interval} ms")
        self._store = store
        self._meta = meta
        self._time_key = StoreTime(task)
        self._rows = StoreVersionRows(store)
        self._on_expired = on_expired

    # -- time ------------------------------------------------------------------------------
    # Read at every operation rather than kept here: several processors of a task (a table's
    # source writing, a join reading) each have a view of one store.
    @property
    def observed_stream_time(self) -> int:
        """The largest timestamp put into the store (-1 before the first put)."""
        found = self._store.get(self._time_key)
        return -1 if found is None else int(found[0])

    def _cutoff(self, observed: int) -> int:
        """The oldest time still within the history retention."""
        return MIN_TIME if observed < 0 else observed - self.history_retention

    def _advance(self, timestamp: int) -> int:
        """Move the observed stream time to ``timestamp`` if later, deleting what leaves the
        history retention; returns the observed stream time."""
        observed = self.observed_stream_time
        if timestamp <= observed:
            return observed
        self._store.put(self._time_key, (timestamp, self.history_retention))
        self._expire(self._cutoff(timestamp))
        return timestamp

    # -- the expiry index ------------------------------------------------------------------
    def _segment_end(self, valid_to: int) -> int:
        """The first time after the segment ``valid_to`` falls in."""
        seg = self.segment_interval
        return (valid_to // seg + 1) * seg

    def _file(self, key: Any, valid_to: int) -> None:
        """Index a version of ``key`` expiring at ``valid_to``."""
        end = self._segment_end(valid_to)
        meta = self._meta
        live = meta.get(self.name) or frozenset()
        if end not in live:
            meta.put(self.name, live | {end})
        meta.put(((self.name, end), key), True)

    def _expire(self, cutoff: int) -> None:
        """Delete the versions of every segment wholly at or before ``cutoff``."""
        meta = self._meta
        live = meta.get(self.name)
        if not live:
            return
        due = sorted(end for end in live if end - 1 <= cutoff)
        if not due:
            return
        dropped = 0
        for end in due:
            for filed in meta.keys_with_first((self.name, end)):
                for window, _ in self._rows.history(filed[1], cutoff):
                    if window.end <= cutoff:
                        self._store.delete(window)
                        dropped += 1
                meta.delete(filed)
        remaining = live.difference(due)
        if remaining:
            meta.put(self.name, remaining)
        else:
            meta.delete(self.name)
        log.debug("versioned store %r: dropped %d expired versions (valid to %d or before)",
                  self.name, dropped, cutoff)

    def _keep(self, key: Any, valid_from: int, valid_to: int, value: Any) -> None:
        """Store an older version (a tombstone: ``value`` None)."""
        self._store.put(Windowed(key, valid_from, valid_to),
                        (value, valid_from, self._time_key.task))
        self._file(key, valid_to)

    # -- reading ---------------------------------------------------------------------------
    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None:
        """The latest version of ``key`` or, with ``as_of``, the version valid at that time
        (``None`` when there is none, or when ``as_of`` is older than the history retention
        and the latest version is newer than it)."""
        if key is None:
            raise ValueError(f"versioned store {self.name!r}: a key must not be None")
        return find_version(self._rows, key, as_of)

    def versions(self, key: Any, time_from: int | None = None,
                 time_to: int | None = None) -> list[VersionedRecord]:
        """Every version of ``key`` valid at some time in ``[time_from, time_to]``, oldest
        first (tombstones left out)."""
        return find_versions(self._rows, key, time_from, time_to)

    def expired(self, as_of: int) -> bool:
        """Whether ``as_of`` is older than the history retention: a read as of it sees only a
        latest value old enough."""
        return as_of < self._cutoff(self.observed_stream_time)

    # -- writing ---------------------------------------------------------------------------
    def put(self, key: Any, value: Any, timestamp: int) -> int:
        """Put ``value`` (``None``: a tombstone) as the version of ``key`` from ``timestamp``
        on, replacing one at the same timestamp. Returns the put version's ``valid_to``:
        ``PUT_RETURN_CODE_VALID_TO_UNDEFINED`` (-1) when it is the latest,
        ``PUT_RETURN_CODE_NOT_PUT`` when ``timestamp`` is older than the observed stream time
        minus the history retention (the put is dropped and counted)."""
        if key is None:
            raise ValueError(f"versioned store {self.name!r}: a key must not be None")
        if type(key) is Windowed or type(key) is StoreTime:
            raise TypeError(f"versioned store {self.name!r}: a key may not be a "
                            f"{type(key).__name__} (a versioned store's own row)")
        observed = self.observed_stream_time
        if timestamp < self._cutoff(observed):
            log.warning("versioned store %r: skipping the put of key %r at %d, older than the "
                        "history retention (observed stream time %d, retention %d ms)",
                        self.name, key, timestamp, observed, self.history_retention)
            if self._on_expired is not None:
                self._on_expired()
            return PUT_RETURN_CODE_NOT_PUT
        observed = self._advance(timestamp)
        return self._put(key, value, timestamp, self._cutoff(observed))

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        """Put a tombstone at ``timestamp``; returns the version that was valid then (``None``
        when there was none, or when the delete was refused as too old)."""
        if key is None:
            raise ValueError(f"versioned store {self.name!r}: a key must not be None")
        if timestamp < self._cutoff(self.observed_stream_time):
            self.put(key, None, timestamp)  # refused: logged and counted there
            return None
        existing = find_version(self._rows, key, timestamp)
        self.put(key, None, timestamp)
        return existing

    def _put(self, key: Any, value: Any, t: int, cutoff: int) -> int:
        store = self._store
        latest = store.get(key)
        if latest is not None and t >= latest[1]:
            # the new latest version: the old one becomes history, valid until t (a
            # tombstone is then recorded by that end alone, as in Kafka's store)
            if t > latest[1] and t > cutoff:
                self._keep(key, latest[1], t, latest[0])
            if value is None:
                store.delete(key)
                if t == latest[1]:
                    # a tombstone replacing the latest value at its own timestamp is kept as
                    # a tombstone (Kafka's store forgets it when no older version ends there,
                    # and a later, older put then reads as the latest)
                    self._keep(key, t, t, None)
            else:
                store.put(key, (value, t))
            return PUT_RETURN_CODE_VALID_TO_UNDEFINED
        history = sorted(self._rows.history(key, MAX_TIME), key=lambda e: e[0].start)
        before = None  # the version starting last before t
        after = None if latest is None else latest[1]  # the start of the first one after t
        for window, stored in history:
            if window.start == t:
                return self._replace(key, window, stored, value)
            if window.start < t:
                before = (window, stored)
            elif after is None or window.start < after:
                after = window.start
        ends_at_t = False  # whether the version before t ends at t (which records t)
        if before is not None:
            window, (old, valid_from, _) = before
            if window.end > t:  # t falls inside it: split it
                store.delete(window)
                self._keep(key, valid_from, t, old)
                self._keep(key, t, window.end, value)
                return window.end
            if window.end == window.start:  # the latest tombstone: it now ends at t
                store.delete(window)
                self._keep(key, valid_from, t, None)
                ends_at_t = True
            else:
                ends_at_t = window.end == t
        if after is not None:
            self._keep(key, t, after, value)
            return after
        # newer than every version: the latest
        if value is not None:
            store.put(key, (value, t))
        elif not ends_at_t:
            self._keep(key, t, t, None)
        return PUT_RETURN_CODE_VALID_TO_UNDEFINED

    def _replace(self, key: Any, window: Windowed, stored: tuple[Any, ...], value: Any) -> int:
        """A put at the timestamp of an older version (or of the latest tombstone)."""
        if window.end == window.start:  # the latest tombstone
            if value is not None:
                self._store.delete(window)
                self._store.put(key, (value, window.start))
            return PUT_RETURN_CODE_VALID_TO_UNDEFINED
        self._store.put(window, (value, *stored[1:]))
        return window.end
