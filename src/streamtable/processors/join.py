"""Joins: a stream record looks up a table's current row for its key (stream-table; with a global
table, for the key it selects; with a versioned table, its row as of the record's timestamp,
after a grace period if one is set); a change of either table of a primary-key table-table join
looks up the other table's row."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamtable.processors._operator import InternalProcessorContext, Operator
from streamtable.processors.api import Change, Record
from streamtable.processors.table import OUT_OF_ORDER, StoringProcessor

TOO_OLD = "stream record older than the versioned table's history retention"


class StreamTableJoin(Operator):
    """``joiner(stream_value, table_value)``; an inner join skips records without a row, a left
    join joins them with ``None``. The result keeps the stream record's timestamp.

    With a versioned table (KIP-914) a record joins the table's row as of its own timestamp:
    the version valid then, whatever arrived since. A record older than the table's history
    retention finds only a latest version old enough; an inner join without one drops it
    (counted), a left join joins it with ``None``."""

    def __init__(self, store_name: str, joiner: Callable[[Any, Any], Any], left: bool) -> None:
        self.store_name = store_name
        self.joiner = joiner
        self.left = left

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        self.versioned = context.versioned_store(self.store_name)

    def process(self, record: Record) -> None:
        if record.key is None or record.value is None:
            self.context.record_dropped(self.name, "null key or value in a stream-table join")
            return
        self.join(record)

    def join(self, record: Record) -> None:
        """Join a record (with a key and a value) with the table's row."""
        versioned = self.versioned
        if versioned is None:
            stored = self.store.get(record.key)
            table_value = None if stored is None else stored[0]
        else:
            found = versioned.get(record.key, record.timestamp)
            table_value = None if found is None else found.value
            if found is None and not self.left and versioned.expired(record.timestamp):
                self.context.record_dropped(self.name, TOO_OLD)
                return
        if table_value is None and not self.left:
            return
        self.forward(record.with_value(self.joiner(record.value, table_value)))


class StreamGlobalTableJoin(StreamTableJoin):
    """Kafka Streams' ``KStreamGlobalKTableJoin``: a stream-table join with a global table,
    whose row for a record is the one ``key_selector(key, value)`` names; ``joiner(value,
    row)`` is the result, at the stream record's timestamp and with its key. A record needs a
    value, not a key. An inner join skips records without a row (and records whose selected
    key is ``None``); a left join joins them with ``None``."""

    def __init__(self, store_name: str, key_selector: Callable[[Any, Any], Any],
                 joiner: Callable[[Any, Any], Any], left: bool) -> None:
        super().__init__(store_name, joiner, left)
        self.key_selector = key_selector

    def process(self, record: Record) -> None:
        if record.value is None:
            self.context.record_dropped(self.name, "null value in a stream-global table join")
            return
        table_key = self.key_selector(record.key, record.value)
        stored = None if table_key is None else self.store.get(table_key)
        if stored is None:
            if not self.left:
                if table_key is None:
                    self.context.record_dropped(
                        self.name, "key selector gave None in a stream-global table join")
                return
            self.forward(record.with_value(self.joiner(record.value, None)))
            return
        self.forward(record.with_value(self.joiner(record.value, stored[0])))


class TableTableJoin(Operator):
    """One side of a primary-key table-table join (Kafka Streams' ``KTableKTable*Join``): a
    change of this side joins the other side's current row, and forwards ``Change(new result,
    old result)`` at the larger of the two timestamps.

    ``mode``: ``inner`` (no row on either side, no result), ``left`` (the left table's rows
    join ``None`` when the right has none), ``outer`` (either side may be ``None``, not both).
    ``joiner(left_value, right_value)`` whichever side this is.
    """

    def __init__(self, other_store: str, joiner: Callable[[Any, Any], Any], mode: str,
                 this_side: bool) -> None:
        self.other_store = other_store
        self.joiner = joiner
        self.mode = mode
        self.this_side = this_side  # True: the table ``join`` was called on (the left)

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        self.other = context.get_state_store(self.other_store)
        # may this side's row join a missing row of the other side?
        self.alone_ok = self.mode == "outer" or (self.mode == "left" and self.this_side)
        # may the other side's row stand without a row of this side?
        self.other_alone_ok = self.mode == "outer" or (self.mode == "left"
                                                       and not self.this_side)

    def _join(self, mine: Any, theirs: Any) -> Any:
        if mine is None and (theirs is None or not self.other_alone_ok):
            return None
        if theirs is None and not self.alone_ok:
            return None
        return self.joiner(mine, theirs) if self.this_side else self.joiner(theirs, mine)

    def process(self, record: Record) -> None:
        change: Change[Any] = record.value
        if not change.is_latest:
            # an update of a versioned table older than its key's latest version: the join
            # keeps the latest versions (Kafka Streams' KIP-914)
            self.context.record_dropped(self.name, OUT_OF_ORDER)
            return
        stored = self.other.get(record.key)
        theirs = None if stored is None else stored[0]
        new = self._join(change.new, theirs)
        old = self._join(change.old, theirs)
        if new is None and old is None:
            return
        ts = record.timestamp if stored is None else max(record.timestamp, stored[1])
        self.forward(Record(record.key, Change(new, old), ts, record.headers))


