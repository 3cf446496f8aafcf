"""KStream: an append-only stream of independent records."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from streamtable.dsl.builder import StreamsBuilder, with_key
from streamtable.dsl.materialized import Materialized
from streamtable.processors import stateless as sl
from streamtable.processors.api import Record
from streamtable.serde import Serde

if TYPE_CHECKING:
    from streamtable.dsl.global_table import GlobalKTable
    from streamtable.dsl.grouped import KGroupedStream
    from streamtable.dsl.joins import Joined, StreamJoined
    from streamtable.dsl.table import KTable
    from streamtable.windowing import JoinWindows


class KStream:
    """A stream of records. Operators return new streams; nothing runs until a driver runs the
    built topology.

    >>> from streamtable import StreamsBuilder
    >>> builder = StreamsBuilder()
    >>> events = builder.stream("facebook-events")
    >>> events.filter(lambda user, action: action == "Close") \\
    ...       .map_values(lambda v: "You are not currently viewing Facebook.") \\
    ...       .to("notifications")
    """

    def __init__(self, builder: StreamsBuilder, node: str, repartition_required: bool = False):
        self._builder = builder
        self._node = node
        self._repartition_required = repartition_required

    def _then(
        self,
        prefix: str,
        factory: Callable[[], Any],
        named: str | None,
        key_changing: bool = False,
    ) -> KStream:
        name = self._builder.new_name(prefix, named)
        self._builder.add_node(name, factory, [self._node])
        return KStream(self._builder, name, self._repartition_required or key_changing)

    # -- stateless -------------------------------------------------------------------------
    def filter(self, predicate: Callable[[Any, Any], bool], *, named: str | None = None) -> KStream:
        """Keep records for which ``predicate(key, value)`` is true.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.stream("in").filter(lambda k, v: v > 0).to("out")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_value_list([3, -1, 4])
        >>> driver.create_output_topic("out").read_values()
        [3, 4]
        """
        return self._then("KSTREAM-FILTER", lambda: sl.StreamFilter(predicate), named)

    def filter_not(
        self, predicate: Callable[[Any, Any], bool], *, named: str | None = None
    ) -> KStream:
        """Drop records for which ``predicate(key, value)`` is true.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.stream("in").filter_not(lambda k, v: v > 0).to("out")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_value_list([3, -1, 4])
        >>> driver.create_output_topic("out").read_values()
        [-1]
        """
        return self._then("KSTREAM-FILTER", lambda: sl.StreamFilter(predicate, True), named)

    def map(
        self, mapper: Callable[[Any, Any], tuple[Any, Any]], *, named: str | None = None
    ) -> KStream:
        """``mapper(key, value) -> (new_key, new_value)``; a later grouping repartitions.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.stream("in").map(lambda k, v: (v, k)).to("out")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_key_value_list([("a", 1)])
        >>> driver.create_output_topic("out").read_key_values()
        [(1, 'a')]
        """
        return self._then("KSTREAM-MAP", lambda: sl.StreamMap(mapper), named, key_changing=True)

    def map_values(self, mapper: Callable[..., Any], *, named: str | None = None) -> KStream:
        """``mapper(value)`` or ``mapper(key, value)`` gives the new value; the key stays.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.stream("in").map_values(lambda k, v: f"{k}={v}").to("out")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_key_value_list([("a", 1)])
        >>> driver.create_output_topic("out").read_key_values()
        [('a', 'a=1')]
        """
        fn = with_key(mapper, "map_values")
        return self._then("KSTREAM-MAPVALUES", lambda: sl.StreamMapValues(fn), named)

    def select_key(
        self, selector: Callable[[Any, Any], Any], *, named: str | None = None
    ) -> KStream:
        """``selector(key, value)`` gives the new key.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.stream("in").select_key(lambda k, v: v["user"]).to("out")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_key_value_list([(None, {"user": "ann"})])
        >>> driver.create_output_topic("out").read_key_values()
        [('ann', {'user': 'ann'})]
        """
        return self._then(
            "KSTREAM-KEY-SELECT", lambda: sl.StreamSelectKey(selector), named, key_changing=True
        )

    def flat_map(
        self,
        mapper: Callable[[Any, Any], Iterable[tuple[Any, Any]]],
        *,
        named: str | None = None,
    ) -> KStream:
        """``mapper(key, value)`` yields zero or more ``(key, value)`` pairs.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.stream("in").flat_map(lambda k, v: [(w, k) for w in v.split()]).to("out")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_key_value_list([("s1", "to be")])
        >>> driver.create_output_topic("out").read_key_values()
        [('to', 's1'), ('be', 's1')]
        """
        return self._then(
            "KSTREAM-FLATMAP", lambda: sl.StreamFlatMap(mapper), named, key_changing=True
        )

    def flat_map_values(
        self, mapper: Callable[..., Iterable[Any]], *, named: str | None = None
    ) -> KStream:
        """``mapper(value)`` or ``mapper(key, value)`` yields zero or more values.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.stream("in").flat_map_values(str.split).to("out")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_key_value_list([("s1", "to be")])
        >>> driver.create_output_topic("out").read_key_values()
        [('s1', 'to'), ('s1', 'be')]
        """
        fn = with_key(mapper, "flat_map_values")
        return self._then("KSTREAM-FLATMAPVALUES", lambda: sl.StreamFlatMapValues(fn), named)

    def peek(self, action: Callable[[Any, Any], Any], *, named: str | None = None) -> KStream:
        """Call ``action(key, value)`` for each record and pass it on unchanged.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> seen = []
        >>> b.stream("in").peek(lambda k, v: seen.append(k)).to("out")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_key_value_list([("a", 1)])
        >>> driver.create_output_topic("out").read_key_values()
        [('a', 1)]
        >>> seen
        ['a']
        """
        return self._then("KSTREAM-PEEK", lambda: sl.StreamPeek(action), named)

    def foreach(self, action: Callable[[Any, Any], Any], *, named: str | None = None) -> None:
        """Call ``action(key, value)`` for each record (terminal).

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> totals = {}
        >>> b.stream("in").foreach(lambda k, v: totals.update({k: totals.get(k, 0) + v}))
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_key_value_list([("a", 1), ("a", 2)])
        >>> totals
        {'a': 3}
        """
        self._then("KSTREAM-FOREACH", lambda: sl.StreamPeek(action), named)

    def merge(self, other: KStream, *, named: str | None = None) -> KStream:
        """The records of both streams, interleaved in processing order.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.stream("web").merge(b.stream("app")).to("out")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("web").pipe_input("ann", "w")
        >>> driver.create_input_topic("app").pipe_input("bob", "a")
        >>> driver.create_output_topic("out").read_key_values()
        [('ann', 'w'), ('bob', 'a')]
        """
        name = self._builder.new_name("KSTREAM-MERGE", named)
        self._builder.add_node(name, sl.PassThrough, [self._node, other._node])
        return KStream(
            self._builder, name, self._repartition_required or other._repartition_required
        )

    def split(self, *, prefix: str = "") -> BranchedKStream:
        """Route each record to the first branch whose predicate holds.

        >>> from streamtable import StreamsBuilder
        >>> s = StreamsBuilder().stream("in")
        >>> branches = (s.split(prefix="b-")
        ...     .branch(lambda k, v: v > 0, name="pos")
        ...     .default_branch(name="other"))
        >>> sorted(branches)
        ['b-other', 'b-pos']
        """
        return BranchedKStream(self, prefix)

    def process(self, supplier: Callable[[], Any] | Callable[[Record], Record | None],
                *store_names: str, named: str | None = None) -> KStream:
        """Run a processor of your own on every record (Kafka Streams' ``KStream#process``):
        ``supplier()`` makes one :class:`~streamtable.Processor` per task; its ``init(context)``
        gets a :class:`~streamtable.processors.user.ProcessorApiContext` (stores, forwarding,
        punctuation) and its ``process(record)`` sees each record, with its timestamp and
        headers. ``store_names`` connect stores added with
        :meth:`StreamsBuilder.add_state_store` (or a DSL store's name). The result is the
        stream of what the processor forwards; as in Kafka Streams its keys may have changed,
        so a later grouping or join repartitions.

        A function of one argument is taken as ``fn(record)``, returning the record to forward
        or None (a :class:`~streamtable.processors.user.RecordFunction`): a processor without
        a class, for reading or setting headers in one line.

        >>> from streamtable import Processor, StreamsBuilder
        >>> from streamtable.dsl.stores import Stores
        >>> class Dedup(Processor):
        ...     def init(self, context):
        ...         self.context, self.seen = context, context.get_state_store("seen")
        ...     def process(self, record):
        ...         if self.seen.put_if_absent(record.key, True) is None:
        ...             self.context.forward(record)
        >>> b = StreamsBuilder()
        >>> _ = b.add_state_store(Stores.key_value_store_builder(
        ...     Stores.in_memory_key_value_store("seen")))
        >>> b.stream("in").process(Dedup, "seen").to("out")
        """
        return self._process(supplier, store_names, named, fixed_key=False)

    def process_values(self, supplier: Callable[[], Any] | Callable[[Record], Record | None],
                       *store_names: str, named: str | None = None) -> KStream:
        """Like :meth:`process`, for a processor that keeps each record's key (Kafka Streams'
        ``KStream#processValues`` and its ``FixedKeyProcessor``): it may change values,
        timestamps and headers, so a later grouping or join does not repartition. A record it
        forwards with another key than the one it is processing stops the task with an error
        naming the processor. It is the DSL's way to headers, as in Kafka Streams: read
        ``record.headers``, set them with ``record.with_headers(...)``.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> (b.stream("in")
        ...     .process_values(lambda r: r.with_headers(r.headers + (("seen-by", b"app"),)))
        ...     .to("out"))
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_input("k", 1, headers={"trace-id": "t1"})
        >>> driver.create_output_topic("out").read_records()[0].headers
        (('trace-id', b't1'), ('seen-by', b'app'))
        """
        return self._process(supplier, store_names, named, fixed_key=True)

    def _process(self, supplier: Callable[..., Any], store_names: tuple[str, ...],
                 named: str | None, fixed_key: bool) -> KStream:
        from streamtable.errors import TopologyError

        b = self._builder
        for s in store_names:
            if s not in b._stores:
                raise TopologyError(f"no store named {s!r}: add it with "
                                    "builder.add_state_store(...) first")
        name = b.new_name("KSTREAM-PROCESSVALUES" if fixed_key else "KSTREAM-PROCESSOR",
                          named)
        # a global store is readable by every processor: naming it connects nothing
        local = [s for s in store_names if not _is_global_store(b, s)]
        node = b.add_node(name, _user_supplier(supplier, name, fixed_key), [self._node],
                          stores=local)
        node.options["user"] = True
        if fixed_key:
            return KStream(b, name, self._repartition_required)
        return KStream(b, name, repartition_required=True)

    def to(
        self,
        topic: str,
        *,
        key_serde: Serde | str | None = None,
        value_serde: Serde | str | None = None,
        partitioner: Callable[[str, Any, Any, int], int | None] | None = None,
        named: str | None = None,
    ) -> None:
        """Write the stream to ``topic`` (terminal), with the given serdes (default: the
        application's default serdes).

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.stream("in").to("out", value_serde="string")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_key_value_list([("a", "x")])
        >>> driver.topic_records("out")[0].value
        b'x'
        >>> driver.create_output_topic("out", value_serde="string").read_key_values()
        [('a', 'x')]
        """
        self._builder.add_sink(self._node, topic, key_serde, value_serde, partitioner, named)

    def repartition(
        self,
        *,
        name: str | None = None,
        key_serde: Serde | str | None = None,
        value_serde: Serde | str | None = None,
        partitions: int | None = None,
    ) -> KStream:
        """Shuffle records by their current key through an internal topic.

        >>> from streamtable import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> b.stream("in").select_key(lambda k, v: v).repartition(name="by-value").to("out")
        >>> "by-value-repartition" in b.build().describe()
        True
        """
        b = self._builder
        base = name or b.new_name("KSTREAM-REPARTITION")
        source = b.repartition(self._node, base, key_serde, value_serde, partitions)
        return KStream(b, source)

    # -- joins -----------------------------------------------------------------------------
    def join(self, other: KStream | KTable | GlobalKTable, joiner: Callable[[Any, Any], Any],
             windows: JoinWindows | Joined | Callable[[Any, Any], Any] | None = None, *,
             stream_joined: StreamJoined | str | None = None,
             named: str | None = None, joined: Joined | None = None) -> KStream:
        """Inner join with a table, a stream or a global table.

        - ``join(table, joiner)``: each record joins the table's current row for its key
          (``joiner(value, table_value)``); records without a row are skipped. The stream and the
          table's topic must be co-partitioned; a stream whose key was changed is repartitioned.
          A versioned table (``Materialized.as_(Stores.persistent_versioned_key_value_store(
          ...))``) is joined as of each record's timestamp; ``join(table, joiner,
          Joined.with_grace_period(ms))`` (or ``joined=``) holds the records back for the grace
          period first, so that late table updates are seen (see the joins guide).
        - ``join(stream, joiner, JoinWindows...)``: records of both streams with the same key
          and timestamps within the windows join (``joiner(this_value, other_value)``), at the
          larger timestamp; ``stream_joined`` names the join's stores.
        - ``join(global_table, key_selector, joiner)``: each record joins the global table's
          row for ``key_selector(key, value)``; records without a row are skipped.

        >>> from streamtable import StreamsBuilder, JoinWindows
        >>> b = StreamsBuilder()
        >>> open_ = b.table("open")
        >>> b.stream("tick").left_join(open_, lambda tick, state: state).to("states")
        >>> clicks = b.stream("clicks").join(b.stream("views"), lambda c, v: (c, v),
        ...                                  JoinWindows.of_time_difference_and_grace(60_000, 0))
        >>> from streamtable import Joined, Materialized, Stores
        >>> rates = b.table("rates", Materialized.as_(
        ...     Stores.persistent_versioned_key_value_store("rates", 3_600_000)))
        >>> priced = b.stream("orders").join(rates, lambda amount, rate: amount * rate,
        ...                                  Joined.with_grace_period(5_000))
        """
        return self._join(other, joiner, windows, "inner", stream_joined, named, joined)

    def left_join(self, other: KStream | KTable | GlobalKTable,
                  joiner: Callable[[Any, Any], Any],
                  windows: JoinWindows | Joined | Callable[[Any, Any], Any] | None = None, *,
                  stream_joined: StreamJoined | str | None = None,
                  named: str | None = None, joined: Joined | None = None) -> KStream:
        """Left join (arguments as :meth:`join`): records without a partner join ``None``; with
        a stream, once the record's window has closed (stream time past its timestamp + after +
        grace) and only if no partner came."""
        return self._join(other, joiner, windows, "left", stream_joined, named, joined)

    def outer_join(self, other: KStream, joiner: Callable[[Any, Any], Any],
                   windows: JoinWindows, *, stream_joined: StreamJoined | str | None = None,
                   named: str | None = None) -> KStream:
        """Windowed stream-stream outer join: records of either side without a partner join
        ``None`` once their window has closed (``joiner(None, other_value)`` for the other
        side's)."""
        if not isinstance(other, KStream):
            raise TypeError("outer_join is a stream-stream join: outer_join(stream, joiner, "
                            "JoinWindows...)")
        return self._join(other, joiner, windows, "outer", stream_joined, named)

    def _join(self, other: Any, joiner: Callable[[Any, Any], Any], third: Any, mode: str,
              stream_joined: StreamJoined | str | None, named: str | None,
              joined: Joined | None = None) -> KStream:
        from streamtable.dsl.global_table import GlobalKTable
        from streamtable.dsl.joins import Joined, join_global, join_streams, join_table

        if isinstance(other, KStream):
            return join_streams(self, other, joiner, third, mode, stream_joined, named)
        if isinstance(other, GlobalKTable):
            return join_global(self, other, joiner, third, mode == "left", named)
        if isinstance(third, Joined):
            joined, third = third, None
        if third is not None:
            raise TypeError("a stream-table join takes (table, joiner) or (table, joiner, "
                            "Joined...)")
        return join_table(self, other, joiner, mode == "left", named, joined)

    # -- stateful --------------------------------------------------------------------------
    def group_by(
        self,
        selector: Callable[[Any, Any], Any],
        *,
        key_serde: Serde | str | None = None,
        value_serde: Serde | str | None = None,
        name: str | None = None,
    ) -> KGroupedStream:
        """Group by ``selector(key, value)`` (a new key: records are repartitioned).

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> (b.stream("in").group_by(lambda k, v: v["page"]).count()
        ...  .to_stream().to("out"))
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_key_value_list(
        ...     [("ann", {"page": "/a"}), ("bob", {"page": "/a"})])
        >>> driver.create_output_topic("out").read_key_values()
        [('/a', 1), ('/a', 2)]
        """
        from streamtable.dsl.grouped import KGroupedStream

        keyed = self.select_key(selector)
        return KGroupedStream(keyed, key_serde, value_serde, name, repartition=True)

    def group_by_key(
        self,
        *,
        key_serde: Serde | str | None = None,
        value_serde: Serde | str | None = None,
        name: str | None = None,
    ) -> KGroupedStream:
        """Group by the current key (repartitioned only if an earlier operator changed keys).

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.stream("in").group_by_key().reduce(lambda a, v: a + v).to_stream().to("out")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_key_value_list([("a", 1), ("a", 2)])
        >>> driver.create_output_topic("out").read_key_values()
        [('a', 1), ('a', 3)]
        """
        from streamtable.dsl.grouped import KGroupedStream

        return KGroupedStream(
            self, key_serde, value_serde, name, repartition=self._repartition_required
        )

    def to_table(self, materialized: Materialized | str | None = None, *,
                 named: str | None = None) -> KTable:
        """Read the stream as a changelog: the latest value per key, ``None`` deletes.

        >>> from streamtable import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> latest = b.stream("in").to_table(materialized="latest")
        >>> driver = TopologyTestDriver(b.build())
        >>> driver.create_input_topic("in").pipe_key_value_list([("a", 1), ("a", 2), ("b", 1)])
        >>> driver.get_key_value_store("latest").get("a")
        2
        """
        from streamtable.dsl.builder import table_source
        from streamtable.dsl.table import KTable

        b = self._builder
        node = self._node
        if self._repartition_required:
            node = b.repartition(node, b.new_name("KSTREAM-TOTABLE-REPARTITION"))
        store = b.add_store(materialized, "KSTREAM-TOTABLE-STATE-STORE", [node],
                            versioned_ok=True)
        name = b.new_name("KSTREAM-TOTABLE", named)
        b.add_node(name, table_source(store), [node], stores=[store.name])
        return KTable(b, name, store.name, versioned=store.kind == "versioned")


def _is_global_store(builder: StreamsBuilder, store: str) -> bool:
    """Whether ``store`` is kept by a global sub-topology (a global table's or a global
    store's)."""
    return any(node.options.get("global") and store in node.stores
               for node in builder._nodes.values())


def _user_supplier(supplier: Callable[..., Any], name: str,
                   fixed_key: bool = False) -> Callable[[], Any]:
    """``supplier`` checked to make :class:`~streamtable.Processor` instances, or a function
    of one record made into one (:class:`~streamtable.processors.user.RecordFunction`); with
    ``fixed_key``, each processor is made to keep its records' keys."""
    from streamtable.errors import TopologyError
    from streamtable.processors.api import Processor
    from streamtable.processors.user import RecordFunction, fix_key

    if isinstance(supplier, Processor):
        raise TopologyError(f"process() of {name} needs a supplier of processors (the class, "
                            "or a function making a new one per task), not an instance")
    if _is_record_function(supplier):
        fn = supplier

        def supplier() -> Processor:
            return RecordFunction(fn)

    def make() -> Processor:
        proc = supplier()
        if not isinstance(proc, Processor):
            raise TopologyError(f"the supplier of {name} made a {type(proc).__name__}; a "
                                "processor subclasses streamtable.Processor")
        if fixed_key:
            fix_key(proc)
        return proc

    return make


def _is_record_function(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is a function of a record (one required positional parameter) rather
    than a supplier of processors (a class, or a function of no argument)."""
    if isinstance(fn, type):
        return False
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    required = [p for p in params
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    return len(required) == 1


class BranchedKStream:
    """Built by :meth:`KStream.split`; finish with :meth:`default_branch` or
    :meth:`no_default_branch` to get ``{branch name: KStream}``.

    >>> from streamtable import StreamsBuilder, TopologyTestDriver
    >>> b = StreamsBuilder()
    >>> branches = b.stream("in").split().branch(lambda k, v: v < 0, name="neg").default_branch()
    >>> branches["neg"].to("negative")
    >>> driver = TopologyTestDriver(b.build())
    >>> driver.create_input_topic("in").pipe_value_list([1, -2, 3])
    >>> driver.create_output_topic("negative").read_values()
    [-2]
    """

    def __init__(self, stream: KStream, prefix: str) -> None:
        self._stream = stream
        self._prefix = prefix
        self._branches: list[tuple[Callable[[Any, Any], bool] | None, str]] = []

    def branch(
        self, predicate: Callable[[Any, Any], bool], *, name: str | None = None
    ) -> BranchedKStream:
        """A branch for the records ``predicate(key, value)`` holds for (and no earlier branch
        took), named ``prefix + name`` (default: its position, from 1).

        >>> from streamtable import StreamsBuilder
        >>> s = StreamsBuilder().stream("in")
        >>> sorted(s.split().branch(lambda k, v: v > 0).branch(lambda k, v: v < 0)
        ...        .no_default_branch())
        ['1', '2']
        """
        label = name if name is not None else str(len(self._branches) + 1)
        self._branches.append((predicate, self._prefix + label))
        return self

    def default_branch(self, *, name: str | None = None) -> dict[str, KStream]:
        """Finish with a branch for the records no predicate took (named ``prefix + name``,
        default ``"0"``); returns every branch by name.

        >>> from streamtable import StreamsBuilder
        >>> s = StreamsBuilder().stream("in")
        >>> sorted(s.split(prefix="p-").branch(lambda k, v: v > 0).default_branch())
        ['p-0', 'p-1']
        """
        label = name if name is not None else "0"
        self._branches.append((None, self._prefix + label))
        return self._finish()

    def no_default_branch(self) -> dict[str, KStream]:
        """Finish without a default branch: records no predicate took are dropped.

        >>> from streamtable import StreamsBuilder
        >>> s = StreamsBuilder().stream("in")
        >>> list(s.split().branch(lambda k, v: v > 0, name="pos").no_default_branch())
        ['pos']
        """
        return self._finish()

    def _finish(self) -> dict[str, KStream]:
        b = self._stream._builder
        branch_node = b.new_name("KSTREAM-BRANCH")
        children: list[tuple[Callable[[Any, Any], bool] | None, str]] = []
        child_names = [b.new_name("KSTREAM-BRANCHCHILD") for _ in self._branches]
        for (pred, _label), child in zip(self._branches, child_names, strict=True):
            children.append((pred, child))
        b.add_node(branch_node, lambda: sl.StreamBranch(children), [self._stream._node])
        result = {}
        for (_pred, label), child in zip(self._branches, child_names, strict=True):
            b.add_node(child, sl.PassThrough, [branch_node])
            result[label] = KStream(b, child, self._stream._repartition_required)
        return result
