"""Windowed KStream-KStream joins (Kafka Streams' ``KStreamKStreamJoin``, with the fix of
spurious left/outer results, KIP-633).

Each side keeps its records in a join window store: the key ``(key, timestamp, seq)`` holds
``(value, timestamp)`` (``seq``, the next of the store's own sequence, kept with its
bookkeeping, tells duplicates apart without reading the store), and the retention is the
join's window size plus grace (``before + after + grace``). A record of one side joins every
record of the other side with the same key whose timestamp lies in ``[ts - before, ts + after]``
(seen from the left; mirrored from the right), at the larger of the two timestamps.

Left and outer joins hold a record that found no partner in the shared outer store
(``(timestamp, is_left, key) -> ([values], timestamp)``; with ``dsl.store.format=headers`` also
each value's headers, which it is emitted with) until its window closes (stream time
beyond ``ts + after + grace`` for a left record, ``ts + before + grace`` for a right one); a
partner arriving meanwhile removes it, otherwise it is emitted with ``None`` for the other side.
Held records are emitted when a record arrives whose timestamp is the join's stream time, in
timestamp order, right before left at equal timestamps, then in key order (Kafka's store
order). Kafka throttles that scan by wall-clock time (``emit.interval``, 1 s by default);
streamtable scans every time, so results never depend on the wall clock.

What Kafka keeps in memory per task (the join's stream time, and the smallest timestamp that may
be held) is kept in the outer store under a reserved key, so a Spark task created for a new
micro-batch continues exactly where the previous one stopped.

The stores are the whole state; to read them in time order without sorting them per record,
each store has an in-memory index, derived from its contents: a window store's keys per record
key in ``(timestamp, seq)`` order (:class:`JoinWindowStore`), the outer store's held keys per
side by timestamp (:class:`OuterStore`). A store is written by two operators of the join (a
window store by its side's :class:`StreamJoinWindow`, read by the other side's join; the outer
store by both joins), so they share one index object per store and task: the first operator to
ask creates it and hangs it on the store object (by a weak reference, if the store does not
count its restores), tagged with the task's context. Every write goes through that object,
which keeps the index in step with the store.

A Spark task is created anew for every micro-batch, on a working copy of the stores that
outlives it. On an in-memory copy its operators take over the index of the task before when
nothing else wrote the store since, as the store's own index stays with it (the store counts
its ``restores``: a worker's copy caught up from the deltas of another worker's batches; a copy
of a failed attempt is never reused). Otherwise the index is built again, once, on first use:
a scan of the whole store.

A window store on a store that reads key ranges
(:class:`~streamtable.state.base.RangeKeyValueStore`: RocksDB, whose keys sort a record key's
entries by timestamp) has no index: a fetch is one range of the store's keys, a put writes
without reading, and the expired records are found by one pass over the
store's keys per segment. Nothing proportional to the store is then in the worker's memory
(an index kept over RocksDB stores was most of Nexmark q4's 5.2 GB at 10,000,000 events;
built per task, its scan was a quarter of the workers' time). The outer store's index is
built per task on RocksDB (its held records are those of the last window).
"""

from __future__ import annotations

import weakref
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from typing import Any, TypeVar

from streamtable.processors._operator import InternalProcessorContext, Operator
from streamtable.processors.api import Record
from streamtable.records import Headers
from streamtable.state.stores import key_order
from streamtable.windowing import JoinWindows

# The reserved key of the join's own bookkeeping in its stores: user records with a null key
# are never stored, so no record key can start with None.
META = (None,)
NO_TIME = -1
MAX_TIME = 2**63 - 1
# the first seq of a window store kept by a version that numbered each timestamp's records
# from 0 (far above any of those): its later records sort after them
SEQ_AFTER_UPGRADE = 2**32

# the store object's attribute holding (a weak reference to) its per-task index
_SHARED = "_stream_join_index"

_TIME = itemgetter(1)  # of a window store key (key, timestamp, seq)
_TIME_SEQ = itemgetter(1, 2)

S = TypeVar("S", bound="_TaskShared")


