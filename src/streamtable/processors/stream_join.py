"""Windowed KStream-KStream joins (Kafka Streams' ``KStreamKStreamJoin``, with the fix of
spurious left/outer results, KIP-633).

Each side keeps its records in a join window store: the key ``(key, timestamp, seq)`` holds
``(value, timestamp)`` (``seq`` tells duplicates apart), and the retention is the join's window
size plus grace (``before + after + grace``). A record of one side joins every record of the
other side with the same key whose timestamp lies in ``[ts - before, ts + after]`` (seen from the
left; mirrored from the right), at the larger of the two timestamps.

Left and outer joins hold a record that found no partner in the shared outer store
(``(timestamp, is_left, key) -> ([values], timestamp)``) until its window closes (stream time
beyond ``ts + after + grace`` for a left record, ``ts + before + grace`` for a right one); a
partner arriving meanwhile removes it, otherwise it is emitted with ``None`` for the other side.
Held records are emitted when a record arrives whose timestamp is the join's stream time, in
timestamp order, right before left at equal timestamps, then in key order (Kafka's store
order). Kafka throttles that scan by wall-clock time (``emit.interval``, 1 s by default);
streamtable scans every time, so results never depend on the wall clock.

What Kafka keeps in memory per task (the join's stream time, and the smallest timestamp that may
be held) is kept in the outer store under a reserved key, so a Spark task created for a new
micro-batch continues exactly where the previous one stopped.

The window stores are the whole state of their records; to fetch a key's records by time
without sorting its entries per record, each has an in-memory index derived from its contents:
the store keys of each record key in ``(timestamp, seq)`` order (:class:`JoinWindowStore`). A
window store is written by its side's :class:`StreamJoinWindow` and read by the other side's
join, so both share one index object per store and task: the first operator to ask creates it
and hangs a weak reference to it on the store object, tagged with the task's context (a Spark
task is created anew for every micro-batch, on stores that outlive it, and builds its indexes
again: once, on first use). Every write goes through that object, which keeps the index in step
with the store.
"""

from __future__ import annotations

import weakref
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from operator import itemgetter
from typing import Any, TypeVar

from streamtable.processors._operator import InternalProcessorContext, Operator
from streamtable.processors.api import Record
from streamtable.state.stores import key_order
from streamtable.windowing import JoinWindows

# The reserved key of the join's own bookkeeping in its stores: user records with a null key
# are never stored, so no record key can start with None.
META = (None,)
NO_TIME = -1
MAX_TIME = 2**63 - 1

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

    @classmethod
    def of(cls: type[S], context: InternalProcessorContext, store_name: str,
           *args: Any) -> S:
        """This task's instance over store ``store_name``: made by the first caller.

        The store object outlives the task (a working copy is checked out for the next
        micro-batch), so an instance found on it counts only if this task's context made it;
        the weak reference lets it go with its task.
        """
        store = context.get_state_store(store_name)
        ref = getattr(store, _SHARED, None)
        found = None if ref is None else ref()
        if type(found) is cls and found.context is context:
            return found
        made = cls(store, context, *args)
        try:
            setattr(store, _SHARED, weakref.ref(made))
        except AttributeError:
            # without it the join's operators would keep separate, diverging indexes
            raise TypeError(f"a stream-stream join needs store {store_name!r} to take "
                            f"attributes ({type(store).__name__} does not)") from None
        return made


