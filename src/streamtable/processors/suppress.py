"""``KTable.suppress``: hold a table's changes back (Kafka Streams' ``KTableSuppressProcessor``):
until a windowed table's windows close (``Suppressed.until_window_closes``: one final result per
window), or for a time limit per key (``Suppressed.until_time_limit``: the latest value of a key
once stream time is that far past its first held change).

The buffer is a store of the task, so it is state like any other: committed with the task and
exactly-once through a crash on Spark. A change is held under its window's end. Closed windows
are forwarded when the task commits, after the record caches upstream have forwarded everything
they held: a window whose end plus the windows' grace period is at most the task's stream time
then can never change again (the aggregation drops later records for it as late), so its latest
value is final and forwarded once, as ``Change(final, value before the first held change)`` with
the timestamp of its latest change. (Evicting while a cache upstream is still flushing could
forward a window before its last change arrives: caches reorder changes in time.)

With a time limit, a key's changes are held from its first held change on, and forwarded as one
change once the largest timestamp the suppression has seen is ``time_limit`` past it, right when
the record that moved time on arrives (Kafka Streams evicts then; nothing is final here, so no
wait for the caches). That largest timestamp is kept in the buffer store too, so it survives a
restart and each micro-batch of the Spark runtime starts where the last one ended.
"""

from __future__ import annotations

import heapq
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamtable.errors import ProcessingError
from streamtable.processors._operator import InternalProcessorContext, Operator
from streamtable.processors.api import Change, Record
from streamtable.state.stores import key_order
from streamtable.windowing import BufferConfig


@dataclass(frozen=True)
class ObservedStreamTime:
    """The key under which a time-limit buffer keeps the largest timestamp it has seen."""


_OBSERVED = ObservedStreamTime()


class SuppressionBuffer(Operator):
    """What both suppressions share: held changes in a store of the task, one entry per key,
    ``(newest value, value before the first held change, buffer time, timestamp, headers)``,
    forwarded in buffer-time order, and the bounds of the buffer."""

    def __init__(self, store_name: str, buffer: BufferConfig) -> None:
        self.store_name = store_name
        self.buffer = buffer

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        self._observed = -1
        # The held keys grouped by buffer time: the distinct times in a heap, each time's keys
        # in a list. Keys held at one time leave in key order (Kafka Streams: by key bytes),
        # whatever order a restored buffer lists them in: a group is sorted once when its turn
        # comes (a windowed table's buffer holds every key of a window under one time, and a
        # heap of keys would compare their orders some 40 times each to pop them).
        self._times: list[int] = []
        self._by_time: dict[int, list[Any]] = {}
        self._unsorted: set[int] = set()
        self._count = 0
        self._bytes = 0
        for key, value in self.store.items():
            if key == _OBSERVED:
                self._observed = value
                continue
            if self._add(key, value[2]):
                self._times.append(value[2])
            if self.buffer.max_bytes is not None:
                self._bytes += len(pickle.dumps(value))
        heapq.heapify(self._times)

    def _add(self, key: Any, buffer_time: int) -> bool:
        """Group a newly held key under its buffer time; True if the time is new (the caller
        puts it in the heap)."""
        self._count += 1
        group = self._by_time.get(buffer_time)
        if group is None:
            self._by_time[buffer_time] = [key]
            return True
        group.append(key)
        self._unsorted.add(buffer_time)
        return False

    def _held(self) -> int:
        return self._count

    def hold(self, key: Any, change: Change[Any], buffer_time: int, record: Record) -> None:
        """Hold ``change`` of ``key``; a key held already keeps its buffer time."""
        held = self.store.get(key)
        first_old = change.old if held is None else held[1]
        if held is not None:
            buffer_time = held[2]
            if self.buffer.max_bytes is not None:
                self._bytes -= len(pickle.dumps(held))
        entry = (change.new, first_old, buffer_time, record.timestamp, record.headers)
        self.store.put(key, entry)
        if held is None and self._add(key, buffer_time):
            heapq.heappush(self._times, buffer_time)
        if self.buffer.max_bytes is not None:
            self._bytes += len(pickle.dumps(entry))

    def evict_while(self, condition: Callable[[int], bool],
                    forward_tombstones: bool = True) -> bool:
        """Forward held keys, oldest buffer time first, while ``condition(buffer time)``
        holds; True if any was forwarded."""
        times, by_time, unsorted = self._times, self._by_time, self._unsorted
        forwarded = False
        while times and condition(times[0]):
            time = times[0]
            group = by_time[time]
            if time in unsorted:  # the last key in order leaves first
                group.sort(key=key_order, reverse=True)
                unsorted.discard(time)
            key = group.pop()
            if not group:
                heapq.heappop(times)
                del by_time[time]
            self._count -= 1
            entry = self.store.get(key)
            self.store.delete(key)
            if self.buffer.max_bytes is not None:
                self._bytes -= len(pickle.dumps(entry))
            new, old, _time, ts, headers = entry
            if new is None and not forward_tombstones:
                continue
            self.forward(Record(key, Change(new, old), ts, headers))
            forwarded = True
        return forwarded

    def over_capacity(self) -> bool:
        limit_records, limit_bytes = self.buffer.max_records, self.buffer.max_bytes
        return ((limit_records is not None and self._held() > limit_records)
                or (limit_bytes is not None and self._bytes > limit_bytes))

    def enforce_capacity(self, advice: str) -> None:
        """A buffer over its bounds emits its oldest keys early, or stops the task."""
        if not self.over_capacity():
            return
        if self.buffer.when_full == "emit_early":
            self.evict_while(lambda _time: self.over_capacity())
            return
        meta = self.context.record_metadata()
        raise ProcessingError(
            f"the suppression buffer of store {self.store_name!r} is full "
            f"({self._held()} keys held, limits: {self.buffer.max_records} records, "
            f"{self.buffer.max_bytes} bytes); {advice}",
            topic=None if meta is None else meta.topic,
            partition=None if meta is None else meta.partition,
            offset=None if meta is None else meta.offset,
            processor=self.name,
        )


class SuppressUntilWindowCloses(SuppressionBuffer):
    """The suppression processor of a windowed table (its keys are ``Windowed``)."""

    def __init__(self, store_name: str, grace: int, buffer: BufferConfig) -> None:
        super().__init__(store_name, buffer)
        self.grace = grace

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        context.register_flush(self._emit_closed)

    def process(self, record: Record) -> None:
        self.hold(record.key, record.value, record.key.end, record)
        self.enforce_capacity("raise the limits or shorten the grace period")

    def _emit_closed(self) -> bool:
        """At a commit: forward the final result of every closed window; True if any."""
        close_time = self.context.stream_time - self.grace
        # a window created and deleted while held never existed for anyone downstream
        return self.evict_while(lambda end: end <= close_time, forward_tombstones=False)


class SuppressUntilTimeLimit(SuppressionBuffer):
    """Forwards a key's latest change once the largest timestamp seen is ``time_limit`` past
    the key's first held change (Kafka Streams' ``Suppressed.untilTimeLimit``)."""

    def __init__(self, store_name: str, time_limit: int, buffer: BufferConfig) -> None:
        super().__init__(store_name, buffer)
        self.time_limit = time_limit

    def process(self, record: Record) -> None:
        if record.timestamp > self._observed:
            self._observed = record.timestamp
            self.store.put(_OBSERVED, record.timestamp)
        self.hold(record.key, record.value, record.timestamp, record)
        expiry = self._observed - self.time_limit
        self.evict_while(lambda time: time <= expiry)
        self.enforce_capacity("raise the limits, shorten the time limit or emit early when full")
