"""KTable: a changelog, the latest value per key."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtable.dsl.builder import StreamsBuilder, params_text, with_key
from streamtable.dsl.materialized import Materialized
from streamtable.processors import table as tp
from streamtable.serde import Serde

if TYPE_CHECKING:
    from streamtable.dsl.grouped import KGroupedTable
    from streamtable.dsl.stream import KStream
    from streamtable.windowing import Suppressed


class KTable:
    """A table whose every change is forwarded downstream as ``Change(new, old)``.

    >>> from streamtable import StreamsBuilder
    >>> positions = StreamsBuilder().table("share-holders", materialized="share-holder-store")
    >>> nasdaq = positions.filter(lambda key, p: p["exchange"] == "NASDAQ")
    """

    def __init__(self, builder: StreamsBuilder, node: str, store: str | None,
                 grace: int | None = None, versioned: bool = False) -> None:
        self._builder = builder
        self._node = node
        self._store = store
        # the grace period of the windows of a windowed aggregation's result table
        self._grace = grace
        # a versioned table (KIP-914): materialized in a versioned store upstream, with no
        # unversioned store or stateful operation since
        self._versioned = versioned

    @property
    def is_versioned(self) -> bool:
        """Whether this table is versioned (Kafka Streams' KIP-914): kept in a versioned store
        (``Materialized.as_(Stores.persistent_versioned_key_value_store(...))``), or derived
        from one by ``filter``, ``filter_not`` or ``map_values`` that keep it in no other
        store. A stream joins it as of each record's timestamp; out-of-order updates are kept
        in its history and do not change aggregations or table joins.

        >>> from streamtable import Materialized, StreamsBuilder, Stores
        >>> b = StreamsBuilder()
        >>> rates = b.table("rates", Materialized.as_(
        ...     Stores.persistent_versioned_key_value_store("rates", 600_000)))
        >>> rates.is_versioned, rates.filter(lambda k, v: v > 0).is_versioned
        (True, True)
        >>> rates.map_values(lambda v: v * 2, materialized="doubled").is_versioned
        False
        """
        return self._versioned

    @property
    def queryable_store_name(self) -> str | None:
        """The store users can query, if this table was materialized under a name.

        >>> from streamtable import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> b.table("users", materialized="users-store").queryable_store_name
        'users-store'
        >>> print(b.table("groups").queryable_store_name)
        None
        """
        if self._store is None:
            return None
        spec = self._builder._stores[self._store]
        return spec.name if spec.queryable else None

    def _then(self, prefix: str, make: Callable[[str | None], Any],
              materialized: Materialized | str | None, named: str | None) -> KTable:
        b = self._builder
        store = None
        versioned = self._versioned
        if materialized is not None:
            spec = b.add_store(materialized, f"{prefix}-STATE-STORE", [self._node],
                               versioned_ok=True)
            store, versioned = spec.name, spec.kind == "versioned"
        name = b.new_name(prefix, named)
        b.add_node(name, lambda: make(store), [self._node], stores=[store] if store else [])
        return KTable(b, name, store, versioned=versioned)

    def filter(self, predicate: Callable[[Any, Any], bool],
               materialized: Materialized | str | None = None, *,
               named: str | None = None) -> KTable:
        """Rows for which ``predicate(key, value)`` holds; a row that stops matching is deleted
        downstream.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> (b.table("users").filter(lambda k, u: u["active"])
        ...  .to_stream().to("out"))
        >>> driver = TopologyTestDriver(b.build())
        >>> users = driver.create_input_topic("users")
        >>> users.pipe_input("ann", {"active": True})
        >>> users.pipe_input("ann", {"active": False})
        >>> driver.create_output_topic("out").read_key_values()
        [('ann', {'active': True}), ('ann', None)]
        """
        versioned = self._versioned
        return self._then(
            "KTABLE-FILTER", lambda s: tp.TableFilter(predicate, False, s, versioned),
            materialized, named)

    def filter_not(self, predicate: Callable[[Any, Any], bool],
                   materialized: Materialized | str | None = None, *,
                   named: str | None = None) -> KTable:
        """Rows for which ``predicate(key, value)`` does not hold.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> idle = b.table("users").filter_not(lambda k, u: u["active"], materialized="inactive")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("users").pipe_input("bob", {"active": False})
        >>> driver.get_key_value_store("inactive").get("bob")
        {'active': False}
        """
        versioned = self._versioned
        return self._then(
            "KTABLE-FILTER", lambda s: tp.TableFilter(predicate, True, s, versioned),
            materialized, named)

    def map_values(self, mapper: Callable[..., Any],
                   materialized: Materialized | str | None = None, *,
                   named: str | None = None) -> KTable:
        """``mapper(value)`` or ``mapper(key, value)`` for every row.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> names = b.table("users").map_values(lambda u: u["name"], materialized="names")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("users").pipe_input("u1", {"name": "Ann"})
        >>> driver.get_key_value_store("names").get("u1")
        'Ann'
        """
        fn = with_key(mapper, "map_values")
        return self._then(
            "KTABLE-MAPVALUES", lambda s: tp.TableMapValues(fn, s), materialized, named
        )

    def suppress(self, suppressed: Suppressed, *, named: str | None = None) -> KTable:
        """Hold this table's changes back: ``Suppressed.until_window_closes()`` (a windowed
        table: one final result per window once stream time has passed its end plus the grace
        period) or ``Suppressed.until_time_limit(ms)`` (any table: a key's latest value once
        stream time is ``ms`` past its first held change).

        >>> from streamtable import StreamsBuilder, TimeWindows
        >>> from streamtable.windowing import BufferConfig, Suppressed
        >>> b = StreamsBuilder()
        >>> final = (b.stream("clicks").group_by_key()
        ...     .windowed_by(TimeWindows.of(60_000).with_grace(10_000)).count("counts")
        ...     .suppress(Suppressed.until_window_closes()))
        >>> calmer = (b.table("prices").suppress(Suppressed.until_time_limit(
        ...     5_000, BufferConfig.max_records_of(10_000).emit_early_when_full())))
        """
        from streamtable.errors import TopologyError
        from streamtable.processors.suppress import (
            SuppressUntilTimeLimit,
            SuppressUntilWindowCloses,
        )

        if self._versioned:
            raise TopologyError(
                "suppress() is not allowed on a versioned table (as in Kafka Streams): it would "
                "collapse the table's version history; materialize the table in a plain store "
                "first (e.g. map_values(..., materialized=...))")
        limit, grace, buffer = suppressed.time_limit, self._grace, suppressed.buffer
        if limit is None and grace is None:
            raise TopologyError(
                "suppress(until_window_closes) needs a windowed table: the result of a "
                "windowed_by(...) aggregation")
        b = self._builder
        name = b.new_name("KTABLE-SUPPRESS", named)
        # named after the node before stable names: <node>-STATE-STORE-<counter>
        store = b.add_store(None, f"{named or 'KTABLE-SUPPRESS'}-STATE-STORE", [self._node],
                            legacy_prefix=f"{name}-STATE-STORE").name
        b._stores[store].params = params_text(suppressed, grace)
        if limit is not None:
            b.add_node(name, lambda: SuppressUntilTimeLimit(store, limit, buffer), [self._node],
                       stores=[store])
            return KTable(b, name, None)
        assert grace is not None
        b.add_node(name, lambda: SuppressUntilWindowCloses(store, grace, buffer), [self._node],
                   stores=[store])
        return KTable(b, name, None)

    def to_stream(self, mapper: Callable[[Any, Any], Any] | None = None, *,
                  named: str | None = None) -> KStream:
        """The table's changelog as a stream: each change's new value (``None`` on delete).
        ``mapper(key, value)`` may pick a new key.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.table("users").to_stream(lambda k, u: u and u["name"]).to("out")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("users").pipe_input("u1", {"name": "Ann"})
        >>> driver.create_output_topic("out").read_key_values()
        [('Ann', {'name': 'Ann'})]
        """
        from streamtable.dsl.stream import KStream

        name = self._builder.new_name("KTABLE-TOSTREAM", named)
        self._builder.add_node(name, lambda: tp.TableToStream(mapper), [self._node])
        return KStream(self._builder, name, repartition_required=mapper is not None)

    def group_by(self, selector: Callable[[Any, Any], tuple[Any, Any]], *,
                 key_serde: Serde | str | None = None,
                 value_serde: Serde | str | None = None,
                 name: str | None = None) -> KGroupedTable:
        """Re-group rows by ``selector(key, value) -> (new_key, new_value)``: an aggregation
        of the result adds a row's new value under its new key and subtracts its old value
        under its old key (see :class:`KGroupedTable`'s example).

        >>> from streamtable import StreamsBuilder
        >>> by_city = StreamsBuilder().table("users").group_by(lambda k, u: (u["city"], k))
        """
        from streamtable.dsl.grouped import KGroupedTable

        b = self._builder
        node = b.new_name("KTABLE-SELECT")
        b.add_node(node, lambda: tp.TableGroupByMap(selector), [self._node])
        return KGroupedTable(self._node, b, node, key_serde, value_serde, name)

    # -- joins -----------------------------------------------------------------------------
    def join(self, other: KTable, joiner: Callable[[Any, Any], Any], *,
             foreign_key_extractor: Callable[[Any], Any] | None = None,
             materialized: Materialized | str | None = None,
             named: str | None = None) -> KTable:
        """Join with ``other`` on the primary key, or with ``foreign_key_extractor`` on a
        foreign key: each row of this table joins the row of ``other`` whose key is
        ``foreign_key_extractor(value)``. ``joiner(value, other_value)`` gives the result. A
        change of either side updates the result; a row without a match is absent.

        A primary-key join reads both tables' stores, so both must be materialized (a source
        table always is) and co-partitioned (the same number of partitions, keys placed alike).

        >>> from streamtable import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> ref = b.table("shares-ref-data")
        >>> enriched = b.table("share-holders").join(
        ...     ref, lambda p, r: {**p, "exchange": r["exchange"]},
        ...     foreign_key_extractor=lambda p: p["ticker"])
        >>> prices = b.table("prices")
        >>> priced = b.table("items").join(prices, lambda item, price: {**item, "price": price})
        """
        if foreign_key_extractor is None:
            return self._pk_join(other, joiner, "inner", materialized, named)
        return self._fk_join(other, joiner, foreign_key_extractor, False, materialized, named)

    def left_join(self, other: KTable, joiner: Callable[[Any, Any], Any], *,
                  foreign_key_extractor: Callable[[Any], Any] | None = None,
                  materialized: Materialized | str | None = None,
                  named: str | None = None) -> KTable:
        """Like :meth:`join`, but a row without a match joins with ``None``.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> (b.table("accounts").left_join(b.table("limits"), lambda a, limit: (a, limit))
        ...  .to_stream().to("out"))
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("accounts").pipe_input("a1", "Ann")
        >>> driver.create_input_topic("limits").pipe_input("a1", 500)
        >>> driver.create_output_topic("out").read_values()
        [['Ann', None], ['Ann', 500]]
        """
        if foreign_key_extractor is None:
            return self._pk_join(other, joiner, "left", materialized, named)
        return self._fk_join(other, joiner, foreign_key_extractor, True, materialized, named)

    def outer_join(self, other: KTable, joiner: Callable[[Any, Any], Any], *,
                   materialized: Materialized | str | None = None,
                   named: str | None = None) -> KTable:
        """Primary-key join in which a row of either side without a match joins with
        ``None`` (``joiner(value, None)`` or ``joiner(None, other_value)``).

        >>> from streamtable import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> both = b.table("a").outer_join(b.table("b"), lambda x, y: (x, y))
        """
        return self._pk_join(other, joiner, "outer", materialized, named)

    def _pk_join(self, other: KTable, joiner: Callable[[Any, Any], Any], mode: str,
                 materialized: Materialized | str | None, named: str | None) -> KTable:
        from streamtable.errors import TopologyError
        from streamtable.processors.join import TableJoinMerge, TableTableJoin

        for side, table in (("left", self), ("right", other)):
            if table._store is None:
                raise TopologyError(
                    f"the {side} table of a primary-key table join must be materialized: "
                    "pass materialized= to the operator that created it")
        b = self._builder
        left_store, right_store = self._store, other._store
        assert left_store is not None and right_store is not None
        prefix = {"inner": "KTABLE-JOIN", "left": "KTABLE-LEFTJOIN",
                  "outer": "KTABLE-OUTERJOIN"}[mode]
        this_side = b.new_name(f"{prefix}-THIS")
        other_side = b.new_name(f"{prefix}-OTHER")
        b.add_node(this_side, lambda: TableTableJoin(right_store, joiner, mode, this_side=True),
                   [self._node], stores=[right_store], reads=[right_store])
        b.add_node(other_side, lambda: TableTableJoin(left_store, joiner, mode, this_side=False),
                   [other._node], stores=[left_store], reads=[left_store])
        store = None
        if materialized is not None:
            store = b.add_store(materialized, f"{prefix}-STATE-STORE",
                                [this_side, other_side]).name
        merge = b.new_name("KTABLE-MERGE", named)
        b.add_node(merge, lambda: TableJoinMerge(store), [this_side, other_side],
                   stores=[store] if store else [])
        return KTable(b, merge, store)

    def _fk_join(self, other: KTable, joiner: Callable[[Any, Any], Any],
                 foreign_key: Callable[[Any], Any], left_join: bool,
                 materialized: Materialized | str | None, named: str | None) -> KTable:
        from streamtable.errors import TopologyError
        from streamtable.processors import fk_join as fk
        from streamtable.processors.io import SinkProcessor
        from streamtable.topology.graph import NodeKind

        if other._store is None:
            raise TopologyError(
                "the right table of a foreign-key join must be materialized: "
                "pass materialized= to the operator that created it"
            )
        b = self._builder
        both = [self._node, other._node]
        result = b.add_store(materialized, "KTABLE-FK-JOIN-OUTPUT-STATE-STORE", both)
        base = named or result.name
        sub_topic = f"{base}-subscription-registration"
        mirror_topic = f"{base}-subscription-mirror"
        response_topic = f"{base}-subscription-response"
        for t in (sub_topic, mirror_topic, response_topic):
            b.add_topic(t, internal=True, kind="repartition")
        right_source = b.source_of(other._node)
        right_external = not b._topics[right_source.topics[0]].internal
        if right_external:
            right_source.options["check_partitioner"] = True
        right_store = other._store

        send = b.new_name("KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION")
        sub_sink = b.new_name("KTABLE-SINK")
        mirror_sink = b.new_name("KTABLE-SINK")
        b.add_node(send, lambda: fk.SubscriptionSend(foreign_key, left_join, sub_sink,
                                                     mirror_sink), [self._node])
        sub_sink_node = b.add_node(sub_sink, lambda: SinkProcessor(sub_topic, None, None),
                                   [send], kind=NodeKind.SINK, topics=[sub_topic])
        if right_external:
            # subscriptions go to the partition of the right table's topic holding the key
            sub_sink_node.options["partition_like"] = right_source.name
        b.add_node(mirror_sink, lambda: SinkProcessor(mirror_topic, None, None), [send],
                   kind=NodeKind.SINK, topics=[mirror_topic])

        subs = b.add_store(None, "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE", both).name
        b._stores[subs].logging = True
        sub_source = b.add_source([sub_topic], None, None, internal=True)
        receive = b.new_name("KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR")
        b.add_node(receive, lambda: fk.SubscriptionReceive(subs, right_store), [sub_source],
                   stores=[subs, right_store], reads=[right_store])
        change = b.new_name("KTABLE-FK-JOIN-FOREIGN-CHANGE")
        b.add_node(change, lambda: fk.ForeignTableChange(subs), [other._node], stores=[subs],
                   reads=[subs])
        response_sink = b.new_name("KTABLE-SINK")
        b.add_node(response_sink, lambda: SinkProcessor(response_topic, None, None),
                   [receive, change], kind=NodeKind.SINK, topics=[response_topic])

        mirror = b.add_store(None, "KTABLE-FK-JOIN-MIRROR-STATE-STORE", both).name
        mirror_source = b.add_source([mirror_topic], None, None, internal=True)
        # a batch's left values before the answers about them (see processors.fk_join)
        b._nodes[mirror_source].options["process_first"] = True
        mirror_node = b.new_name("KTABLE-FK-JOIN-MIRROR")
        b.add_node(mirror_node, lambda: fk.LeftMirror(mirror), [mirror_source], stores=[mirror])
        response_source = b.add_source([response_topic], None, None, internal=True)
        out = b.new_name("KTABLE-FK-JOIN-OUTPUT")
        result_name = result.name
        b.add_node(out, lambda: fk.ResponseJoin(mirror, result_name, joiner, left_join),
                   [response_source], stores=[mirror, result_name], reads=[mirror])
        # one operation to the reader: diagrams draw these nodes as one box per sub-topology
        for node in (send, sub_sink, mirror_sink, sub_source, receive, change, response_sink,
                     mirror_source, mirror_node, response_source, out):
            b._nodes[node].options["operation"] = f"foreign-key join {base}"
        return KTable(b, out, result_name)
