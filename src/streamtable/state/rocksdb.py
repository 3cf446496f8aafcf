"""A task's working copy in RocksDB (through ``rocksdict``): state bounded by disk, not by the
Python worker's heap, and kept on the machine's disk across batches and restarts.

The durable state stays where the task-state persistence keeps it (deltas and snapshots on the
shared location); this is the local copy a worker processes against, as Kafka Streams keeps
RocksDB beside its changelog topics. A batch's writes stay in a small overlay (the changes the
commit persists) and reach RocksDB at the commit, in write batches of at most
:data:`WRITE_BATCH_BYTES`: the last one writes the copy's version, the ones before it a version
that matches no durable state (a copy a crash left between them is rebuilt); reads of the batch
go overlay first. The copy records which durable file it reflects (batch and
nonce), so the persistence checks it like an in-memory copy and catches it up or rebuilds it.

Each task keeps its copies under ``<directory>/slot-<n>``. RocksDB locks a database to one
process, so a Python worker takes the first slot no other live process holds, starting with the
slot committed last (named in ``latest``). A copy is closed after its commit (see
:meth:`~streamtable.state.persistence.FileTaskStatePersistence.checkin`), so whichever worker
runs the task next opens that slot up to date; another slot is opened, and caught up from the
durable deltas, only while another process holds it. A restarted worker finds its slots on
disk with the state they had.

A store's int-keyed entries of one first element, ``(key, timestamp, seq)`` in a join's window
store, lie in RocksDB in the order of their ints, so a key's time range is one range of
RocksDB's keys (:meth:`RocksDBKeyValueStore.range_with_first`).

>>> import tempfile
>>> copy = RocksDBTaskState.open(tempfile.mkdtemp())
>>> copy.store("counts").put("a", (1, 0))
>>> copy.store("counts").drain_changes()
{'a': (1, 0)}
>>> copy.flush(); copy.store("counts").get("a")
(1, 0)
>>> copy.close()
"""

from __future__ import annotations

import itertools
import logging
import os
import pickle
import shutil
import struct
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from streamtable.state.stores import (
    EXPIRED_UP_TO,
    all_int64,
    expired_keys,
    file_by_first,
    sorted_keys,
)
from streamtable.state.task_state import TaskState
from streamtable.state.windowed import (
    Windowed,
    decode_windowed,
    encode_windowed,
    window_key_prefix,
)

log = logging.getLogger(__name__)

_META = b"\x00meta"
_PROTOCOL = 5
MAX_SLOTS = 16


#: how this version lays keys out (kept with a copy: a copy of another layout is rebuilt). Durable
#: too: a snapshot of a copy holds its keys so (:class:`EncodedEntries`), so a new layout keeps
#: the decoding of this one in ``_KEY_DECODERS``
KEY_FORMAT = 2
_INTS = 1  # the tag of a tuple key's rest of 64-bit ints (a pickle starts with 0x80)
_BIAS = 2**63  # ints plus 2**63 are unsigned, so their big-endian bytes order like the ints
_LENGTH = struct.Struct(">I")
_FIRST_INT = struct.Struct(">Q")


def _first_prefix(first: Any) -> bytes:
    """What every tuple key with first element ``first`` starts with."""
    encoded = pickle.dumps(first, _PROTOCOL)
    return b"T" + _LENGTH.pack(len(encoded)) + encoded


_ONE_INT = struct.Struct(">BQ")
_TWO_INTS = struct.Struct(">BQQ")


def _encode_ints(ints: tuple[int, ...]) -> bytes:
    if len(ints) == 2:  # a window store's (timestamp, seq)
        return _TWO_INTS.pack(_INTS, ints[0] + _BIAS, ints[1] + _BIAS)
    if len(ints) == 1:
        return _ONE_INT.pack(_INTS, ints[0] + _BIAS)
    return bytes((_INTS,)) + struct.pack(f">{len(ints)}Q", *[i + _BIAS for i in ints])


def _below(upper: bytes) -> Any:
    """Read options of an iterator that stops before ``upper``. Without them an iterator
    positions itself on the next live key after the range, passing over every deletion
    RocksDB has not compacted away yet: a window store's expired records, in a run of them
    tens of milliseconds a read. Keep them referenced while the iterator runs: it reads the
    bound from them, and freed they bound it by whatever is in their place."""
    import rocksdict

    options = rocksdict.ReadOptions()
    options.set_iterate_upper_bound(upper)
    return options


