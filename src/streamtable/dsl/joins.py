"""Building the stream-stream, stream-table and stream-GlobalKTable joins of :class:`KStream`,
and their configuration objects (:class:`StreamJoined`, :class:`Joined`)."""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from streamtable.dsl.builder import params_text
from streamtable.durations import Duration, to_ms
from streamtable.errors import TopologyError
from streamtable.processors.stateless import PassThrough
from streamtable.processors.stream_join import StreamJoinWindow, StreamStreamJoin
from streamtable.topology.graph import NodeKind, StoreSpec
from streamtable.windowing import JoinWindows

if TYPE_CHECKING:
    from streamtable.dsl.builder import StreamsBuilder
    from streamtable.dsl.global_table import GlobalKTable
    from streamtable.dsl.stream import KStream
    from streamtable.dsl.table import KTable


@dataclass(frozen=True)
class StreamJoined:
    """Names the stores of a stream-stream join as Kafka Streams' ``StreamJoined`` does: with
    ``with_store_name("orders")`` an inner join's are ``orders-this-join-store`` and
    ``orders-other-join-store``; a left join's ``orders-this-join-store``,
    ``orders-outer-other-join-store`` and ``orders-left-shared-join-store``; an outer join's
    ``orders-outer-this-join-store``, ``orders-outer-other-join-store`` and
    ``orders-outer-shared-join-store``.

    >>> StreamJoined.with_store_name("orders").store_name
    'orders'
    """

    store_name: str | None = None

    @classmethod
    def with_store_name(cls, name: str) -> StreamJoined:
        """The join's stores named after ``name`` (see the class's example)."""
        return cls(store_name=name)


class _ClassOrInstance:
    """A method of a configuration object callable on the class as on an instance (Kafka
    Streams' static factories and their ``with...`` twins are one name here): on the class it
    starts from the defaults."""

    def __init__(self, method: Callable[..., Any]) -> None:
        self._method = method
        self.__doc__ = method.__doc__

    def __get__(self, obj: Any, owner: type) -> Any:
        return types.MethodType(self._method, owner() if obj is None else obj)


@dataclass(frozen=True)
class Joined:
    """Configures a stream-table join (Kafka Streams' ``Joined``): its processor's name and a
    grace period (KIP-923). With a grace period, which needs a versioned table, each stream
    record waits until the stream's time is the grace period past it, then joins the table
    as of its own timestamp, so a table update arriving late (but within the grace period)
    still meets the stream records it precedes.

    >>> from datetime import timedelta
    >>> Joined.with_grace_period(timedelta(seconds=10)).grace_period_ms
    10000
    >>> Joined.as_("enrich").with_grace_period(500)
    Joined(name='enrich', grace_period_ms=500)
    """

    name: str | None = None
    grace_period_ms: int | None = None

    @classmethod
    def as_(cls, name: str) -> Joined:
        """Name the join's processor (and its buffer store, ``<name>-Buffer``)."""
        return cls(name=name)

    @_ClassOrInstance
    def with_grace_period(self, grace: Duration) -> Joined:
        """Hold stream records back for ``grace`` (ms or ``timedelta``) before they join (see
        the class's example); on the class, or on a ``Joined`` already made."""
        ms = to_ms(grace, "grace")
        if ms < 0:
            raise ValueError(f"a join's grace period must not be negative, not {ms} ms")
        return replace(self, grace_period_ms=ms)

    @_ClassOrInstance
    def with_name(self, name: str) -> Joined:
        """Name the join's processor."""
        return replace(self, name=name)


