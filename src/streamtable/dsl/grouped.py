"""Grouped streams and tables: the inputs of aggregations."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from streamtable.dsl.builder import params_text
from streamtable.dsl.materialized import Materialized, as_materialized
from streamtable.processors import aggregate as agg
from streamtable.processors.custom_window import CustomWindowedAggregate
from streamtable.processors.sliding import SlidingWindowedAggregate
from streamtable.processors.stateless import DropNullKeys
from streamtable.processors.window import SessionWindowedAggregate, WindowedAggregate
from streamtable.serde import Serde
from streamtable.windowing import (
    EmitStrategy,
    SessionWindows,
    SlidingWindows,
    Suppressed,
    TimeWindows,
    Windows,
)

W = TypeVar("W", TimeWindows, SessionWindows, SlidingWindows)

if TYPE_CHECKING:
    from typing import Self

    from streamtable.dsl.stream import KStream
    from streamtable.dsl.table import KTable


class KGroupedStream:
    """A stream grouped by key, ready for ``count``, ``reduce`` or ``aggregate`` (or
    ``windowed_by`` first). Made by :meth:`KStream.group_by_key` or :meth:`KStream.group_by`.

    >>> from streamtable import StreamsBuilder, TopologyTestDriver
    >>> b = StreamsBuilder()
    >>> counts = b.stream("words").group_by(lambda k, word: word).count(materialized="counts")
    >>> driver = TopologyTestDriver(b.build())
    >>> driver.create_input_topic("words").pipe_value_list(["a", "b", "a"])
    >>> driver.get_key_value_store("counts").get("a")
    2
    """

    def __init__(
        self,
        stream: KStream,
        key_serde: Serde | str | None,
        value_serde: Serde | str | None,
        name: str | None,
        repartition: bool,
    ) -> None:
        self._stream = stream
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._name = name
        self._repartition = repartition

    def _aggregate(
        self,
        materialized: Materialized | str | None,
        prefix: str,
        make: Callable[[str, bool], Any],
        named: str | None,
        combine: bool = False,
        store_kind: str = "key-value",
    ) -> KTable:
        """The aggregation node ``make(store, combined)`` after a repartition when needed.
        ``combine``: records may be combined into partial counts before the repartition (for
        ``count``, and only with the internal serde, which carries any value)."""
        from streamtable.dsl.table import KTable

        b = self._stream._builder
        store = b.add_store(materialized, f"{prefix}-STATE-STORE", [self._stream._node])
        store.kind = store_kind
        store_name = store.name
        parent = self._stream._node
        combined = False
        if self._repartition:
            base = self._name or store.name
            filt = b.new_name("KSTREAM-FILTER")
            if combine and self._value_serde is None:
                # drops null keys too
                b.add_node(filt, lambda: agg.CountCombiner(store_name), [parent])
                combined = True
            else:
                b.add_node(filt, DropNullKeys, [parent])
            parent = b.repartition(filt, base, self._key_serde, self._value_serde)
        name = b.new_name(prefix, named)
        b.add_node(name, lambda: make(store_name, combined), [parent], stores=[store_name])
        return KTable(b, name, store_name)

    @overload
    def windowed_by(self, windows: TimeWindows) -> TimeWindowedKStream: ...

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedKStream: ...

    @overload
    def windowed_by(self, windows: SlidingWindows) -> SlidingWindowedKStream: ...

    @overload
    def windowed_by(self, windows: Windows) -> CustomWindowedKStream: ...

    def windowed_by(self, windows: TimeWindows | SessionWindows | SlidingWindows | Windows
                    ) -> (TimeWindowedKStream | SessionWindowedKStream | SlidingWindowedKStream
                          | CustomWindowedKStream):
        """Aggregate per time window: the result is a table keyed by
        :class:`~streamtable.windowing.Windowed` keys.

        >>> from streamtable import StreamsBuilder, TimeWindows
        >>> b = StreamsBuilder()
        >>> counts = (b.stream("notifications").group_by_key()
        ...     .windowed_by(TimeWindows.of(600_000).advance_by(60_000))
        ...     .count("notification-counts"))
        >>> sessions = (b.stream("clicks").group_by_key()
        ...     .windowed_by(SessionWindows.of_inactivity_gap(300_000)).count("sessions"))
        >>> last_minute = (b.stream("payments").group_by_key()
        ...     .windowed_by(SlidingWindows.of_time_difference_and_grace(60_000, 5_000))
        ...     .count("payments-in-any-minute"))

        Custom windows (a :class:`~streamtable.windowing.Windows` subclass, e.g. calendar days
        in a time zone) aggregate the same way.
        """
        if isinstance(windows, Windows):
            return CustomWindowedKStream(self, windows)
        if isinstance(windows, SessionWindows):
            return SessionWindowedKStream(self, windows)
        if isinstance(windows, SlidingWindows):
            return SlidingWindowedKStream(self, windows)
        return TimeWindowedKStream(self, windows)

    def count(self, materialized: Materialized | str | None = None, *,
              named: str | None = None) -> KTable:
        """The number of records per key, as a table.

        >>> from streamtable import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> counts = b.stream("words").group_by_key().count("counts")
        """
        return self._aggregate(
            materialized, "KSTREAM-AGGREGATE",
            lambda s, combined: agg.StreamCount(s, combined), named, combine=True,
        )

    def reduce(self, reducer: Callable[[Any, Any], Any],
               materialized: Materialized | str | None = None, *,
               named: str | None = None) -> KTable:
        """``reducer(aggregate, value)`` combines each record into its key's aggregate.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> longest = b.stream("words").group_by_key().reduce(
        ...     lambda a, w: max(a, w, key=len), materialized="longest")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("words").pipe_key_value_list(
        ...     [("en", "to"), ("en", "bee"), ("en", "a")])
        >>> driver.get_key_value_store("longest").get("en")
        'bee'
        """
        return self._aggregate(
            materialized, "KSTREAM-REDUCE", lambda s, _: agg.StreamReduce(s, reducer), named
        )

    def aggregate(self, initializer: Callable[[], Any],
                  aggregator: Callable[[Any, Any, Any], Any],
                  materialized: Materialized | str | None = None, *,
                  named: str | None = None) -> KTable:
        """``aggregator(key, value, aggregate)`` starting from ``initializer()``.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> pages = b.stream("views").group_by_key().aggregate(
        ...     set, lambda user, page, seen: seen | {page}, materialized="pages-seen")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("views").pipe_key_value_list(
        ...     [("ann", "/a"), ("ann", "/b"), ("ann", "/a")])
        >>> sorted(driver.get_key_value_store("pages-seen").get("ann"))
        ['/a', '/b']
        """
        return self._aggregate(
            materialized, "KSTREAM-AGGREGATE",
            lambda s, _: agg.StreamAggregate(s, initializer, aggregator), named,
        )


class _WindowedKStream(Generic[W]):
    """What time-, sliding- and session-windowed streams share: their grouped stream, windows
    and emit strategy, and how an aggregation's table is finished."""

    def __init__(self, grouped: KGroupedStream, windows: W,
                 emit: EmitStrategy | None = None) -> None:
        self._grouped = grouped
        self._windows: W = windows
        self._emit = emit or EmitStrategy.on_window_update()

    def emit_strategy(self, strategy: EmitStrategy) -> Self:
        """``EmitStrategy.on_window_close()``: forward one final result per window.

        >>> from streamtable import EmitStrategy, StreamsBuilder, TimeWindows
        >>> final = (StreamsBuilder().stream("clicks").group_by_key()
        ...     .windowed_by(TimeWindows.of(60_000)).emit_strategy(EmitStrategy.on_window_close())
        ...     .count("clicks-per-minute"))
        """
        return type(self)(self._grouped, self._windows, strategy)

    def _windowed(self, materialized: Materialized | str | None, prefix: str,
                  make: Callable[[str, int], Any], named: str | None, grace: int) -> KTable:
        """``make(store, retention)``: the aggregation processor; ``grace``: how long after
        its window's end a result may still change (what suppression waits for)."""
        retention = self._retention(as_materialized(materialized))
        kind = "session" if isinstance(self._windows, SessionWindows) else "window"
        table = self._grouped._aggregate(materialized, prefix,
                                         lambda s, _: make(s, retention), named,
                                         store_kind=kind)
        table._grace = grace
        assert table._store is not None
        # the windows decide what the store's keys mean
        self._grouped._stream._builder._stores[table._store].params = params_text(
            self._windows, retention)
        return table.suppress(Suppressed.until_window_closes()) if self._emit.final else table

    def _retention(self, materialized: Materialized | None) -> int:
        """The store's retention: ``Materialized.with_retention`` or Kafka Streams' default,
        which is also the least a store needs to hold every window that can still change."""
        w = self._windows
        if isinstance(w, SessionWindows):
            least, what = w.gap + w.grace, "the inactivity gap plus the grace period"
        elif isinstance(w, SlidingWindows):
            least = 2 * w.time_difference + w.grace
            what = "twice the time difference plus the grace period"
        elif isinstance(w, Windows):
            least, what = w.size() + w.grace_period_ms(), "size() plus grace_period_ms()"
        else:
            least, what = w.size + w.grace, "the window size plus the grace period"
        retention = None if materialized is None else materialized.retention
        if retention is None:
            return least
        if retention < least:
            name = materialized.name if materialized is not None else None
            raise ValueError(f"the retention of store {name!r} ({retention} ms) must be no "
                             f"smaller than {what} ({least} ms)")
        return retention


