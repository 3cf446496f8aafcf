"""The inventory service: stock per store from a stream of item sales and restocks, queryable.

Topic ``items`` (key: store id; value: {"sku", "type": "SALE" | "RESTOCK", "quantity"}) is
aggregated per store into the inventory on hand (sku -> quantity), kept in the queryable store
``inventory-store``; every change of a store's inventory goes to ``inventory``.

    streamtable broker &
    streamtable run examples/inventory/app.py --development-broker --create-topics --http-port 8080
    streamtable produce items examples/inventory/app.py --file examples/inventory/sample.jsonl
    curl localhost:8080/stores/inventory-store/keys/store-1
"""

from __future__ import annotations

from typing import Any

from streamtable import StreamsBuilder
from streamtable.topology import Topology

config = {
    "application.id": "inventory",
    "bootstrap.servers": "localhost:9092",
}


def update_stock(store_id: str, item: dict[str, Any], inventory: dict[str, int]
                 ) -> dict[str, int]:
    """The inventory after one sale or restock (a new dict: aggregates are values)."""
    quantity = int(item["quantity"])
    if item["type"] == "SALE":
        quantity = -quantity
    elif item["type"] != "RESTOCK":
        raise ValueError(f"unknown item type {item['type']!r}: expected SALE or RESTOCK")
    updated = dict(inventory)
    updated[item["sku"]] = updated.get(item["sku"], 0) + quantity
    return updated


def build_topology() -> Topology:
    builder = StreamsBuilder()
    inventory = (builder.stream("items")
                 .group_by_key()
                 .aggregate(dict, update_stock, materialized="inventory-store"))
    inventory.to_stream().to("inventory")
    return builder.build()
