"""The values that say how records are windowed and when results are emitted: the windows of
windowed aggregations and stream-stream joins, and ``KTable.suppress``'s and the windowed
aggregations' emission settings. Users build them; the DSL hands them to the operators.

>>> from streamtable import StreamsBuilder
>>> b = StreamsBuilder()
>>> (b.stream("clicks").group_by_key()
...  .windowed_by(TimeWindows.of(60_000).with_grace(10_000))
...  .count()
...  .suppress(Suppressed.until_window_closes()))  # doctest: +ELLIPSIS
<...KTable...>
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from streamtable.durations import Duration, to_ms
from streamtable.state.windowed import Windowed

__all__ = ["BufferConfig", "EmitStrategy", "JoinWindows", "SessionWindows", "SlidingWindows",
           "Suppressed", "TimeWindows", "Window", "Windowed", "Windows"]


def _grace(grace_ms: Duration) -> int:
    grace = to_ms(grace_ms, "grace_ms")
    if grace < 0:
        raise ValueError("grace must not be negative")
    return grace


@dataclass(frozen=True)
class TimeWindows:
    """Fixed-size windows, hopping by ``advance`` (tumbling when ``advance == size``), with a
    ``grace`` period for out-of-order records.

    >>> TimeWindows.of(600_000).advance_by(60_000).windows_for(90_000)
    [(0, 600000), (60000, 660000)]
    """

    size: int
    advance: int
    grace: int = 0

    @classmethod
    def of(cls, size_ms: Duration, grace_ms: Duration = 0) -> TimeWindows:
        """Tumbling windows of ``size_ms`` (ms or a ``timedelta``), with ``grace_ms`` of grace
        (default 0: a record later than its window's end is dropped).

        >>> from datetime import timedelta
        >>> TimeWindows.of(timedelta(minutes=1))
        TimeWindows(size=60000, advance=60000, grace=0)
        """
        size = to_ms(size_ms, "size_ms")
        if size <= 0:
            raise ValueError("window size must be positive")
        return cls(size, size, _grace(grace_ms))

    @classmethod
    def of_size_with_no_grace(cls, size_ms: Duration) -> TimeWindows:
        """Tumbling windows of ``size_ms`` without grace (Kafka Streams' ``ofSizeWithNoGrace``).

        >>> TimeWindows.of_size_with_no_grace(60_000).grace
        0
        """
        return cls.of(size_ms)

    @classmethod
    def of_size_and_grace(cls, size_ms: Duration, grace_ms: Duration) -> TimeWindows:
        """Tumbling windows of ``size_ms`` with ``grace_ms`` of grace (Kafka Streams'
        ``ofSizeAndGrace``).

        >>> from datetime import timedelta
        >>> TimeWindows.of_size_and_grace(timedelta(minutes=5), timedelta(seconds=30)).grace
        30000
        """
        return cls.of(size_ms, grace_ms)

    def advance_by(self, advance_ms: Duration) -> TimeWindows:
        """The same windows hopping by ``advance_ms`` (at most the size): a record falls in
        ``size / advance`` windows.

        >>> TimeWindows.of(60_000).advance_by(15_000).windows_for(70_000)
        [(15000, 75000), (30000, 90000), (45000, 105000), (60000, 120000)]
        """
        advance = to_ms(advance_ms, "advance_ms")
        if not 0 < advance <= self.size:
            raise ValueError("advance must be positive and at most the window size")
        return TimeWindows(self.size, advance, self.grace)

    def with_grace(self, grace_ms: Duration) -> TimeWindows:
        """The same windows accepting records up to ``grace_ms`` after a window's end; a window
        closes (and a suppressed or emit-final result is forwarded) when stream time passes
        its end plus the grace.

        >>> TimeWindows.of(60_000).with_grace(10_000).grace
        10000
        """
        return TimeWindows(self.size, self.advance, _grace(grace_ms))

    def windows_for(self, timestamp: int) -> list[tuple[int, int]]:
        """The windows ``(start, end)`` that contain ``timestamp``, earliest first."""
        start = max(0, timestamp - self.size + self.advance) // self.advance * self.advance
        out = []
        while start <= timestamp:
            out.append((start, start + self.size))
            start += self.advance
        return out


@dataclass(frozen=True)
class SessionWindows:
    """Sessions of activity per key, closed by ``gap`` ms of inactivity, with a ``grace``
    period for out-of-order records (Kafka Streams' ``SessionWindows``). A session's window is
    ``[first record's timestamp, last record's timestamp]``, both inclusive. A record at ``t``
    merges with the sessions of its key that end at ``t - gap`` or later and start at
    ``t + gap`` or earlier; a session is closed (final, and gone from the store with the default
    retention) once its end is before stream time minus gap and grace.

    >>> SessionWindows.of_inactivity_gap(300_000).with_grace(60_000)
    SessionWindows(gap=300000, grace=60000)
    """

    gap: int
    grace: int = 0

    @classmethod
    def of_inactivity_gap(cls, gap_ms: Duration) -> SessionWindows:
        """Sessions closed by ``gap_ms`` (ms or a ``timedelta``) without a record, no grace.

        >>> from datetime import timedelta
        >>> SessionWindows.of_inactivity_gap(timedelta(minutes=5))
        SessionWindows(gap=300000, grace=0)
        """
        gap = to_ms(gap_ms, "gap_ms")
        if gap <= 0:
            raise ValueError("the inactivity gap must be positive")
        return cls(gap)

    @classmethod
    def of_inactivity_gap_and_grace(cls, gap_ms: Duration, grace_ms: Duration) -> SessionWindows:
        """Sessions closed by ``gap_ms`` of inactivity, with ``grace_ms`` of grace.

        >>> SessionWindows.of_inactivity_gap_and_grace(300_000, 60_000).grace
        60000
        """
        return cls.of_inactivity_gap(gap_ms).with_grace(grace_ms)

    def with_grace(self, grace_ms: Duration) -> SessionWindows:
        """The same sessions accepting records up to ``grace_ms`` after a session's end.

        >>> SessionWindows.of_inactivity_gap(300_000).with_grace(0).grace
        0
        """
        return SessionWindows(self.gap, _grace(grace_ms))


@dataclass(frozen=True)
class SlidingWindows:
    """Windows of a fixed ``time_difference`` that slide along the records (both ends
    inclusive), with a ``grace`` period for out-of-order records.

    >>> SlidingWindows.of_time_difference_and_grace(10_000, 5_000)
    SlidingWindows(time_difference=10000, grace=5000)
    """

    time_difference: int
    grace: int = 0

    @classmethod
    def of_time_difference_and_grace(cls, time_difference_ms: Duration,
                                     grace_ms: Duration) -> SlidingWindows:
        """Windows of ``time_difference_ms`` (ms or a ``timedelta``) sliding along the
        records, accepting records up to ``grace_ms`` late.

        >>> from datetime import timedelta
        >>> SlidingWindows.of_time_difference_and_grace(timedelta(seconds=10), 0)
        SlidingWindows(time_difference=10000, grace=0)
        """
        difference = to_ms(time_difference_ms, "time_difference_ms")
        if difference < 0:
            raise ValueError("the time difference must not be negative")
        return cls(difference, _grace(grace_ms))

    @classmethod
    def of_time_difference_without_grace(cls, time_difference_ms: Duration) -> SlidingWindows:
        """Sliding windows of ``time_difference_ms`` without grace.

        >>> SlidingWindows.of_time_difference_without_grace(10_000).grace
        0
        """
        return cls.of_time_difference_and_grace(time_difference_ms, 0)


@dataclass(frozen=True)
class JoinWindows:
    """The time difference allowed between two joined records, and a grace period for
    out-of-order records (Kafka Streams' ``JoinWindows``).

    A left record at ``t`` joins right records in ``[t - before, t + after]``.

    >>> JoinWindows.of_time_difference_and_grace(100, 10)
    JoinWindows(before=100, after=100, grace=10)
    >>> JoinWindows.of_time_difference_with_no_grace(100).before(0)
    JoinWindows(before=0, after=100, grace=0)
    """

    before_ms: int
    after_ms: int
    grace_ms: int = 0

    @classmethod
    def of_time_difference_and_grace(cls, time_difference_ms: Duration,
                                     grace_ms: Duration) -> JoinWindows:
        """Records join when their timestamps differ by at most ``time_difference_ms`` (ms or
        a ``timedelta``); records up to ``grace_ms`` late still join.

        >>> from datetime import timedelta
        >>> JoinWindows.of_time_difference_and_grace(timedelta(minutes=1), timedelta(0))
        JoinWindows(before=60000, after=60000, grace=0)
        """
        difference = to_ms(time_difference_ms, "time_difference_ms")
        grace = to_ms(grace_ms, "grace_ms")
        if difference < 0 or grace < 0:
            raise ValueError("time difference and grace must not be negative")
        return cls(difference, difference, grace)

    @classmethod
    def of_time_difference_with_no_grace(cls, time_difference_ms: Duration) -> JoinWindows:
        """Records join when their timestamps differ by at most ``time_difference_ms``; no
        grace.

        >>> JoinWindows.of_time_difference_with_no_grace(5_000).grace_ms
        0
        """
        return cls.of_time_difference_and_grace(time_difference_ms, 0)

    of_time_difference_without_grace = of_time_difference_with_no_grace

    def before(self, time_difference_ms: Duration) -> JoinWindows:
        """The same windows, reaching ``time_difference_ms`` back from a left record.

        >>> JoinWindows.of_time_difference_with_no_grace(5_000).before(0).before_ms
        0
        """
        before = to_ms(time_difference_ms, "time_difference_ms")
        return self._checked(JoinWindows(before, self.after_ms, self.grace_ms))

    def after(self, time_difference_ms: Duration) -> JoinWindows:
        """The same windows, reaching ``time_difference_ms`` ahead of a left record.

        >>> JoinWindows.of_time_difference_with_no_grace(5_000).after(1_000).after_ms
        1000
        """
        after = to_ms(time_difference_ms, "time_difference_ms")
        return self._checked(JoinWindows(self.before_ms, after, self.grace_ms))

    @staticmethod
    def _checked(w: JoinWindows) -> JoinWindows:
        if w.before_ms + w.after_ms < 0:
            raise ValueError("window size (before + after) must not be negative")
        return w

    @property
    def size(self) -> int:
        """``before + after``: the span of the window around a record.

        >>> JoinWindows.of_time_difference_with_no_grace(5_000).size
        10000
        """
        return self.before_ms + self.after_ms

    @property
    def retention(self) -> int:
        """How long a side's window store keeps a record: size plus grace.

        >>> JoinWindows.of_time_difference_and_grace(5_000, 1_000).retention
        11000
        """
        return self.size + self.grace_ms

    def __repr__(self) -> str:
        return (f"JoinWindows(before={self.before_ms}, after={self.after_ms}, "
                f"grace={self.grace_ms})")


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
        """A buffer with no bound (the default of ``Suppressed``).

        >>> BufferConfig.unbounded()
        BufferConfig(max_records=None, max_bytes=None, when_full='shutdown')
        """
        return cls()

    @classmethod
    def max_records_of(cls, records: int) -> BufferConfig:
        """A buffer of at most ``records`` keys.

        >>> BufferConfig.max_records_of(1_000).max_records
        1000
        """
        return cls(max_records=records)

    @classmethod
    def max_bytes_of(cls, size: int) -> BufferConfig:
        """A buffer of at most ``size`` bytes of serialized keys and values.

        >>> BufferConfig.max_bytes_of(1 << 20).max_bytes
        1048576
        """
        return cls(max_bytes=size)

    def shutdown_when_full(self) -> BufferConfig:
        """When the buffer is full, the application stops with an error (the only choice for
        ``until_window_closes``).

        >>> BufferConfig.max_records_of(10).shutdown_when_full().when_full
        'shutdown'
        """
        return BufferConfig(self.max_records, self.max_bytes, "shutdown")

    def emit_early_when_full(self) -> BufferConfig:
        """When the buffer is full, its oldest keys are forwarded early (``until_time_limit``
        only).

        >>> BufferConfig.max_records_of(10).emit_early_when_full().when_full
        'emit_early'
        """
        return BufferConfig(self.max_records, self.max_bytes, "emit_early")


@dataclass(frozen=True)
class Suppressed:
    """What ``KTable.suppress`` holds back.

    >>> Suppressed.until_window_closes(BufferConfig.max_records_of(100)).buffer
    BufferConfig(max_records=100, max_bytes=None, when_full='shutdown')
    """

    buffer: BufferConfig
    time_limit: int | None = None  # None: until the window closes

    @classmethod
    def until_window_closes(cls, buffer: BufferConfig | None = None) -> Suppressed:
        """Hold each window's updates until the window closes (stream time passes its end
        plus grace), then forward its one final result; windowed tables only.

        >>> Suppressed.until_window_closes().time_limit is None
        True
        """
        buffer = buffer or BufferConfig.unbounded()
        if buffer.when_full != "shutdown":
            raise ValueError("until_window_closes needs a buffer that shuts down when full: "
                             "emitting early would not be a final result")
        return cls(buffer)

    @classmethod
    def until_time_limit(cls, time_to_wait_for_more_records: Duration,
                         buffer: BufferConfig | None = None) -> Suppressed:
        """Hold each key's changes for ``time_to_wait_for_more_records`` ms of stream time after
        its first held change, then forward its latest value (any table, windowed or not). A
        full buffer shuts down, or with ``emit_early_when_full()`` forwards its oldest keys.

        >>> Suppressed.until_time_limit(60_000, BufferConfig.max_records_of(1000)
        ...                             .emit_early_when_full()).time_limit
        60000
        """
        limit = to_ms(time_to_wait_for_more_records, "time_to_wait_for_more_records")
        if limit < 0:
            raise ValueError("the time limit must not be negative")
        return cls(buffer or BufferConfig.unbounded(), limit)


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
        """One final result per window, when it closes.

        >>> EmitStrategy.on_window_close().final
        True
        """
        return cls(True)

    @classmethod
    def on_window_update(cls) -> EmitStrategy:
        """Every update of a window (the default).

        >>> EmitStrategy.on_window_update().final
        False
        """
        return cls(False)


class Window(NamedTuple):
    """One window of a custom :class:`Windows`: ``[start, end)`` in epoch milliseconds
    (Kafka Streams' ``TimeWindow``).

    >>> Window(0, 86_400_000).end
    86400000
    """

    start: int
    end: int


class Windows:
    """The base class of custom windows (Kafka Streams' ``Windows<W>``), for
    ``group_by_key().windowed_by(MyWindows())`` with ``count``, ``reduce`` and ``aggregate``.

    A subclass says which windows a record's timestamp falls in, ``windows_for(timestamp)``
    (a dict of window start to :class:`Window`, or to a ``(start, end)`` pair; ``end`` is
    exclusive), the longest a window can be, ``size()`` (ms: the store keeps each window
    ``size() + grace_period_ms()`` past its start by default), and how long after its end a
    window still takes out-of-order records, ``grace_period_ms()`` (then it is closed: a later
    record for it is dropped and counted, and ``suppress(until_window_closes())`` emits it).
    Windows may differ in length: the :class:`Windowed` keys of the result carry each window's
    own start and end.

    Example: calendar days in a time zone (23 or 25 hours long on the days daylight saving
    time begins or ends):

    >>> from datetime import datetime, time, timedelta
    >>> from zoneinfo import ZoneInfo
    >>> class DailyWindows(Windows):
    ...     def __init__(self, zone: str, grace_ms: int = 0) -> None:
    ...         self.zone, self.grace_ms = ZoneInfo(zone), grace_ms
    ...     def windows_for(self, timestamp: int) -> dict[int, Window]:
    ...         day = datetime.fromtimestamp(timestamp / 1000, self.zone).date()
    ...         start, end = (datetime.combine(d, time(), self.zone)
    ...                       for d in (day, day + timedelta(days=1)))
    ...         window = Window(int(start.timestamp() * 1000), int(end.timestamp() * 1000))
    ...         return {window.start: window}
    ...     def size(self) -> int:
    ...         return 25 * 3_600_000  # the longest day
    ...     def grace_period_ms(self) -> int:
    ...         return self.grace_ms
    >>> days = DailyWindows("Europe/Paris")
    >>> ts = int(datetime(2026, 3, 29, 12, tzinfo=ZoneInfo("Europe/Paris")).timestamp() * 1000)
    >>> [(w.end - w.start) // 3_600_000 for w in days.windows_for(ts).values()]  # DST begins
    [23]
    >>> from streamtable import StreamsBuilder
    >>> per_day = (StreamsBuilder().stream("sales").group_by_key()
    ...            .windowed_by(DailyWindows("Europe/Paris", grace_ms=3_600_000))
    ...            .reduce(lambda total, amount: total + amount, "sales-per-day"))
    """

    def windows_for(self, timestamp: int) -> dict[int, Window | tuple[int, int]]:
        """The windows ``timestamp`` falls in, by start."""
        raise NotImplementedError(f"{type(self).__name__} must define windows_for(timestamp)")

    def size(self) -> int:
        """The longest window, in ms."""
        raise NotImplementedError(f"{type(self).__name__} must define size()")

    def grace_period_ms(self) -> int:
        """How long after its end a window still takes records (default 0)."""
        return 0
