"""``KTable.suppress``: hold a windowed table's changes until its windows close, then forward
one final result per window (Kafka Streams' ``KTableSuppressProcessor`` with
``Suppressed.untilWindowCloses``).

The buffer is a store of the task, so it is state like any other: committed with the task and
exactly-once through a crash on Spark. A change is held under its window's end. Closed windows
are forwarded when the task commits, after the record caches upstream have forwarded everything
they held: a window whose end plus the windows' grace period is at most the task's stream time
then can never change again (the aggregation drops later records for it as late), so its latest
value is final and forwarded once, as ``Change(final, value before the first held change)`` with
the timestamp of its latest change. (Evicting while a cache upstream is still flushing could
forward a window before its last change arrives: caches reorder changes in time.)
"""

from __future__ import annotations

import heapq
import pickle
from dataclasses import dataclass
from typing import Any

from streamtable.errors import ProcessingError
from streamtable.processors.api import Change, Processor, ProcessorContext, Record


@dataclass(frozen=True)
class BufferConfig:
    """Bounds of a suppression buffer: ``max_records`` and ``max_bytes`` (``None``: unbounded),
    and what to do when full. Waiting for windows to close allows only ``shutdown_when_full``:
    emitting early would not be final.

    >>> BufferConfig.max_records_of(10_000).shutdown_when_full()
    BufferConfig(max_records=10000, max_bytes=None, when_full='shutdown')
    """

    max_records: int | None = None
    max_bytes: int | None = None
    when_full: str = "shutdown"

    @classmethod
    def unbounded(cls) -> BufferConfig:
        return cls()

    @classmethod
    def max_records_of(cls, records: int) -> BufferConfig:
        return cls(max_records=records)

    @classmethod
    def max_bytes_of(cls, size: int) -> BufferConfig:
        return cls(max_bytes=size)

    def shutdown_when_full(self) -> BufferConfig:
        return BufferConfig(self.max_records, self.max_bytes, "shutdown")

    def emit_early_when_full(self) -> BufferConfig:
        return BufferConfig(self.max_records, self.max_bytes, "emit_early")


@dataclass(frozen=True)
class Suppressed:
    """What ``KTable.suppress`` holds back.

    >>> Suppressed.until_window_closes(BufferConfig.unbounded())
    Suppressed(buffer=BufferConfig(max_records=None, max_bytes=None, when_full='shutdown'))
    """

    buffer: BufferConfig

    @classmethod
    def until_window_closes(cls, buffer: BufferConfig | None = None) -> Suppressed:
        buffer = buffer or BufferConfig.unbounded()
        if buffer.when_full != "shutdown":
            raise ValueError("until_window_closes needs a buffer that shuts down when full: "
                             "emitting early would not be a final result")
        return cls(buffer)


@dataclass(frozen=True)
class EmitStrategy:
    """When a windowed aggregation forwards its results (Kafka Streams' KIP-825):
    ``on_window_update()`` (the default: every change) or ``on_window_close()`` (one final
    result per window, like ``suppress(Suppressed.until_window_closes())``).

    >>> EmitStrategy.on_window_close()
    EmitStrategy(final=True)
    """

    final: bool = False

    @classmethod
    def on_window_close(cls) -> EmitStrategy:
        return cls(True)

    @classmethod
    def on_window_update(cls) -> EmitStrategy:
        return cls(False)


class SuppressUntilWindowCloses(Processor):
    """The suppression processor of a windowed table (its keys are ``Windowed``)."""

    def __init__(self, store_name: str, grace: int, buffer: BufferConfig) -> None:
        self.store_name = store_name
        self.grace = grace
        self.buffer = buffer

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        # (window end, key) of every held change; entries are checked against the store
        self._heap = [(value[2], i, key) for i, (key, value) in enumerate(self.store.items())]
        heapq.heapify(self._heap)
        self._seq = len(self._heap)
        self._bytes = (sum(len(pickle.dumps(v)) for _, v in self.store.items())
                       if self.buffer.max_bytes is not None else 0)
        context.register_flush(self._emit_closed)

    def process(self, record: Record) -> None:
        change: Change[Any] = record.value
        key = record.key
        held = self.store.get(key)
        first_old = change.old if held is None else held[1]
        if self.buffer.max_bytes is not None and held is not None:
            self._bytes -= len(pickle.dumps(held))
        entry = (change.new, first_old, key.end, record.timestamp, record.headers)
        self.store.put(key, entry)
        if held is None:
            heapq.heappush(self._heap, (key.end, self._seq, key))
            self._seq += 1
        if self.buffer.max_bytes is not None:
            self._bytes += len(pickle.dumps(entry))
        self._check_full(record)

    def _emit_closed(self) -> bool:
        """At a commit: forward the final result of every closed window; True if any."""
        close_time = self.context.stream_time - self.grace
        heap = self._heap
        forwarded = False
        while heap and heap[0][0] <= close_time:
            _, _, key = heapq.heappop(heap)
            entry = self.store.get(key)
            if entry is None:
                continue
            self.store.delete(key)
            if self.buffer.max_bytes is not None:
                self._bytes -= len(pickle.dumps(entry))
            new, old, _end, ts, headers = entry
            if new is None and old is None:
                continue
            self.forward(Record(key, Change(new, old), ts, headers))
            forwarded = True
        return forwarded

    def _check_full(self, record: Record) -> None:
        limit_records, limit_bytes = self.buffer.max_records, self.buffer.max_bytes
        full = ((limit_records is not None and len(self.store) > limit_records)
                or (limit_bytes is not None and self._bytes > limit_bytes))
        if full:
            meta = self.context.record_metadata()
            raise ProcessingError(
                f"the suppression buffer of store {self.store_name!r} is full "
                f"({len(self.store)} windows held, limits: {limit_records} records, "
                f"{limit_bytes} bytes); raise the limits or shorten the grace period",
                topic=None if meta is None else meta.topic,
                partition=None if meta is None else meta.partition,
                offset=None if meta is None else meta.offset,
                processor=self.name,
            )