class JoinWindowStore(_TaskShared):
    """One side's join window store over a task's key-value store: ``put`` with duplicates,
    ``fetch`` by key and time range, records older than the retention invisible and deleted
    (through the store, so their deletion is part of the task's state changes).

    The index: each record key's store keys in ``(timestamp, seq)`` order.
    """

    def __init__(self, store: Any, context: InternalProcessorContext, retention: int) -> None:
        super().__init__(store, context)
        self.retention = retention
        # expired records are deleted in one scan per this much stream time (Kafka's segments)
        self.segment = max(retention // 2, 60_000)
        self._keys: dict[Any, list[Any]] | None = None

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

    def _meta(self) -> tuple[int, int]:
        stored = self.store.get(META)
        return (NO_TIME, NO_TIME) if stored is None else stored[0]

    def observed_time(self) -> int:
        return self._meta()[0]

    def put(self, key: Any, value: Any, timestamp: int) -> bool:
        """Store a record; False when it is already older than the retention (not stored)."""
        observed, next_cleanup = self._meta()
        observed = max(observed, timestamp)
        expired_up_to = observed - self.retention
        if next_cleanup == NO_TIME or expired_up_to >= next_cleanup:
            self._delete_expired(expired_up_to)
            next_cleanup = expired_up_to + self.segment
        self.store.put(META, ((observed, next_cleanup), observed))
        if timestamp <= expired_up_to:
            return False
        index = self._index()
        of_key = index.get(key)
        at = 0 if of_key is None else bisect_right(of_key, timestamp, key=_TIME)
        # a duplicate's seq follows the largest of its timestamp's: the last one before it
        seq = (of_key[at - 1][2] + 1
               if of_key is not None and at and of_key[at - 1][1] == timestamp else 0)
        stored = (key, timestamp, seq)
        self.store.put(stored, (value, timestamp))
        if of_key is None:
            index[key] = [stored]
        else:
            of_key.insert(at, stored)
        return True

    def _delete_expired(self, expired_up_to: int) -> None:
        # a pass over every record key, once per segment: a key in the store has a record of
        # the last retention plus segment, so each record is passed over a few times in all
        index = self._index()
        emptied = []
        for key, of_key in index.items():
            if of_key[0][1] > expired_up_to:
                continue
            end = bisect_right(of_key, expired_up_to, key=_TIME)
            for k in of_key[:end]:
                self.store.delete(k)
            del of_key[:end]
            if not of_key:
                emptied.append(key)
        for key in emptied:
            del index[key]

    def fetch(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        """``(timestamp, value)`` of the records of ``key`` in ``[time_from, time_to]``, in
        timestamp order (duplicates in the order they were put)."""
        of_key = self._index().get(key)
        if not of_key:
            return []
        low = max(time_from, self.observed_time() - self.retention + 1)
        get = self.store.get
        return [(k[1], get(k)[0]) for k in
                of_key[bisect_left(of_key, low, key=_TIME):
                       bisect_right(of_key, time_to, key=_TIME)]]


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
                     else context.get_state_store(self.outer_store))

    def _join(self, mine: Any, theirs: Any) -> Any:
        return self.joiner(mine, theirs) if self.left_side else self.joiner(theirs, mine)

    # -- the time tracker shared by both sides (in the outer store) ------------------------
    def _tracker(self) -> tuple[int, int]:
        stored = self.held.get(META) if self.held is not None else None
        return (NO_TIME, MAX_TIME) if stored is None else stored[0]

    def _set_tracker(self, stream_time: int, min_time: int) -> None:
        if self.held is not None:
            self.held.put(META, ((stream_time, min_time), stream_time))

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
                partner = (other_ts, not self.left_side, record.key)
                if self.held.get(partner) is not None:
                    self.held.delete(partner)
            self.forward(Record(record.key, self._join(record.value, other_value),
                                max(ts, other_ts), record.headers))
        if partners or not self.outer:
            return
        stream_time, min_time = self._tracker()
        if self.held is None or time_to < stream_time:
            self.forward(record.with_value(self._join(record.value, None)))
            return
        self._set_tracker(stream_time, min(min_time, ts))
        hkey = (ts, self.left_side, record.key)
        stored = self.held.get(hkey)
        values = [] if stored is None else list(stored[0])
        values.append(record.value)
        self.held.put(hkey, (values, ts))

    def _emit_closed(self, record: Record, stream_time: int) -> None:
        """Emit (and forget) the held records whose window has closed."""
        assert self.held is not None
        _, min_time = self._tracker()
        grace = self.windows.grace_ms
        # MAX_TIME: nothing is held (Kafka scans the empty store then; the outcome is the same)
        if min_time == MAX_TIME or min_time + self.join_after + grace >= stream_time:
            return
        min_time = MAX_TIME
        left_open = right_open = False
        entries = sorted(((k, v) for k, v in self.held.items() if k != META),
                         key=lambda kv: (kv[0][0], kv[0][1], key_order(kv[0][2])))
        for hkey, (values, _) in entries:
            held_ts, is_left, key = hkey
            min_time = held_ts
            if left_open and right_open:
                break
            lookback = self.windows.after_ms if is_left else self.windows.before_ms
            if held_ts + lookback + grace >= stream_time:
                if is_left:
                    left_open = True
                else:
                    right_open = True
                continue
            for v in values:
                joined = self.joiner(v, None) if is_left else self.joiner(None, v)
                self.forward(Record(key, joined, held_ts, record.headers))
            self.held.delete(hkey)
        self._set_tracker(stream_time, min_time)