def _after_prefix(prefix: bytes) -> bytes:
    """The least key above every key starting with ``prefix``.

    >>> _after_prefix(b"\\x00\\x01T"), _after_prefix(b"\\x00\\xff")
    (b'\\x00\\x01U', b'\\x01')
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:  # a store's prefix is two bytes: the 65,535th store's
        raise ValueError("no key is above every key starting with 0xff bytes only")
    return stripped[:-1] + bytes((stripped[-1] + 1,))


#: whether a tuple key's elements after the first are laid out as ints: all 64-bit ints
_fits = all_int64


def _encode_rest(rest: tuple[Any, ...]) -> bytes:
    """A tuple key's elements after the first: 64-bit ints as bytes that sort like them (a
    key's range of times is then one range of RocksDB keys), anything else pickled."""
    return _encode_ints(rest) if _fits(rest) else pickle.dumps(rest, _PROTOCOL)


def _decode_ints(data: bytes) -> tuple[int, ...]:
    return tuple(i - _BIAS for i in struct.unpack(f">{(len(data) - 1) // 8}Q", data[1:]))


def _int_rest(key: Any) -> bool:
    """Whether ``key`` is a tuple whose elements after the first are 64-bit ints (laid out to
    sort like them)."""
    return type(key) is tuple and len(key) > 0 and _fits(key[1:])


def _encode_key(key: Any) -> bytes:
    """Keys of one store; tuple keys start with their first element's encoding, so that all keys
    with one first element are one prefix, and so do windowed keys with their key.

    >>> _encode_key(("a", 5, 0)) < _encode_key(("a", 5, 1)) < _encode_key(("a", 256, 0))
    True
    >>> [_decode_key(_encode_key(k)) for k in [("a", -1, 2**63 - 1), ("a", True), "a", (1,)]]
    [('a', -1, 9223372036854775807), ('a', True), 'a', (1,)]
    """
    if type(key) is tuple:
        if len(key) == 3:  # a join window store's (key, timestamp, seq): inline, a third the time
            first, t, seq = key
            if (type(t) is int and type(seq) is int and -_BIAS <= t < _BIAS
                    and -_BIAS <= seq < _BIAS):
                encoded = pickle.dumps(first, _PROTOCOL)
                return (b"T" + _LENGTH.pack(len(encoded)) + encoded
                        + _TWO_INTS.pack(_INTS, t + _BIAS, seq + _BIAS))
        if key:
            return _first_prefix(key[0]) + _encode_rest(key[1:])
    elif isinstance(key, Windowed):
        return b"W" + encode_windowed(key)
    return b"K" + pickle.dumps(key, _PROTOCOL)


def _encode_change(key: Any, value: Any) -> tuple[bytes, bytes | None]:
    """A change as RocksDB takes it: the key's bytes (after a store's prefix) and the pickled
    value, or None for a deletion."""
    return _encode_key(key), None if value is None else pickle.dumps(value, _PROTOCOL)


def _decode_key(data: bytes) -> Any:
    if data[:1] == b"W":
        return decode_windowed(data[1:])
    if data[:1] == b"T":
        (n,) = _LENGTH.unpack_from(data, 1)
        rest = data[5 + n:]
        return (pickle.loads(data[5:5 + n]),
                *(_decode_ints(rest) if rest[0] == _INTS else pickle.loads(rest)))
    return pickle.loads(data[1:])