class _NonMergingWindowedKStream(_WindowedKStream[W]):
    """Time and sliding windows, which never merge: ``count`` and ``reduce`` are aggregations
    per window. A subclass names its node (``_prefix``), its operator and how many ms after
    its grace period a window is final."""

    _prefix: str
    _operator: Callable[..., Any]
    _final_after_grace: int

    def count(self, materialized: Materialized | str | None = None, *,
              named: str | None = None) -> KTable:
        """The number of records per window."""
        return self.aggregate(_zero, _count_one, materialized, named=named)

    def reduce(self, reducer: Callable[[Any, Any], Any],
               materialized: Materialized | str | None = None, *,
               named: str | None = None) -> KTable:
        """``reducer(aggregate, value)`` per window, from the window's first value."""
        return self.aggregate(_first, _reducing(reducer), materialized, named=named)

    def aggregate(self, initializer: Callable[[], Any],
                  aggregator: Callable[[Any, Any, Any], Any],
                  materialized: Materialized | str | None = None, *,
                  named: str | None = None) -> KTable:
        """``aggregator(key, value, aggregate)`` from ``initializer()`` per window."""
        windows = self._windows
        operator = self._operator
        return self._windowed(
            materialized, self._prefix,
            lambda s, r: operator(s, windows, initializer, aggregator, r), named,
            self._grace_ms() + self._final_after_grace,
        )

    def _grace_ms(self) -> int:
        """The windows' grace period."""
        grace: int = self._windows.grace
        return grace


