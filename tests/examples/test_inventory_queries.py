"""The inventory example and interactive queries over a real HTTP server."""

from __future__ import annotations

import httpx
import pytest

from streamtable import ProcessingError, TopologyTestDriver
from streamtable.cli import load_app
from streamtable.kafka.broker import free_port
from streamtable.serving.http import QueryServer, create_query_api


@pytest.fixture
def inventory():
    app = load_app("examples/inventory/app.py")
    driver = TopologyTestDriver(app.build_topology(), app.config)
    items = driver.create_input_topic("items")
    for store, sku, kind, qty in [("store-1", "apple", "RESTOCK", 10),
                                  ("store-1", "apple", "SALE", 3),
                                  ("store-2", "pear", "RESTOCK", 4),
                                  ("store-1", "kiwi", "RESTOCK", 2)]:
        items.pipe_input(store, {"sku": sku, "type": kind, "quantity": qty})
    return driver, items


def test_inventory_per_store(inventory):
    driver, _ = inventory
    assert driver.get_key_value_store("inventory-store").to_dict() == {
        "store-1": {"apple": 7, "kiwi": 2}, "store-2": {"pear": 4}}


def test_unknown_item_type_is_an_error_naming_the_record(inventory):
    driver, items = inventory
    with pytest.raises(ProcessingError, match="unknown item type 'RETURN'") as info:
        items.pipe_input("store-1", {"sku": "apple", "type": "RETURN", "quantity": 1})
    assert (info.value.topic, info.value.offset) == ("items", 4)


def test_queries_over_http(inventory):
    driver, _ = inventory
    api = create_query_api({"inventory-store": driver.get_key_value_store("inventory-store")})
    server = QueryServer(api, port=free_port()).start()
    try:
        with httpx.Client(base_url=server.url) as http:
            assert http.get("/stores").json() == ["inventory-store"]
            one = http.get("/stores/inventory-store/keys/store-1")
            assert one.status_code == 200
            assert one.json() == {"key": "store-1", "value": {"apple": 7, "kiwi": 2}}
            assert http.get("/stores/inventory-store/keys/store-9").status_code == 404
            assert http.get("/stores/nope").status_code == 404
            everything = http.get("/stores/inventory-store").json()
            assert [e["key"] for e in everything] == ["store-1", "store-2"]
            ranged = http.get("/stores/inventory-store", params={"from": "store-2"}).json()
            assert ranged == [{"key": "store-2", "value": {"pear": 4}}]
    finally:
        server.stop()