class EncodedEntries:
    """Entries of one store as a RocksDB copy keeps them: each key's bytes after the store's
    prefix and its pickled value (None: deleted, in a delta). A copy's snapshots and deltas
    are written in these, so they neither decode nor encode again what RocksDB holds or is
    given (decoding was two thirds of a snapshot's time: ~15 s of the ~21 s of a Nexmark q4
    task's ~775k entries at 10,000,000 events; pickling a delta's changes once more after
    encoding them for RocksDB, ~1.5 µs a change). A delta's first chunk of a store
    carries its expiry (``expired_up_to``, see
    :data:`~streamtable.state.stores.EXPIRED_UP_TO`), applied before its entries. A RocksDB
    copy of the same key layout restores them as they are; anything else restores
    :meth:`decoded`.

    >>> chunk = EncodedEntries(KEY_FORMAT, [(_encode_key(("a", 5)), pickle.dumps(1))])
    >>> len(chunk), chunk.decoded()
    (1, {('a', 5): 1})
    >>> EncodedEntries(KEY_FORMAT, [(_encode_key("b"), None)], expired_up_to=7).decoded()
    {EXPIRED_UP_TO: 7, 'b': None}
    """

    __slots__ = ("key_format", "pairs", "expired_up_to")

    def __init__(self, key_format: int, pairs: list[tuple[bytes, bytes | None]],
                 expired_up_to: int | None = None) -> None:
        self.key_format = key_format
        self.pairs = pairs
        self.expired_up_to = expired_up_to

    def __len__(self) -> int:
        return len(self.pairs) + (self.expired_up_to is not None)

    def __reduce__(self) -> tuple[Any, ...]:
        if self.expired_up_to is None:
            return EncodedEntries, (self.key_format, self.pairs)
        return EncodedEntries, (self.key_format, self.pairs, self.expired_up_to)

    def decoded(self) -> dict[Any, Any]:
        decode = _KEY_DECODERS.get(self.key_format)
        if decode is None:  # a snapshot of a later version's copy
            raise ValueError(f"state of RocksDB key layout {self.key_format}: this version "
                             f"reads layouts {sorted(_KEY_DECODERS)}")
        entries: dict[Any, Any] = ({} if self.expired_up_to is None
                                   else {EXPIRED_UP_TO: self.expired_up_to})
        for k, v in self.pairs:
            entries[decode(k)] = None if v is None else pickle.loads(v)
        return entries


#: the key layouts a snapshot may hold, and how each decodes
_KEY_DECODERS = {KEY_FORMAT: _decode_key}


#: the block cache all of a worker's task databases share (bytes): RocksDB's own default is a
#: cache per database, so a worker's memory grew with the tasks it ran; larger: more of the
#: state's blocks read from memory instead of the disk's page cache
BLOCK_CACHE_BYTES = 64 * 1024 * 1024
#: a commit's staged writes are written to RocksDB whenever they reach this many bytes: one
#: write batch of a whole commit held a copy of every change, encoded (~90-110 MB at the peak
#: of a Nexmark q4 join task of 260k-390k records); smaller: more, smaller writes
WRITE_BATCH_BYTES = 8 * 1024 * 1024
#: bits per key of the databases' Bloom filters (Kafka Streams' RocksDB stores have them too):
#: a key no file holds, the most frequent read of an aggregation's first record for a key, is
#: answered without reading that file's blocks (~1% of them still read)
BLOOM_BITS_PER_KEY = 10

_block_cache: Any = None


def _options() -> Any:
    import rocksdict

    global _block_cache
    if _block_cache is None:
        _block_cache = rocksdict.Cache(BLOCK_CACHE_BYTES)
    table = rocksdict.BlockBasedOptions()
    table.set_block_cache(_block_cache)
    table.set_bloom_filter(BLOOM_BITS_PER_KEY, False)
    options = rocksdict.Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_block_based_table_factory(table)
    # many small task databases per worker: small memtables, few files held open
    options.set_write_buffer_size(8 * 1024 * 1024)
    options.set_max_write_buffer_number(2)
    options.set_max_open_files(64)
    options.set_keep_log_file_num(2)
    # as Kafka Streams' RocksDB stores: blocks read without decompressing them (pickled values
    # compress little: a Nexmark q4 task's copy took ~335 MB at 10,000,000 events either way),
    # and universal compaction, which rewrites less of a store whose keys come and go (a
    # join's windows) than levels do
    options.set_compression_type(rocksdict.DBCompressionType.none())
    options.set_compaction_style(rocksdict.DBCompactionStyle.universal())
    return options


def _next_prefix(taken: Iterable[bytes]) -> bytes:
    """The key prefix of a copy's next store: two bytes after the largest taken, none that
    ``_META`` starts with (the 109th would: ``b"\\x00m"``).

    >>> _next_prefix([]), _next_prefix([struct.pack(">H", 108)])
    (b'\\x00\\x01', b'\\x00n')
    """
    n = max((struct.unpack(">H", p)[0] for p in taken), default=0) + 1
    while _META.startswith(struct.pack(">H", n)):
        n += 1
    return struct.pack(">H", n)


class _Range:
    """A first element's int-keyed entries as RocksDB holds them: the ints after the first,
    sorted, and the values."""

    __slots__ = ("rests", "values")

    def __init__(self, rests: list[tuple[int, ...]], values: list[Any]) -> None:
        self.rests = rests
        self.values = values


_UNREAD = _Range([], [])