class TimeWindowedKStream(_NonMergingWindowedKStream[TimeWindows]):
    """A grouped stream with time windows: ``count``, ``reduce``, ``aggregate`` per window."""

    _prefix = "KSTREAM-WINDOWED-AGGREGATE"
    _operator = WindowedAggregate
    _final_after_grace = 0


class CustomWindowedKStream(_NonMergingWindowedKStream[Any]):
    """A grouped stream with custom windows (a :class:`~streamtable.windowing.Windows`
    subclass): ``count``, ``reduce``, ``aggregate`` per window the windows give a record."""

    _prefix = "KSTREAM-WINDOWED-AGGREGATE"
    _operator = CustomWindowedAggregate
    _final_after_grace = 0

    def _grace_ms(self) -> int:
        windows: Windows = self._windows
        return windows.grace_period_ms()


class SlidingWindowedKStream(_NonMergingWindowedKStream[SlidingWindows]):
    """A grouped stream with sliding windows: ``count``, ``reduce``, ``aggregate`` per window
    (a table keyed by :class:`~streamtable.windowing.Windowed` keys whose ``end`` is
    inclusive).

    >>> from streamtable import SlidingWindows, StreamsBuilder
    >>> totals = (StreamsBuilder().stream("payments").group_by_key()
    ...     .windowed_by(SlidingWindows.of_time_difference_without_grace(60_000))
    ...     .reduce(lambda a, b: a + b, "payments-within-a-minute"))
    """

    _prefix = "KSTREAM-SLIDING-WINDOWED-AGGREGATE"
    _operator = SlidingWindowedAggregate
    # a sliding window includes its end: it is still open when stream time minus the grace
    # period reaches its end, and final only one millisecond later
    _final_after_grace = 1


