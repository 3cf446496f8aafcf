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
timestamp order, right before left at equal timestamps (Kafka's store order). Kafka throttles
that scan by wall-clock time (``emit.interval``, 1 s by default); streamtable scans every time,
so results never depend on the wall clock.

What Kafka keeps in memory per task (the join's stream time, and the smallest timestamp that may
be held) is kept in the outer store under a reserved key, so a Spark task created for a new
micro-batch continues exactly where the previous one stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtable.processors._operator import InternalProcessorContext, Operator
from streamtable.processors.api import Record
from streamtable.state.stores import key_order
from streamtable.windowing import JoinWindows

# The reserved key of the join's own bookkeeping in its stores: user records with a null key
# are never stored, so no record key can start with None.
META = (None,)
NO_TIME = -1
MAX_TIME = 2**63 - 1





class JoinWindowStore:
    """One side's join window store over a task's key-value store: ``put`` with duplicates,
    ``fetch`` by key and time range, records older than the retention invisible and deleted
    (through the store, so their deletion is part of the task's state changes)."""

    def __init__(self, store: Any, retention: int) -> None:
        self.store = store
        self.retention = retention
        # expired records are deleted in one scan per this much stream time (Kafka's segments)
        self.segment = max(retention // 2, 60_000)

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
        seq = 0
        for k in self.store.keys_with_first(key):
            if k[1] == timestamp:
                seq = max(seq, k[2] + 1)
        self.store.put((key, timestamp, seq), (value, timestamp))
        return True

    def _delete_expired(self, expired_up_to: int) -> None:
        doomed = [k for k, _ in self.store.items() if k != META and k[1] <= expired_up_to]
        for k in doomed:
            self.store.delete(k)

    def fetch(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        """``(timestamp, value)`` of the records of ``key`` in ``[time_from, time_to]``, in
        timestamp order (duplicates in the order they were put)."""
        low = max(time_from, self.observed_time() - self.retention + 1)
        out = []
        for k in self.store.keys_with_first(key):
            if low <= k[1] <= time_to:
                out.append((k[1], self.store.get(k)[0]))
        return out


class StreamJoinWindow(Operator):
    """Kafka Streams' ``KStreamJoinWindow``: forwards each record to its side's join processor,
    then keeps it in the side's window store (a record older than the retention is not kept:
    counted as dropped)."""

    def __init__(self, store_name: str, windows: JoinWindows) -> None:
        self.store_name = store_name
        self.windows = windows

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        self.window = JoinWindowStore(context.get_state_store(self.store_name),
                                      self.windows.retention)

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
        self.other = JoinWindowStore(context.get_state_store(self.other_store),
                                     self.windows.retention)
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