class RocksDBKeyValueStore:
    """One store inside a task's RocksDB copy (keys under the store's prefix)."""

    #: a first element's entries are kept after a range read if RocksDB has at most this many
    #: (else each read is a range of RocksDB's keys); the kept entries of all first elements
    #: are dropped when they reach ``RANGE_CACHE_ENTRIES`` (each first counts one more)
    RANGE_CACHE_KEYS = 64
    RANGE_CACHE_ENTRIES = 20_000

    def __init__(self, name: str, copy: RocksDBTaskState, prefix: bytes, count: int) -> None:
        self.name = name
        self._copy = copy
        self._prefix = prefix
        self._dirty: dict[Any, Any] = {}  # written since the last drain (None: deleted)
        self._clean: dict[Any, Any] = {}  # read from RocksDB since the last flush
        self._count = count
        # the tuple and windowed keys of ``_dirty`` by their first element, built when
        # ``keys_with_first`` first asks (a join looks a key's windows up for every record)
        self._dirty_index: dict[Any, set[Any]] | None = None
        # the int elements after the first of ``_dirty``'s tuple keys of ints, sorted, by first
        # element: built when ``range_with_first`` first asks (a join's window store, per record)
        self._dirty_ranges: dict[Any, list[tuple[int, ...]]] | None = None
        # what RocksDB holds of a first element's int-keyed entries, read since the last
        # flush (None: more than RANGE_CACHE_KEYS of them): a join reads one key's window for
        # every record of the other side with that key
        self._ranges: dict[Any, _Range | None] = {}
        self._ranges_entries = 0
        # the largest expiry since the last drain (recorded as one change, EXPIRED_UP_TO)
        self._expired_up_to: int | None = None

    def _db_get(self, key: Any) -> Any:
        raw = self._copy.db.get(self._prefix + _encode_key(key))
        return None if raw is None else pickle.loads(raw)

    def get(self, key: Any) -> Any:
        if key in self._dirty:
            return self._dirty[key]
        clean = self._clean
        if key in clean:
            return clean[key]
        value = clean[key] = self._db_get(key)
        return value

    def put(self, key: Any, value: Any) -> None:
        if value is None:
            self.delete(key)
            return
        if self.get(key) is None:
            self._count += 1
        self._written(key)
        self._dirty[key] = value

    def insert(self, key: Any, value: Any) -> None:
        """Put ``key``, which the caller knows is not in the store: no read of RocksDB (a
        point read of an absent key was a tenth of a join's time at 10,000,000 events)."""
        self._count += 1
        self._written(key)
        self._dirty[key] = value

    def delete(self, key: Any) -> Any:
        old = self.get(key)
        if old is not None:
            self._count -= 1
        self._written(key)
        self._dirty[key] = None
        return old

    def _raw_items(self) -> Iterator[tuple[bytes, bytes]]:
        """What RocksDB holds of the store: each key's bytes after the prefix, and its value's."""
        prefix = self._prefix
        n = len(prefix)
        stop = _below(_after_prefix(prefix))  # referenced while the iterator runs
        for raw_key, raw_value in self._copy.db.items(from_key=prefix, read_opt=stop):
            yield raw_key[n:], raw_value

    def _db_items(self) -> Iterator[tuple[Any, Any]]:
        for raw_key, raw_value in self._raw_items():
            yield _decode_key(raw_key), pickle.loads(raw_value)

    def items(self) -> Iterator[tuple[Any, Any]]:
        dirty = self._dirty
        for k, v in dirty.items():
            if v is not None:
                yield k, v
        for k, v in self._db_items():
            if k not in dirty:
                yield k, v

    def encoded_chunks(self, size: int) -> Iterator[EncodedEntries]:
        """The store's entries, ``size`` at a time, as RocksDB holds them (after a flush: a
        snapshot's)."""
        if self._dirty or self._copy._batch is not None or self._copy.staging:
            raise RuntimeError(f"store {self.name!r}: encoded entries before a flush")
        pairs: list[tuple[bytes, bytes | None]] = []
        for pair in self._raw_items():
            pairs.append(pair)
            if len(pairs) == size:
                yield EncodedEntries(KEY_FORMAT, pairs)
                pairs = []
        if pairs:
            yield EncodedEntries(KEY_FORMAT, pairs)

    def _written(self, key: Any) -> None:
        """Keep the overlay's indexes in step with a write of ``key`` (before it is made)."""
        if key in self._dirty:
            return
        if self._dirty_index is not None:
            file_by_first(self._dirty_index, key)
        if self._dirty_ranges is not None and _int_rest(key):
            insort(self._dirty_ranges.setdefault(key[0], []), key[1:])

    def _dirty_in_range(self, first: Any, low: tuple[int, ...],
                        high: tuple[int, ...]) -> list[tuple[int, ...]]:
        """The int elements after ``first`` of ``_dirty``'s keys in ``[low, high]``, sorted."""
        if self._dirty_ranges is None:
            ranges: dict[Any, list[tuple[int, ...]]] = {}
            for k in self._dirty:
                if _int_rest(k):
                    ranges.setdefault(k[0], []).append(k[1:])
            for of_first in ranges.values():
                of_first.sort()
            self._dirty_ranges = ranges
        rests = self._dirty_ranges.get(first)
        if not rests:
            return []
        return rests[bisect_left(rests, low):bisect_right(rests, high)]

    def _dirty_with_first(self, first: Any) -> set[Any]:
        """The keys of ``_dirty`` whose first element (key) is ``first``."""
        if self._dirty_index is None:
            self._dirty_index = {}
            for k in self._dirty:
                file_by_first(self._dirty_index, k)
        return self._dirty_index.get(first, set())

    def keys_with_first(self, first: Any) -> list[Any]:
        """The tuple (or windowed) keys whose first element (key) is ``first``, in key
        order."""
        n = len(self._prefix)
        keys = set()
        for prefix in (self._prefix + _first_prefix(first),
                       self._prefix + b"W" + window_key_prefix(first)):
            stop = _below(_after_prefix(prefix))
            for raw_key in self._copy.db.keys(from_key=prefix, read_opt=stop):
                keys.add(_decode_key(raw_key[n:]))
        dirty = self._dirty
        for k in self._dirty_with_first(first):
            if dirty[k] is None:
                keys.discard(k)
            else:
                keys.add(k)
        return sorted_keys(keys)

    def range_with_first(self, first: Any, low: tuple[int, ...],
                         high: tuple[int, ...]) -> list[tuple[Any, Any]]:
        """``(key, value)`` of the tuple keys ``(first, *rest)`` with ``low <= rest <= high``,
        ``rest`` of 64-bit ints, in key order: one range of RocksDB keys (see
        :class:`~streamtable.state.base.RangeKeyValueStore`)."""
        found = self._db_range(first, low, high)
        written = self._dirty_in_range(first, low, high)
        if not written:
            return found
        merged = dict(found)
        dirty = self._dirty
        for rest in written:
            k = (first, *rest)
            if dirty[k] is None:
                merged.pop(k, None)
            else:
                merged[k] = dirty[k]
        return sorted(merged.items(), key=lambda kv: kv[0][1:])

    def _db_range(self, first: Any, low: tuple[int, ...],
                  high: tuple[int, ...]) -> list[tuple[Any, Any]]:
        """What RocksDB holds of :meth:`range_with_first`'s answer: from the entries of
        ``first`` read whole since the last flush, or read by range."""
        ranges = self._ranges
        cached = ranges.get(first, _UNREAD)
        if cached is _UNREAD:
            if self._ranges_entries >= self.RANGE_CACHE_ENTRIES:
                ranges.clear()
                self._ranges_entries = 0
            cached = ranges[first] = self._read_range(first)
            self._ranges_entries += 1 + (0 if cached is None else len(cached.rests))
        if cached is None:
            return self._read_range_between(first, low, high)
        rests = cached.rests
        i, j = bisect_left(rests, low), bisect_right(rests, high)
        return [((first, *rest), value)
                for rest, value in zip(rests[i:j], cached.values[i:j], strict=True)]

    def _read_range(self, first: Any) -> _Range | None:
        """All of ``first``'s int-keyed entries in RocksDB, if at most ``RANGE_CACHE_KEYS``
        (else None)."""
        read = _Range([], [])
        for rest, value in self._int_entries(first, None, None):
            if len(read.rests) == self.RANGE_CACHE_KEYS:
                return None
            read.rests.append(rest)
            read.values.append(value)
        return read

    def _read_range_between(self, first: Any, low: tuple[int, ...],
                            high: tuple[int, ...]) -> list[tuple[Any, Any]]:
        return [((first, *rest), value) for rest, value in self._int_entries(first, low, high)]

    def _int_entries(self, first: Any, low: tuple[int, ...] | None,
                     high: tuple[int, ...] | None) -> Iterator[tuple[tuple[int, ...], Any]]:
        """``(rest, value)`` of RocksDB's int-keyed entries of ``first`` with
        ``low <= rest <= high`` (``None``: all of them), in key order."""
        base = self._prefix + _first_prefix(first)
        at = len(base)
        # every key between the two bounds starts with their common prefix: base + the tag;
        # the least key above the high bound is that bound and a zero byte
        start = base + (bytes((_INTS,)) if low is None else _encode_ints(low))
        stop = _below(base + (bytes((_INTS + 1,)) if high is None
                              else _encode_ints(high) + b"\x00"))
        for raw_key, raw_value in self._copy.db.items(from_key=start, read_opt=stop):
            yield _decode_ints(raw_key[at:]), pickle.loads(raw_value)

    def delete_with_second_up_to(self, up_to: int) -> int:
        """Delete the keys that :func:`~streamtable.state.stores.expired_by` ``up_to`` (a
        window store's expired records), as :meth:`delete` would but without reading their
        values and without a change per key: the store's changes record the expiry once
        (:data:`~streamtable.state.stores.EXPIRED_UP_TO`); how many. A pass over the
        store's tuple keys in RocksDB, written at once."""
        dirty = self._dirty
        gone = 0
        for raw_key in self._expired_in_db(up_to):
            if not dirty or _decode_key(raw_key[len(self._prefix):]) not in dirty:
                gone += 1  # a key of the overlay counts below
        batch = self._copy.pending()
        for k in expired_keys(dirty, up_to):
            if dirty.pop(k) is not None:
                gone += 1
            batch.delete(self._prefix + _encode_key(k))
        self._dirty_index = self._dirty_ranges = None
        self._count -= gone
        if self._expired_up_to is None or up_to > self._expired_up_to:
            self._expired_up_to = up_to
        self._copy.flush()
        return gone

    def _expired_in_db(self, up_to: int) -> list[bytes]:
        """The raw keys in RocksDB that an expiry up to ``up_to`` deletes, their deletion
        staged."""
        prefix = self._prefix + b"T"
        n = len(self._prefix)
        bound = up_to + _BIAS
        found = []
        stop = _below(_after_prefix(prefix))
        for raw_key in self._copy.db.keys(from_key=prefix, read_opt=stop):
            (m,) = _LENGTH.unpack_from(raw_key, n + 1)
            at = n + 5 + m
            if (raw_key[at] == _INTS and len(raw_key) >= at + 9
                    and _FIRST_INT.unpack_from(raw_key, at + 1)[0] <= bound):
                found.append(raw_key)
        batch = self._copy.pending()
        for raw_key in found:
            batch.delete(raw_key)
        return found

    def __len__(self) -> int:
        return self._count

    def forget_reads(self) -> None:
        """Drop what was read from RocksDB (it is about to change)."""
        self._clean.clear()
        self._ranges.clear()
        self._ranges_entries = 0

    def drain_changes(self) -> dict[Any, Any]:
        """Return the keys written since the last call (``None`` = deleted) and stage them for
        RocksDB (written at the copy's next :meth:`RocksDBTaskState.flush`)."""
        changes, parts = self.drain_encoded(1024)
        for _ in parts:
            pass
        return changes

    def drain_encoded(self, size: int) -> tuple[dict[Any, Any], Iterator[EncodedEntries]]:
        """Return the keys written since the last call (``None`` = deleted), and the parts
        that stage them for RocksDB as they are iterated, ``size`` changes a part, each as it
        was encoded for RocksDB: a delta's file is written from them, so the changes are
        encoded once. Until the parts were iterated to their end the store is not to be read,
        and the copy refuses to :meth:`~RocksDBTaskState.flush` (for good, if they never are:
        a copy whose changes were staged in part must not be recorded as a version)."""
        changes, self._dirty = self._dirty, {}
        self._dirty_index = self._dirty_ranges = None
        self.forget_reads()
        up_to, self._expired_up_to = self._expired_up_to, None
        if up_to is not None:
            changes[EXPIRED_UP_TO] = up_to
        self._copy.staging += 1
        return changes, self._staged_parts(changes, up_to, size)

    def _staged_parts(self, changes: dict[Any, Any], up_to: int | None,
                      size: int) -> Iterator[EncodedEntries]:
        prefix = self._prefix
        items = ((k, v) for k, v in changes.items() if k is not EXPIRED_UP_TO)
        while True:
            # _encode_change, inline: a call per change cost a commit 4-20% more
            pairs = [(_encode_key(k), None if v is None else pickle.dumps(v, _PROTOCOL))
                     for k, v in itertools.islice(items, size)]
            if not pairs and up_to is None:
                break
            self._stage_raw((prefix + k, v) for k, v in pairs)
            yield EncodedEntries(KEY_FORMAT, pairs, up_to)
            up_to = None
        self._copy.staging -= 1

    def _raw_changes(self, entries: dict[Any, Any]) -> Iterator[tuple[bytes, bytes | None]]:
        """``entries`` (None: delete; an expiry left out) as RocksDB keys and values."""
        prefix = self._prefix
        for k, v in entries.items():
            if k is not EXPIRED_UP_TO:
                raw_key, raw_value = _encode_change(k, v)
                yield prefix + raw_key, raw_value

    def _stage_raw(self, pairs: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Stage RocksDB keys and values (None: delete); each :data:`WRITE_BATCH_BYTES` staged
        are written at once (see :meth:`RocksDBTaskState.pending`)."""
        copy = self._copy
        batch = copy.pending()
        for n, (k, v) in enumerate(pairs, 1):
            if v is None:
                batch.delete(k)
            else:
                batch.put(k, v)
            if not n % 1024:
                batch = copy.pending()

    def restore(self, items: dict[Any, Any] | EncodedEntries, fresh: bool = False) -> None:
        """Apply a delta (``None`` deletes) without recording it as a change. ``fresh``: the
        keys are known to be absent (a snapshot into an empty store)."""
        if self._dirty:
            raise RuntimeError(f"store {self.name!r}: restore over unflushed writes")
        if isinstance(items, EncodedEntries) and items.key_format != KEY_FORMAT:
            items = items.decoded()
        if isinstance(items, EncodedEntries):
            if fresh:
                self._restore_encoded(items)
            else:
                self._apply_raw(((self._prefix + k, v) for k, v in items.pairs),
                                items.expired_up_to)
            return
        if fresh:
            self._stage_raw(self._raw_changes(items))
            self._count += len(items)
            self._copy.flush()
            return
        self._apply_raw(self._raw_changes(items), items.get(EXPIRED_UP_TO))

    def _apply_raw(self, pairs: Iterable[tuple[bytes, bytes | None]],
                   up_to: int | None) -> None:
        """Apply a delta's RocksDB keys and values (None: delete), after its expiry up to
        ``up_to``, keeping the store's count."""
        if up_to is not None:
            self._count -= len(self._expired_in_db(up_to))
            self._copy.flush()
        db = self._copy.db

        def counted() -> Iterator[tuple[bytes, bytes | None]]:
            for raw_key, raw_value in pairs:
                # a put of an absent key adds one, a deletion of a present one takes one off
                self._count += (raw_value is not None) - (db.get(raw_key) is not None)
                yield raw_key, raw_value

        self._stage_raw(counted())
        # a restore is read back at once (the next delta may touch the same keys)
        self._copy.flush()

    def _restore_encoded(self, items: EncodedEntries) -> None:
        """A snapshot's entries, absent from the store, as they are."""
        prefix = self._prefix
        self._stage_raw((prefix + k, v) for k, v in items.pairs)
        self._count += len(items.pairs)
        self._copy.flush()


@dataclass
class RocksDBTaskState(TaskState):
    """A :class:`~streamtable.state.task_state.TaskState` whose stores live in RocksDB under
    ``path``; its version, nonce and counters are stored with the data."""

    path: str = ""
    db: Any = None
    _batch: Any = None
    _prefixes: dict[str, bytes] = field(default_factory=dict)
    _counts: dict[str, int] = field(default_factory=dict)
    #: how many stores' drained changes are being staged (see
    #: :meth:`RocksDBKeyValueStore.drain_encoded`): no flush until none
    staging: int = 0

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str) -> RocksDBTaskState:
        """Open (or create) the copy at ``path``; raises if another process holds it."""
        import rocksdict

        os.makedirs(path, exist_ok=True)
        db = rocksdict.Rdict(path, _options())
        state = cls(path=path, db=db)
        raw = db.get(_META)
        meta = None if raw is None else pickle.loads(raw)
        if meta is not None and meta.get("key_format", 1) != KEY_FORMAT:
            # written by a version that laid keys out otherwise: rebuilt from the durable state
            log.info("RocksDB copy %s has key format %s, not %s: rebuilding it", path,
                     meta.get("key_format", 1), KEY_FORMAT)
            db.close()
            shutil.rmtree(path, ignore_errors=True)
            return cls.open(path)
        if meta is not None:
            state.version = meta["version"]
            state.nonce = meta["nonce"]
            state.stream_time = state.written_stream_time = meta["stream_time"]
            state.batches_since_snapshot = meta["batches_since_snapshot"]
            state.delta_entries_since_snapshot = meta["delta_entries_since_snapshot"]
            state._prefixes = meta["prefixes"]
            state._counts = meta["counts"]
        else:
            state.version, state.nonce = -2, "unwritten"  # matches no durable state
        for name in state._prefixes:
            state.store(name)
        return state

    @classmethod
    def open_slot(cls, directory: str) -> RocksDBTaskState:
        """The copy under ``directory`` that was committed last if no other process holds it,
        else the first free one."""
        slots = [f"slot-{n}" for n in range(MAX_SLOTS)]
        try:
            with open(os.path.join(directory, "latest"), encoding="ascii") as f:
                latest = f.read().strip()
            if latest in slots:
                slots.remove(latest)
                slots.insert(0, latest)
        except OSError:
            pass
        errors = []
        for slot in slots:
            try:
                return cls.open(os.path.join(directory, slot))
            except Exception as e:  # held by another live process (RocksDB's LOCK)
                errors.append(str(e))
        raise RuntimeError(f"no free RocksDB slot under {directory}: {errors[-1]}")

    # -- the TaskState interface -----------------------------------------------------------
    def store(self, name: str) -> RocksDBKeyValueStore:  # type: ignore[override]
        s: Any = self.stores.get(name)
        if s is None:
            prefix = self._prefixes.get(name)
            if prefix is None:
                prefix = self._prefixes[name] = _next_prefix(self._prefixes.values())
            s = RocksDBKeyValueStore(name, self, prefix, self._counts.get(name, 0))
            self.stores[name] = s
        return s  # type: ignore[no-any-return]

    def pending(self) -> Any:
        """The write batch staged writes go to. One that holds :data:`WRITE_BATCH_BYTES` is
        written first, under a version that matches no durable state (as :meth:`flush`): a
        commit's writes do not wait in memory for the whole commit."""
        if self._batch is not None and self._batch.size_in_bytes() >= WRITE_BATCH_BYTES:
            self._write(None, None)
        return self._staged()

    def _staged(self) -> Any:
        if self._batch is None:
            import rocksdict

            self._batch = rocksdict.WriteBatch(raw_mode=True)
        return self._batch

    def flush(self, version: int | None = None, nonce: str | None = None) -> None:
        """Write the staged changes, with the copy's version: the given one, or a version
        that matches no durable state until a later flush names it (a crash in between leaves
        a copy that is rebuilt)."""
        if self.staging:
            raise RuntimeError(f"RocksDB copy {self.path}: a flush while a store's drained "
                               "changes are not all staged")
        self._write(version, nonce)

    def _write(self, version: int | None, nonce: str | None) -> None:
        batch = self._staged()
        self._batch = None
        meta = {
            "key_format": KEY_FORMAT,
            "version": -2 if version is None else version,
            "nonce": "pending" if nonce is None else nonce,
            "stream_time": self.stream_time,
            "batches_since_snapshot": self.batches_since_snapshot,
            "delta_entries_since_snapshot": self.delta_entries_since_snapshot,
            "prefixes": self._prefixes,
            "counts": {name: len(s) for name, s in self.stores.items()},
        }
        batch.put(_META, pickle.dumps(meta, _PROTOCOL))
        self.db.write(batch)
        for s in self.stores.values():
            s.forget_reads()  # type: ignore[attr-defined]

    def committed(self) -> None:
        self.flush(self.version, self.nonce)
        # which slot holds the newest copy: a restarted worker opens it first
        directory, slot = os.path.split(self.path)
        tmp = os.path.join(directory, f".latest-{os.getpid()}")
        with open(tmp, "w", encoding="ascii") as f:
            f.write(slot)
        os.replace(tmp, os.path.join(directory, "latest"))

    def cleared(self) -> RocksDBTaskState:
        """This copy, emptied (to be rebuilt from a snapshot)."""
        path = self.path
        self.close()
        shutil.rmtree(path, ignore_errors=True)
        return RocksDBTaskState.open(path)

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