class _TaskShared:
    """An index over one store, shared by the operators of one task that use the store."""

    def __init__(self, store: Any, context: InternalProcessorContext) -> None:
        self.store = store
        self.context = context
        # the store's restores when this index was made: it is in step with the store while
        # they stay the same (see the module)
        self.restores = getattr(store, "restores", None)

    @classmethod
    def of(cls: type[S], context: InternalProcessorContext, store_name: str,
           *args: Any) -> S:
        """This task's instance over store ``store_name``: made by the first caller, or the
        one of the task before on the same working copy, if nothing else wrote the store
        since (see the module). A store that does not count its restores keeps an instance
        for one task (the weak reference lets it go with its task)."""
        store = context.get_state_store(store_name)
        ref = getattr(store, _SHARED, None)
        found = ref() if isinstance(ref, weakref.ref) else ref
        if type(found) is cls:
            if found.context is context:
                return found
            if found.restores is not None and found.restores == store.restores:
                found.context = context
                return found
        made = cls(store, context, *args)
        try:
            setattr(store, _SHARED, made if made.restores is not None else weakref.ref(made))
        except AttributeError:
            # without it the join's operators would keep separate, diverging indexes
            raise TypeError(f"a stream-stream join needs store {store_name!r} to take "
                            f"attributes ({type(store).__name__} does not)") from None
        return made


