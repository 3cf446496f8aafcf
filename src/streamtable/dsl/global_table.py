"""GlobalKTable: a table every task sees whole, whatever partition it processes."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamtable.dsl.builder import StreamsBuilder


class GlobalKTable:
    """A table read from all partitions of its topic by every task (Kafka Streams'
    ``GlobalKTable``): streams join it by any key they derive, without repartitioning. Built by
    :meth:`StreamsBuilder.global_table`; queryable by its store name.

    >>> from streamtable import StreamsBuilder
    >>> b = StreamsBuilder()
    >>> products = b.global_table("products", materialized="products-store")
    >>> b.stream("orders").join(products, lambda order_id, o: o["product"],
    ...                         lambda o, p: {**o, "name": p["name"]}).to("enriched")
    """

    def __init__(self, builder: StreamsBuilder, node: str, store_name: str) -> None:
        self._builder = builder
        self._node = node
        self.store_name = store_name

    @property
    def queryable_store_name(self) -> str | None:
        """The store users can query, if the table was materialized under a name."""
        spec = self._builder._stores[self.store_name]
        return spec.name if spec.queryable else None