def join_table(stream: KStream, table: KTable, joiner: Callable[[Any, Any], Any], left: bool,
               named: str | None, joined: Joined | None) -> KStream:
    """Kafka Streams' ``KStreamKTableJoin``: a stream record looks the table up (as of its
    timestamp when the table is versioned, after the grace period when one is set)."""
    from streamtable.dsl.stream import KStream
    from streamtable.processors.join import BufferedStreamTableJoin, StreamTableJoin

    if table._store is None:
        raise TopologyError("the table of a stream-table join must be materialized: pass "
                            "materialized= to the operator that created it")
    b = stream._builder
    node = stream._node
    if stream._repartition_required:
        node = repartitioned_like(stream, "KSTREAM-JOIN-REPARTITION", table._node)
    joined = joined or Joined()
    name = b.new_name("KSTREAM-JOIN" if not left else "KSTREAM-LEFTJOIN",
                      named or joined.name)
    store = table._store
    grace = joined.grace_period_ms
    if grace is None:
        b.add_node(name, lambda: StreamTableJoin(store, joiner, left), [node], stores=[store],
                   reads=[store])
        return KStream(b, name)
    spec = b._stores[store]
    if spec.kind != "versioned":
        raise TopologyError(
            f"the table of the stream-table join {name!r} must be versioned to use a grace "
            f"period (store {store!r} is not; Kafka Streams: 'KTable must be versioned to use a "
            "grace period in a stream table join'): materialize it with Materialized.as_("
            "Stores.persistent_versioned_key_value_store(name, history_retention))")
    if (spec.retention_ms or 0) < grace:
        raise TopologyError(
            f"the stream-table join {name!r} has a grace period of {grace} ms, longer than the "
            f"history retention of its versioned table's store {store!r} ({spec.retention_ms} "
            "ms): the history retention must be at least the grace period")
    # Kafka Streams names the buffer after the join; a generated join name is a counter, so
    # a generated buffer name is a stable one (as every generated store name is)
    if named or joined.name:
        buffer, legacy = f"{name}-Buffer", None
    else:
        buffer, legacy = b.generated_store_name("KSTREAM-JOIN", [node], suffix="-Buffer",
                                                legacy=f"{name}-Buffer")
    if buffer in b._stores:
        raise TopologyError(f"a store named {buffer!r} already exists")
    b._stores[buffer] = StoreSpec(name=buffer, caching=False, legacy_name=legacy)
    b.add_node(name, lambda: BufferedStreamTableJoin(store, joiner, left, grace, buffer),
               [node], stores=[store, buffer], reads=[store])
    return KStream(b, name)


def _internal_store(b: StreamsBuilder, name: str | None, legacy: str,
                    upstream: list[str]) -> str:
    """A join store: ``name`` (from ``StreamJoined``), or else a name generated from the
    join's inputs, which was ``legacy`` (the join node's name) before stable names."""
    legacy_name = None
    if name is None:
        prefix = legacy[:-len("-0000000000-store")]
        name, legacy_name = b.generated_store_name(prefix, upstream, suffix="-store",
                                                   legacy=legacy)
    if name in b._stores:
        raise TopologyError(f"a store named {name!r} already exists")
    # join stores are not cached (every join result is forwarded) nor queryable
    b._stores[name] = StoreSpec(name=name, caching=False, legacy_name=legacy_name)
    return name


def repartitioned_like(stream: KStream, base: str, like: str) -> str:
    """Repartition ``stream`` by its (changed) key before a join with the stream or table of
    node ``like``; returns the repartition source. When that side reads an external topic, the
    records go to the partition Kafka's default partitioner gives their key there, where its
    records of the same key are (that topic must then be written with that partitioner, which
    its source checks); otherwise both sides are routed by the same hash."""
    b = stream._builder
    source = b.repartition(stream._node, b.new_name(base))
    like_source = b.source_of(like)
    if not any(b._topics[t].internal for t in like_source.topics):
        topic = b._nodes[source].topics[0]
        for node in b._nodes.values():
            if node.kind is NodeKind.SINK and node.topics == [topic]:
                node.options["partition_like"] = like_source.name
        like_source.options["check_partitioner"] = True
    return source


def _copartitioned(stream: KStream, other: KStream, side: str) -> str:
    """The node of ``stream`` to join from: repartitioned by its key when an operator changed
    it (placed like the other side's records when only this side is repartitioned)."""
    if not stream._repartition_required:
        return stream._node
    if other._repartition_required:
        b = stream._builder
        return b.repartition(stream._node, b.new_name(f"KSTREAM-JOIN{side}-REPARTITION"))
    return repartitioned_like(stream, f"KSTREAM-JOIN{side}-REPARTITION", other._node)