class SessionWindowedKStream(_WindowedKStream[SessionWindows]):
    """A grouped stream with session windows: ``count``, ``reduce``, ``aggregate`` per session
    (a table keyed by :class:`~streamtable.windowing.Windowed` session keys)."""

    def count(self, materialized: Materialized | str | None = None, *,
              named: str | None = None) -> KTable:
        """The number of records per session."""
        return self.aggregate(_zero, _count_one, _sum_merger, materialized, named=named)

    def reduce(self, reducer: Callable[[Any, Any], Any],
               materialized: Materialized | str | None = None, *,
               named: str | None = None) -> KTable:
        """``reducer(aggregate, value)`` per session; merged sessions are reduced together."""
        def merger(key: Any, agg1: Any, agg2: Any) -> Any:
            if agg1 is _FIRST:
                return agg2
            return agg1 if agg2 is _FIRST else reducer(agg1, agg2)

        return self.aggregate(_first, _reducing(reducer), merger, materialized, named=named)

    def aggregate(self, initializer: Callable[[], Any],
                  aggregator: Callable[[Any, Any, Any], Any],
                  merger: Callable[[Any, Any, Any], Any],
                  materialized: Materialized | str | None = None, *,
                  named: str | None = None) -> KTable:
        """``aggregator(key, value, aggregate)`` from ``initializer()`` per session;
        ``merger(key, aggregate1, aggregate2)`` combines sessions a record joins together."""
        windows = self._windows
        return self._windowed(
            materialized, "KSTREAM-SESSION-WINDOWED-AGGREGATE",
            lambda s, r: SessionWindowedAggregate(s, windows, initializer, aggregator, merger,
                                                  r),
            # a session can change while its end plus gap and grace is not before stream time
            # (a record at end + gap merges with it): final one ms later (Kafka Streams' emit
            # final: end < stream time - gap - grace)
            named, windows.grace + windows.gap + 1,
        )


def _sum_merger(key: Any, a: int, b: int) -> int:
    return a + b


class _FirstValue:
    """The initial aggregate of a reduce: the first value replaces it. It is compared by
    identity, so it unpickles as the one instance (Spark ships topologies pickled, and a copy
    would make the first value look like an aggregate)."""

    __slots__ = ()

    def __reduce__(self) -> str:
        return "_FIRST"


_FIRST = _FirstValue()


def _first() -> object:
    return _FIRST