class JoinWindowStore(_TaskShared):
    """One side's join window store over a task's key-value store: ``put`` with duplicates,
    ``fetch`` by key and time range, records older than the retention invisible and deleted
    through the store, so their deletion is part of the task's state changes: one change for
    the whole expiry (:data:`~streamtable.state.stores.EXPIRED_UP_TO`) on the stores that
    record it so, else a deletion per record.

    The index: each record key's store keys in ``(timestamp, seq)`` order.
    """

    def __init__(self, store: Any, context: InternalProcessorContext, retention: int) -> None:
        super().__init__(store, context)
        self.retention = retention
        # expired records are deleted in one scan per this much stream time (Kafka's segments)
        self.segment = max(retention // 2, 60_000)
        self._keys: dict[Any, list[Any]] | None = None
        # read by ranges of the store's keys, without an index (see the module)
        self._ranged = self.restores is None and hasattr(store, "range_with_first")

    def _index(self) -> dict[Any, list[Any]]:
        if self._keys is None:
            keys: dict[Any, list[Any]] = {}
            for k, _ in self.store.items():
                if k != META:
                    keys.setdefault(k[0], []).append(k)
            for of_key in keys.values():
                of_key.sort(key=_TIME_SEQ)
            self._keys = keys
        return self._keys

    def _meta(self) -> tuple[int, int, int]:
        """(observed time, next expiry, next seq)."""
        stored = self.store.get(META)
        if stored is None:
            return NO_TIME, NO_TIME, 0
        if len(stored[0]) == 2:  # kept by a version that numbered each timestamp's records
            return (*stored[0], SEQ_AFTER_UPGRADE)
        return stored[0]  # type: ignore[no-any-return]

    def observed_time(self) -> int:
        return self._meta()[0]

    def put(self, key: Any, value: Any, timestamp: int) -> bool:
        """Store a record; False when it is already older than the retention (not stored)."""
        observed, next_cleanup, seq = self._meta()
        observed = max(observed, timestamp)
        expired_up_to = observed - self.retention
        if next_cleanup == NO_TIME or expired_up_to >= next_cleanup:
            self._delete_expired(expired_up_to)
            next_cleanup = expired_up_to + self.segment
        late = timestamp <= expired_up_to
        self.store.put(META, ((observed, next_cleanup, seq if late else seq + 1), observed))
        if late:
            return False
        # the store's next seq: no key holds it, and it is larger than any a key holds
        stored = (key, timestamp, seq)
        if self._ranged:
            self.store.insert(stored, (value, timestamp))
            return True
        index = self._index()  # before the put: an index built now is of the store without it
        self.store.put(stored, (value, timestamp))
        of_key = index.get(key)
        if of_key is None:
            index[key] = [stored]
        else:
            of_key.insert(bisect_right(of_key, timestamp, key=_TIME), stored)
        return True

    def _delete_expired(self, expired_up_to: int) -> None:
        # a pass over every record key, once per segment: a key in the store has a record of
        # the last retention plus segment, so each record is passed over a few times in all
        if self._ranged:
            self.store.delete_with_second_up_to(expired_up_to)
            return
        index = self._index()
        emptied = []
        doomed: list[Any] = []
        for key, of_key in index.items():
            if of_key[0][1] > expired_up_to:
                continue
            end = bisect_right(of_key, expired_up_to, key=_TIME)
            doomed += of_key[:end]
            del of_key[:end]
            if not of_key:
                emptied.append(key)
        for key in emptied:
            del index[key]
        if hasattr(self.store, "delete_expired"):
            self.store.delete_expired(doomed, expired_up_to)
        else:
            for k in doomed:
                self.store.delete(k)

    def fetch(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        """``(timestamp, value)`` of the records of ``key`` in ``[time_from, time_to]``, in
        timestamp order (duplicates in the order they were put)."""
        if self._ranged:
            low = max(time_from, self.observed_time() - self.retention + 1)
            if low > time_to:
                return []
            return [(k[1], v[0]) for k, v in
                    self.store.range_with_first(key, (low,), (time_to, MAX_TIME))]
        of_key = self._index().get(key)
        if not of_key:
            return []
        low = max(time_from, self.observed_time() - self.retention + 1)
        get = self.store.get
        return [(k[1], get(k)[0]) for k in
                of_key[bisect_left(of_key, low, key=_TIME):
                       bisect_right(of_key, time_to, key=_TIME)]]


class _Times:
    """A sorted set of timestamps: sorted blocks of at most ``2 * BLOCK``, and each block's
    first (a plain list would move all its later items at every insertion and removal)."""

    BLOCK = 256

    __slots__ = ("_blocks", "_firsts")

    def __init__(self, times: Iterable[int] = ()) -> None:
        ordered = sorted(times)
        self._blocks = [ordered[i:i + self.BLOCK] for i in range(0, len(ordered), self.BLOCK)]
        self._firsts = [b[0] for b in self._blocks]

    def __len__(self) -> int:
        return sum(len(b) for b in self._blocks)

    def __iter__(self) -> Iterator[int]:
        for b in self._blocks:
            yield from b

    def first(self) -> int | None:
        return self._blocks[0][0] if self._blocks else None

    def last(self) -> int | None:
        return self._blocks[-1][-1] if self._blocks else None

    def add(self, t: int) -> None:
        """Add ``t`` (not in the set)."""
        blocks, firsts = self._blocks, self._firsts
        if not blocks:
            blocks.append([t])
            firsts.append(t)
            return
        i = max(bisect_right(firsts, t) - 1, 0)
        block = blocks[i]
        insort(block, t)
        firsts[i] = block[0]
        if len(block) > 2 * self.BLOCK:
            blocks[i + 1:i + 1] = [block[self.BLOCK:]]
            firsts.insert(i + 1, block[self.BLOCK])
            del block[self.BLOCK:]

    def remove(self, t: int) -> None:
        """Remove ``t`` (in the set)."""
        i = bisect_right(self._firsts, t) - 1
        block = self._blocks[i]
        del block[bisect_left(block, t)]
        if block:
            self._firsts[i] = block[0]
        else:
            del self._blocks[i]
            del self._firsts[i]

    def _from(self, t: int, above: bool) -> int | None:
        firsts = self._firsts
        i = bisect_right(firsts, t) - 1
        if i >= 0:
            block = self._blocks[i]
            j = (bisect_right if above else bisect_left)(block, t)
            if j < len(block):
                return block[j]
        return firsts[i + 1] if i + 1 < len(firsts) else None

    def at_least(self, t: int) -> int | None:
        """The smallest timestamp ``>= t``."""
        return self._from(t, False)

    def above(self, t: int) -> int | None:
        """The smallest timestamp ``> t``."""
        return self._from(t, True)


class OuterStore(_TaskShared):
    """The outer store of a left or outer join: the records held without a partner, and the
    time tracker both sides share.

    The index, per side: the timestamps held (:class:`_Times`) and the keys held at each, in
    key order (in store order at equal key order, as a stable sort of the store gives them).
    """

    def __init__(self, store: Any, context: InternalProcessorContext,
                 keep_headers: bool = False) -> None:
        super().__init__(store, context)
        # dsl.store.format=headers: each held value keeps its record's headers, a third
        # element of the entry (one headers tuple per value), and is emitted with them
        self.keep_headers = keep_headers
        self._built = False
        self._times = (_Times(), _Times())  # right, left: indexed by is_left
        self._keys: tuple[dict[int, list[Any]], dict[int, list[Any]]] = ({}, {})

    def _index(self) -> None:
        if self._built:
            return
        keys = self._keys
        for k, _ in self.store.items():
            if k != META:
                keys[k[1]].setdefault(k[0], []).append(k[2])
        for side in keys:
            for held in side.values():
                held.sort(key=key_order)  # stable: store order at equal key order
        self._times = (_Times(keys[False]), _Times(keys[True]))
        self._built = True

    def tracker(self) -> tuple[int, int]:
        """The join's stream time and the smallest timestamp that may be held."""
        stored = self.store.get(META)
        return (NO_TIME, MAX_TIME) if stored is None else stored[0]

    def set_tracker(self, stream_time: int, min_time: int) -> None:
        self.store.put(META, ((stream_time, min_time), stream_time))

    def hold(self, timestamp: int, is_left: bool, key: Any, value: Any,
             headers: Headers = ()) -> None:
        """Hold ``value`` of ``key`` (after those held at the same timestamp and side), with
        its record's ``headers`` when the store keeps them."""
        self._index()
        hkey = (timestamp, is_left, key)
        stored = self.store.get(hkey)
        values = [] if stored is None else list(stored[0])
        values.append(value)
        if self.keep_headers:
            # values held before the store kept headers have none
            held_headers = ([] if stored is None else list(stored[2]) if len(stored) > 2
                            else [()] * len(stored[0]))
            held_headers.append(headers)
            self.store.put(hkey, (values, timestamp, held_headers))
        else:
            self.store.put(hkey, (values, timestamp))
        if stored is None:
            keys = self._keys[is_left]
            held = keys.get(timestamp)
            if held is None:
                keys[timestamp] = [key]
                self._times[is_left].add(timestamp)
            else:
                insort(held, key, key=key_order)

    def release(self, timestamp: int, is_left: bool, key: Any) -> None:
        """Forget what ``key`` holds at ``timestamp`` on that side (if anything)."""
        hkey = (timestamp, is_left, key)
        if self.store.get(hkey) is None:
            return
        self._index()
        self.store.delete(hkey)
        keys = self._keys[is_left]
        held = keys[timestamp]
        held.remove(key)
        if not held:
            del keys[timestamp]
            self._times[is_left].remove(timestamp)

    def first_closed(self, open_left: int, open_right: int) -> tuple[int, bool, Any] | None:
        """The first held record in emission order (timestamp, right before left, key) whose
        window has closed: timestamp below ``open_left`` / ``open_right``."""
        self._index()
        left, right = self._times[True].first(), self._times[False].first()
        if right is not None and right < open_right and (
                left is None or left >= open_left or right <= left):
            return right, False, self._keys[False][right][0]
        if left is not None and left < open_left:
            return left, True, self._keys[True][left][0]
        return None

    def min_time_after_scan(self, open_left: int, open_right: int) -> int:
        """The ``min_time`` Kafka's emitter leaves after a scan with these bounds.

        The scan walks the held records in emission order, taking each one's timestamp as
        ``min_time``, and stops at the record after the one that found the second side's
        window still open: ``min_time`` is that record's timestamp, the last record's when the
        scan walks them all, ``MAX_TIME`` when none is held. Called before the closed records
        go (the scan sees them)."""
        self._index()
        times, keys = self._times, self._keys
        head_left = times[True].at_least(open_left)
        head_right = times[False].at_least(open_right)
        if head_left is None or head_right is None:
            lasts = [t for t in (times[True].last(), times[False].last()) if t is not None]
            return max(lasts) if lasts else MAX_TIME
        # the later of the two heads in emission order opens the second side
        if head_right <= head_left:
            stop, side = head_left, True
            other_next = times[False].above(stop)
        else:
            stop, side = head_right, False
            other_next = times[True].at_least(stop)
        own_next = stop if len(keys[side][stop]) > 1 else times[side].above(stop)
        after = [t for t in (own_next, other_next) if t is not None]
        return min(after) if after else stop


class StreamJoinWindow(Operator):
    """Kafka Streams' ``KStreamJoinWindow``: forwards each record to its side's join processor,
    then keeps it in the side's window store (a record older than the retention is not kept:
    counted as dropped)."""

    def __init__(self, store_name: str, windows: JoinWindows) -> None:
        self.store_name = store_name
        self.windows = windows

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        self.window = JoinWindowStore.of(context, self.store_name, self.windows.retention)

    def process(self, record: Record) -> None:
        self.forward(record)
        # a null key never joins; a null value is no record to join (Kafka's window store
        # treats putting it as a deletion, of nothing)
        if record.key is None or record.value is None:
            return
        if not self.window.put(record.key, record.value, record.timestamp):
            self.context.record_dropped(self.name, "record older than the join window's "
                                                   "retention (late)")


class StreamStreamJoin(Operator):
    """One side of a windowed stream-stream join. ``joiner(left_value, right_value)`` whichever
    side this is; ``outer``: this side's records without a partner are emitted with ``None``.
    """

    def __init__(self, left_side: bool, other_store: str, outer_store: str | None,
                 windows: JoinWindows, joiner: Callable[[Any, Any], Any], outer: bool) -> None:
        self.left_side = left_side
        self.other_store = other_store
        self.outer_store = outer_store
        self.windows = windows
        self.joiner = joiner
        self.outer = outer
        if left_side:
            self.join_before, self.join_after = windows.before_ms, windows.after_ms
        else:
            self.join_before, self.join_after = windows.after_ms, windows.before_ms

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        self.other = JoinWindowStore.of(context, self.other_store, self.windows.retention)
        self.held = (None if self.outer_store is None
                     else OuterStore.of(context, self.outer_store,
                                        context.store_headers(self.outer_store)))

    def _join(self, mine: Any, theirs: Any) -> Any:
        return self.joiner(mine, theirs) if self.left_side else self.joiner(theirs, mine)

    # -- the time tracker shared by both sides (in the outer store) ------------------------
    def _tracker(self) -> tuple[int, int]:
        return (NO_TIME, MAX_TIME) if self.held is None else self.held.tracker()

    def _set_tracker(self, stream_time: int, min_time: int) -> None:
        if self.held is not None:
            self.held.set_tracker(stream_time, min_time)

    def process(self, record: Record) -> None:
        ts = record.timestamp
        stream_time, min_time = self._tracker()
        if ts > stream_time:
            stream_time = ts
            self._set_tracker(stream_time, min_time)
        if self.outer and record.key is None and record.value is not None:
            self.forward(record.with_value(self._join(record.value, None)))
            return
        if record.key is None or record.value is None:
            self.context.record_dropped(self.name, "null key or value in a stream-stream join")
            return
        if self.held is not None and ts == stream_time:
            self._emit_closed(record, stream_time)
        time_from = max(0, ts - self.join_before)
        time_to = max(0, ts + self.join_after)
        partners = self.other.fetch(record.key, time_from, time_to)
        for other_ts, other_value in partners:
            if self.held is not None:
                self.held.release(other_ts, not self.left_side, record.key)
            self.forward(Record(record.key, self._join(record.value, other_value),
                                max(ts, other_ts), record.headers))
        if partners or not self.outer:
            return
        stream_time, min_time = self._tracker()
        if self.held is None or time_to < stream_time:
            self.forward(record.with_value(self._join(record.value, None)))
            return
        self._set_tracker(stream_time, min(min_time, ts))
        self.held.hold(ts, self.left_side, record.key, record.value, record.headers)

    def _emit_closed(self, record: Record, stream_time: int) -> None:
        """Emit (and forget) the held records whose window has closed."""
        held = self.held
        assert held is not None
        _, min_time = held.tracker()
        grace = self.windows.grace_ms
        # MAX_TIME: nothing is held (Kafka scans the empty store then; the outcome is the same)
        if min_time == MAX_TIME or min_time + self.join_after + grace >= stream_time:
            return
        # a held record's window is open from these timestamps on
        open_left = stream_time - self.windows.after_ms - grace
        open_right = stream_time - self.windows.before_ms - grace
        min_time = held.min_time_after_scan(open_left, open_right)
        while (hkey := held.first_closed(open_left, open_right)) is not None:
            held_ts, is_left, key = hkey
            stored = held.store.get(hkey)
            # Kafka Streams emits a held record with the headers of the record that closed
            # its window; a store keeping headers gives it its own (KIP-1271's outer store)
            held_headers = (stored[2] if held.keep_headers and len(stored) > 2
                            else [() if held.keep_headers else record.headers] * len(stored[0]))
            for v, headers in zip(stored[0], held_headers, strict=True):
                joined = self.joiner(v, None) if is_left else self.joiner(None, v)
                self.forward(Record(key, joined, held_ts, headers))
            held.release(held_ts, is_left, key)
        self._set_tracker(stream_time, min_time)
