"""Punctuation schedules of one task (Kafka Streams' ``PunctuationQueue``).

A schedule fires when the time it is driven by (stream time, or the host's wall clock) reaches
its next time; it fires once per check, however many intervals were missed, and its next time
becomes the first multiple of the interval after the current time (``PunctuationSchedule.next``).
Stream-time schedules start at 0, so the first record of a task fires them; wall-clock ones one
interval after they were scheduled.

The next times live in a store of the task, so they are task state like any other: the Spark
runtime builds a task anew for each micro-batch (its processors' ``init`` schedules again), and
the store makes that the continuation of the earlier schedule, exactly once under replay. A
schedule is known by its processor and the order of its ``schedule`` call in that processor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtable.engine.ports import KeyValueStore
from streamtable.processors.api import PunctuationType, Punctuator


class Schedule:
    """One scheduled punctuation; ``cancel()`` stops it (for good: the cancellation is task
    state too)."""

    __slots__ = ("node", "key", "interval", "type", "punctuator", "next_time", "cancelled",
                 "_save")

    def __init__(self, node: str, key: tuple[str, int], interval: int, kind: PunctuationType,
                 punctuator: Punctuator, next_time: int, cancelled: bool,
                 save: Callable[[Schedule], None]) -> None:
        self.node = node
        self.key = key
        self.interval = interval
        self.type = kind
        self.punctuator = punctuator
        self.next_time = next_time
        self.cancelled = cancelled
        self._save = save

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self._save(self)

    def advance(self, now: int) -> None:
        """Move past ``now``: to the next interval, or the first multiple after ``now``."""
        nxt = self.next_time + self.interval
        if now >= nxt:
            nxt = self.next_time + ((now - self.next_time) // self.interval + 1) * self.interval
        self.next_time = nxt
        self._save(self)

    def __repr__(self) -> str:
        return (f"Schedule({self.node!r}, every {self.interval} ms of {self.type.name}, "
                f"next {self.next_time}{', cancelled' if self.cancelled else ''})")


class Punctuations:
    """The schedules of one task, kept in ``store`` (created on the first ``schedule``)."""

    def __init__(self, store_factory: Callable[[], KeyValueStore]) -> None:
        self._store_factory = store_factory
        self._store: KeyValueStore | None = None
        self.schedules: list[Schedule] = []
        self._calls: dict[str, int] = {}

    def _saved(self) -> KeyValueStore:
        if self._store is None:
            self._store = self._store_factory()
        return self._store

    def _save(self, s: Schedule) -> None:
        self._saved().put(s.key, (s.next_time, s.cancelled))

    def schedule(self, node: str, interval_ms: int, kind: PunctuationType,
                 punctuator: Punctuator, stream_time: int, wall_clock_ms: int) -> Schedule:
        if not isinstance(kind, PunctuationType):
            raise TypeError(f"punctuation type must be a PunctuationType, got {kind!r}")
        if int(interval_ms) < 1:
            raise ValueError(f"the punctuation interval must be at least 1 ms, got {interval_ms}")
        seq = self._calls.get(node, 0)
        self._calls[node] = seq + 1
        key = (node, seq)
        saved: Any = self._saved().get(key)
        if saved is not None:
            next_time, cancelled = saved
        else:
            # Kafka: stream time aligned to 0 (fires as soon as there is data), wall-clock
            # time one interval from now
            next_time = 0 if kind is PunctuationType.STREAM_TIME else wall_clock_ms + interval_ms
            cancelled = False
        s = Schedule(node, key, int(interval_ms), kind, punctuator, next_time, cancelled,
                     self._save)
        if saved is None:
            self._save(s)
        self.schedules.append(s)
        return s

    def has(self, kind: PunctuationType) -> bool:
        return any(s.type is kind and not s.cancelled for s in self.schedules)

    def due(self, kind: PunctuationType, now: int) -> Schedule | None:
        """The schedule of ``kind`` to fire first at ``now`` (earliest next time, then the
        order of scheduling), if any."""
        best = None
        for s in self.schedules:
            if (s.type is kind and not s.cancelled and s.next_time <= now
                    and (best is None or s.next_time < best.next_time)):
                best = s
        return best