def join_streams(this: KStream, other: KStream, joiner: Callable[[Any, Any], Any],
                 windows: JoinWindows, mode: str, stream_joined: StreamJoined | str | None,
                 named: str | None) -> KStream:
    """Kafka Streams' ``KStreamImplJoin``: a windowing processor and a join processor per side,
    both feeding one merge node. ``mode``: inner, left or outer."""
    from streamtable.dsl.stream import KStream

    if not isinstance(windows, JoinWindows):
        raise TypeError("a stream-stream join needs JoinWindows, e.g. "
                        "JoinWindows.of_time_difference_and_grace(60_000, 10_000)")
    b = this._builder
    joined = (StreamJoined.with_store_name(stream_joined) if isinstance(stream_joined, str)
              else stream_joined or StreamJoined())
    left_outer = mode in ("left", "outer")
    right_outer = mode == "outer"
    this_node = _copartitioned(this, other, "THIS")
    other_node = _copartitioned(other, this, "OTHER")
    this_windowed = b.new_name("KSTREAM-WINDOWED")
    other_windowed = b.new_name("KSTREAM-WINDOWED")
    join_this = b.new_name("KSTREAM-OUTERTHIS" if right_outer else "KSTREAM-JOINTHIS")
    join_other = b.new_name("KSTREAM-OUTEROTHER" if left_outer else "KSTREAM-JOINOTHER")
    merge = b.new_name("KSTREAM-MERGE", named)
    base = joined.store_name
    this_suffix = "-outer-this-join" if right_outer else "-this-join"
    other_suffix = "-outer-other-join" if left_outer else "-other-join"
    inputs = [this_node, other_node]
    this_store = _internal_store(b, f"{base}{this_suffix}-store" if base else None,
                                 f"{join_this}-store", inputs)
    other_store = _internal_store(b, f"{base}{other_suffix}-store" if base else None,
                                  f"{join_other}-store", inputs)
    outer_store = None
    if left_outer:
        shared_suffix = "-outer-shared-join" if right_outer else "-left-shared-join"
        shared = join_this.replace("JOINTHIS", "OUTERSHARED").replace("OUTERTHIS",
                                                                      "OUTERSHARED")
        outer_store = _internal_store(b, f"{base}{shared_suffix}-store" if base else None,
                                      f"{shared}-store", inputs)
    held = [outer_store] if outer_store else []
    for store in (this_store, other_store, *held):
        b._stores[store].params = params_text(windows)  # what the stores keep, and how long
    b.add_node(this_windowed, lambda: StreamJoinWindow(this_store, windows), [this_node],
               stores=[this_store])
    b.add_node(other_windowed, lambda: StreamJoinWindow(other_store, windows), [other_node],
               stores=[other_store])
    b.add_node(join_this, lambda: StreamStreamJoin(True, other_store, outer_store, windows,
                                                   joiner, left_outer),
               [this_windowed], stores=[other_store, *held], reads=[other_store])
    b.add_node(join_other, lambda: StreamStreamJoin(False, this_store, outer_store, windows,
                                                    joiner, right_outer),
               [other_windowed], stores=[this_store, *held], reads=[this_store])
    b.add_node(merge, PassThrough, [join_this, join_other])
    return KStream(b, merge)


def join_global(stream: KStream, table: GlobalKTable, key_selector: Callable[[Any, Any], Any],
                joiner: Callable[[Any, Any], Any], left: bool, named: str | None) -> KStream:
    """Kafka Streams' ``KStreamGlobalKTableJoin``: no repartitioning, every task sees the whole
    global table."""
    from streamtable.dsl.stream import KStream
    from streamtable.processors.join import StreamGlobalTableJoin

    if not callable(key_selector) or not callable(joiner):
        raise TypeError("a stream-global table join is join(global_table, key_selector, joiner)")
    b = stream._builder
    name = b.new_name("KSTREAM-JOIN" if not left else "KSTREAM-LEFTJOIN", named)
    store = table.store_name
    node = b.add_node(name, lambda: StreamGlobalTableJoin(store, key_selector, joiner, left),
                      [stream._node])
    node.options["global_stores"] = [store]
    return KStream(b, name, stream._repartition_required)