class TableJoinMerge(StoringProcessor):
    """The result table of a primary-key table-table join: both sides' changes, materialized
    (and cached) when a store is given."""

    def __init__(self, store_name: str | None) -> None:
        self.store_name = store_name

    def process(self, record: Record) -> None:
        change: Change[Any] = record.value
        if self.store_name is None:
            self.forward(record)
            return
        stored = self.store.get(record.key)
        old = None if stored is None else stored[0]
        if change.new is None and old is None:
            return
        self.emit(record.key, change.new, old, record)


@dataclass(frozen=True)
class _BufferTime:
    """The key under which a join's buffer keeps the largest timestamp it has seen."""


_BUFFER_TIME = _BufferTime()


class BufferedStreamTableJoin(StreamTableJoin):
    """A stream-table join with a grace period (Kafka Streams' KIP-923), for a versioned table:
    a stream record waits in a buffer until the largest timestamp the buffer has seen is
    ``grace`` past it, then joins the table as of its own timestamp, so a table update that
    arrives late, within the grace period, still meets the stream records it precedes. A
    record already more than ``grace`` behind that time joins at once (Kafka Streams'
    ``KStreamKTableJoinProcessor``); buffered records leave in timestamp order, then arrival
    order, each with its own timestamp and headers.

    The buffer is a store of the task (Kafka Streams' ``RocksDBTimeOrderedKeyValueBuffer``),
    committed with it: entries ``(timestamp, sequence) -> (key, value, headers)``, and the
    buffer's time. It is read once per task, at its first record (the buffer holds at most a
    grace period of records)."""

    def __init__(self, store_name: str, joiner: Callable[[Any, Any], Any], left: bool,
                 grace_ms: int, buffer_name: str) -> None:
        super().__init__(store_name, joiner, left)
        self.grace = grace_ms
        self.buffer_name = buffer_name

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        self.buffer = context.get_state_store(self.buffer_name)
        self._loaded = False
        self._observed = -1
        self._seq = 0
        self._held: list[tuple[int, int]] = []

    def _load(self) -> None:
        """Read the buffer left by earlier batches: its time and what it holds."""
        self._loaded = True
        for key, value in self.buffer.items():
            if type(key) is _BufferTime:
                self._observed = value[0]
            else:
                self._held.append(key)
                self._seq = max(self._seq, key[1] + 1)
        heapq.heapify(self._held)

    def process(self, record: Record) -> None:
        if record.key is None or record.value is None:
            self.context.record_dropped(self.name, "null key or value in a stream-table join")
            return
        if not self._loaded:
            self._load()
        ts = record.timestamp
        if self._observed - self.grace > ts:
            self.join(record)  # too late to wait for the table: joined at once
            return
        slot = (ts, self._seq)
        self._seq += 1
        self.buffer.put(slot, (record.key, record.value, record.headers))
        heapq.heappush(self._held, slot)
        if ts > self._observed:
            self._observed = ts
            self.buffer.put(_BUFFER_TIME, (ts, ts))
        limit = self._observed - self.grace
        held = self._held
        while held and held[0][0] <= limit:
            slot = heapq.heappop(held)
            key, value, headers = self.buffer.delete(slot)
            self.join(Record(key, value, slot[0], headers))
