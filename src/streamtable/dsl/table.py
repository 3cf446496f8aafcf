"""KTable: a changelog, the latest value per key."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtable.dsl.builder import StreamsBuilder, with_key
from streamtable.dsl.materialized import Materialized
from streamtable.processors import table as tp
from streamtable.serde import Serde

if TYPE_CHECKING:
    from streamtable.dsl.grouped import KGroupedTable
    from streamtable.dsl.stream import KStream


class KTable:
    """A table whose every change is forwarded downstream as ``Change(new, old)``.

    >>> from streamtable import StreamsBuilder
    >>> positions = StreamsBuilder().table("share-holders", materialized="share-holder-store")
    >>> nasdaq = positions.filter(lambda key, p: p["exchange"] == "NASDAQ")
    """

    def __init__(self, builder: StreamsBuilder, node: str, store: str | None) -> None:
        self._builder = builder
        self._node = node
        self._store = store

    @property
    def queryable_store_name(self) -> str | None:
        """The store users can query, if this table was materialized under a name."""
        if self._store is None:
            return None
        spec = self._builder._stores[self._store]
        return spec.name if spec.queryable else None

    def _then(self, prefix: str, make: Callable[[str | None], Any],
              materialized: Materialized | str | None, named: str | None) -> KTable:
        b = self._builder
        store = None
        if materialized is not None:
            store = b.add_store(materialized, f"{prefix}-STATE-STORE").name
        name = b.new_name(prefix, named)
        b.add_node(name, lambda: make(store), [self._node], stores=[store] if store else [])
        return KTable(b, name, store)

    def filter(self, predicate: Callable[[Any, Any], bool],
               materialized: Materialized | str | None = None, *,
               named: str | None = None) -> KTable:
        """Rows for which ``predicate(key, value)`` holds; a row that stops matching is deleted
        downstream."""
        return self._then(
            "KTABLE-FILTER", lambda s: tp.TableFilter(predicate, False, s), materialized, named
        )

    def filter_not(self, predicate: Callable[[Any, Any], bool],
                   materialized: Materialized | str | None = None, *,
                   named: str | None = None) -> KTable:
        """Rows for which ``predicate(key, value)`` does not hold."""
        return self._then(
            "KTABLE-FILTER", lambda s: tp.TableFilter(predicate, True, s), materialized, named
        )

    def map_values(self, mapper: Callable[..., Any],
                   materialized: Materialized | str | None = None, *,
                   named: str | None = None) -> KTable:
        """``mapper(value)`` or ``mapper(key, value)`` for every row."""
        fn = with_key(mapper, "map_values")
        return self._then(
            "KTABLE-MAPVALUES", lambda s: tp.TableMapValues(fn, s), materialized, named
        )

    def to_stream(self, mapper: Callable[[Any, Any], Any] | None = None, *,
                  named: str | None = None) -> KStream:
        """The table's changelog as a stream: each change's new value (``None`` on delete).
        ``mapper(key, value)`` may pick a new key."""
        from streamtable.dsl.stream import KStream

        name = self._builder.new_name("KTABLE-TOSTREAM", named)
        self._builder.add_node(name, lambda: tp.TableToStream(mapper), [self._node])
        return KStream(self._builder, name, repartition_required=mapper is not None)

    def group_by(self, selector: Callable[[Any, Any], tuple[Any, Any]], *,
                 key_serde: Serde | str | None = None,
                 value_serde: Serde | str | None = None,
                 name: str | None = None) -> KGroupedTable:
        """Re-group rows by ``selector(key, value) -> (new_key, new_value)``."""
        from streamtable.dsl.grouped import KGroupedTable

        b = self._builder
        node = b.new_name("KTABLE-SELECT")
        b.add_node(node, lambda: tp.TableGroupByMap(selector), [self._node])
        return KGroupedTable(self._node, b, node, key_serde, value_serde, name)