def _reducing(reducer: Callable[[Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    """The aggregator of a windowed ``reduce``: a window's first value, then
    ``reducer(aggregate, value)`` for each value after it."""
    def aggregator(key: Any, value: Any, agg: Any) -> Any:
        return value if agg is _FIRST else reducer(agg, value)

    return aggregator


def _zero() -> int:
    return 0


def _count_one(key: Any, value: Any, aggregate: int) -> int:
    return aggregate + 1


def _count_minus_one(key: Any, value: Any, aggregate: int) -> int:
    return aggregate - 1


class KGroupedTable:
    """A table re-grouped by a new key (always repartitioned), for aggregations that add the new
    value and subtract the old one. Made by :meth:`KTable.group_by`.

    >>> from streamtable import StreamsBuilder, TopologyTestDriver
    >>> b = StreamsBuilder()
    >>> users = b.table("users")
    >>> per_city = users.group_by(lambda user, u: (u["city"], u)).count(materialized="per-city")
    >>> driver = TopologyTestDriver(b.build())
    >>> topic = driver.create_input_topic("users")
    >>> topic.pipe_input("ann", {"city": "Oslo"})
    >>> topic.pipe_input("ann", {"city": "Rome"})  # ann moves: Oslo -1, Rome +1
    >>> store = driver.get_key_value_store("per-city")
    >>> store.get("Oslo"), store.get("Rome")
    (0, 1)
    """

    def __init__(
        self,
        table_node: str,
        builder: Any,
        selector_node: str,
        key_serde: Serde | str | None,
        value_serde: Serde | str | None,
        name: str | None,
    ) -> None:
        self._builder = builder
        self._selector_node = selector_node
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._name = name

    def _aggregate(self, materialized: Materialized | str | None, prefix: str,
                   make: Callable[[str], Any], named: str | None) -> KTable:
        from streamtable.dsl.table import KTable

        b = self._builder
        store = b.add_store(materialized, f"{prefix}-STATE-STORE", [self._selector_node])
        base = self._name or store.name
        source = b.repartition(self._selector_node, base, self._key_serde, self._value_serde,
                               carries_changes=True)
        name = b.new_name(prefix, named)
        store_name = store.name
        b.add_node(name, lambda: make(store_name), [source], stores=[store_name])
        return KTable(b, name, store_name)

    def count(self, materialized: Materialized | str | None = None, *,
              named: str | None = None) -> KTable:
        """Rows per group; a group whose rows all left keeps a count of 0 (see the class's
        example)."""
        return self._aggregate(
            materialized, "KTABLE-AGGREGATE",
            lambda s: agg.TableAggregate(s, _zero, _count_one, _count_minus_one), named,
        )

    def reduce(self, adder: Callable[[Any, Any], Any], subtractor: Callable[[Any, Any], Any],
               materialized: Materialized | str | None = None, *,
               named: str | None = None) -> KTable:
        """``adder(aggregate, new_value)`` and ``subtractor(aggregate, old_value)``; a
        subtractor returning ``None`` deletes the group's row.

        >>> from streamtable import StreamsBuilder
        >>> positions = StreamsBuilder().table("share-holders")
        >>> us = (positions.group_by(lambda k, p: (p["client"], {p["id"]}))
        ...       .reduce(adder=lambda a, b: a | b,
        ...               subtractor=lambda a, b: (a - b) or None,
        ...               materialized="us-share-holders"))
        """
        return self._aggregate(
            materialized, "KTABLE-REDUCE", lambda s: agg.TableReduce(s, adder, subtractor), named
        )

    def aggregate(self, initializer: Callable[[], Any],
                  adder: Callable[[Any, Any, Any], Any],
                  subtractor: Callable[[Any, Any, Any], Any],
                  materialized: Materialized | str | None = None, *,
                  named: str | None = None) -> KTable:
        """``adder(key, value, aggregate)`` / ``subtractor(key, value, aggregate)`` from
        ``initializer()``; a result of ``None`` deletes the row.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> balances = b.table("accounts").group_by(lambda k, a: (a["branch"], a["balance"]))
        >>> total = balances.aggregate(lambda: 0, lambda k, v, agg: agg + v,
        ...                            lambda k, v, agg: agg - v, materialized="per-branch")
        >>> driver = TopologyTestDriver(b.build())
        >>> accounts = driver.create_input_topic("accounts")
        >>> accounts.pipe_input("a1", {"branch": "Oslo", "balance": 100})
        >>> accounts.pipe_input("a2", {"branch": "Oslo", "balance": 50})
        >>> accounts.pipe_input("a1", {"branch": "Oslo", "balance": 70})  # -100, +70
        >>> driver.get_key_value_store("per-branch").get("Oslo")
        120
        """
        return self._aggregate(
            materialized, "KTABLE-AGGREGATE",
            lambda s: agg.TableAggregate(s, initializer, adder, subtractor), named,
        )
