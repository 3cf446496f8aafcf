"""Table-table foreign-key join, and the share-holders topology built on it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from streamtable import StreamsBuilder, TopologyTestDriver

ROOT = Path(__file__).resolve().parents[2]


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / "share_holders"
                                                  / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fk_driver(left_join: bool, cache: bool = True):
    b = StreamsBuilder()
    ref = b.table("ref", materialized="ref-store")
    joined = b.table("orders").__getattribute__("left_join" if left_join else "join")(
        ref, lambda o, r: (o["item"], None if r is None else r["price"]),
        foreign_key_extractor=lambda o: o["product"], materialized="joined")
    joined.to_stream().to("out", value_serde="pickle")
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 10**7 if cache else 0})
    return (driver, driver.create_input_topic("orders"), driver.create_input_topic("ref"),
            driver.create_output_topic("out", value_serde="pickle"))


def test_inner_fk_join_follows_changes_of_both_sides():
    driver, orders, ref, out = fk_driver(left_join=False)
    orders.pipe_input(1, {"item": "a", "product": "p1"})
    assert out.read_key_values() == []  # no match yet
    ref.pipe_input("p1", {"price": 10})
    assert out.read_key_values() == [(1, ("a", 10))]
    orders.pipe_input(2, {"item": "b", "product": "p1"})
    ref.pipe_input("p1", {"price": 12})  # re-emits every order of p1
    assert sorted(out.read_key_values()) == [(1, ("a", 12)), (2, ("b", 10)), (2, ("b", 12))]
    orders.pipe_input(1, {"item": "a", "product": "p2"})  # moves to a product without price
    assert out.read_key_values() == [(1, None)]
    ref.pipe_input("p1", None)
    assert out.read_key_values() == [(2, None)]
    assert driver.get_key_value_store("joined").to_dict() == {}
    ref.pipe_input("p2", {"price": 7})
    orders.pipe_input(3, {"item": "c", "product": "p2"})
    orders.pipe_input(3, None)
    assert out.read_key_values() == [(1, ("a", 7)), (3, ("c", 7)), (3, None)]
    assert driver.get_key_value_store("joined").to_dict() == {1: ("a", 7)}


def test_left_fk_join_keeps_unmatched_rows():
    driver, orders, ref, out = fk_driver(left_join=True)
    orders.pipe_input(1, {"item": "a", "product": "p1"})
    assert out.read_key_values() == [(1, ("a", None))]
    ref.pipe_input("p1", {"price": 3})
    assert out.read_key_values() == [(1, ("a", 3))]
    ref.pipe_input("p1", None)
    assert out.read_key_values() == [(1, ("a", None))]
    orders.pipe_input(1, None)
    assert out.read_key_values() == [(1, None)]


@pytest.fixture
def share_holders():
    topology = load_example("topology").build_topology()
    driver = TopologyTestDriver(topology)
    return (driver, driver.create_input_topic("share-holders"),
            driver.create_input_topic("shares-ref-data"))


SEED = [(1, "client1", "AAPL", 100), (2, "client1", "VOD", 5), (3, "client1", "FB", 33),
        (4, "client2", "AAPL", 25), (5, "client3", "VOD", 33)]
REF = {"AAPL": ("Apple", "NASDAQ"), "VOD": ("Vodafone", "LON"), "FB": ("Facebook", "NASDAQ")}


def load(positions, ref):
    for ticker, (name, exchange) in REF.items():
        ref.pipe_input(ticker, {"name": name, "exchange": exchange})
    for pid, client, ticker, amount in SEED:
        positions.pipe_input(pid, {"id": pid, "client": client, "ticker": ticker,
                                   "amount": amount})


def test_share_holders_from_reference_data_exchange(share_holders):
    driver, positions, ref = share_holders
    load(positions, ref)
    us = driver.get_key_value_store("us-share-holders")
    assert us.to_dict() == {"client1": {1, 3}, "client2": {4}}
    assert driver.get_key_value_store("positions-enriched").get(3)["name"] == "Facebook"


def test_ref_data_change_reemits_every_affected_position(share_holders):
    driver, positions, ref = share_holders
    load(positions, ref)
    ref.pipe_input("VOD", {"name": "Vodafone", "exchange": "NYSE"})  # VOD lists in New York
    assert driver.get_key_value_store("us-share-holders").to_dict() == {
        "client1": {1, 2, 3}, "client2": {4}, "client3": {5}}
    ref.pipe_input("AAPL", {"name": "Apple", "exchange": "LON"})
    assert driver.get_key_value_store("us-share-holders").to_dict() == {
        "client1": {2, 3}, "client3": {5}}


def test_position_exchange_used_when_ticker_unknown(share_holders):
    driver, positions, ref = share_holders
    positions.pipe_input(9, {"id": 9, "client": "c9", "ticker": "TSLA", "amount": 1,
                             "exchange": "NASDAQ"})
    assert driver.get_key_value_store("us-share-holders").to_dict() == {"c9": {9}}
    ref.pipe_input("TSLA", {"name": "Tesla", "exchange": "LON"})
    assert driver.get_key_value_store("us-share-holders").to_dict() == {}


def test_deleting_a_left_row_that_never_joined_emits_a_tombstone_without_caching():
    """Kafka Streams' inner FK join cannot know whether a result was emitted for a deleted
    left row, so it forwards a tombstone; a record cache drops it (nothing changed)."""
    driver, orders, ref, out = fk_driver(left_join=False, cache=False)
    orders.pipe_input(1, {"item": "a", "product": "p1"})  # no p1: never joins
    orders.pipe_input(1, None)
    assert out.read_key_values() == [(1, None)]
    driver, orders, ref, out = fk_driver(left_join=False, cache=True)
    orders.pipe_input(1, {"item": "a", "product": "p1"})
    orders.pipe_input(1, None)
    assert out.read_key_values() == []


@pytest.mark.parametrize("left_join", [False, True])
def test_a_right_row_created_and_deleted_within_one_commit_leaves_no_stale_join(left_join):
    """An order joins a product created and deleted within one micro-batch: the product's
    cache must not drop the row unseen, or the order keeps a join result for a product that
    no longer exists (Kafka Streams' cache drops it; streamtable forwards its creation first)."""
    b = StreamsBuilder()
    ref = b.table("ref")
    joined = b.table("orders").__getattribute__("left_join" if left_join else "join")(
        ref, lambda o, r: (o["item"], None if r is None else r["price"]),
        foreign_key_extractor=lambda o: o["product"], materialized="joined")
    joined.to_stream().to("out", value_serde="pickle")
    driver = TopologyTestDriver(b.build(), {"cache.max.bytes.buffering": 10**7},
                                batch_mode=True)
    orders, ref_in = driver.create_input_topic("orders"), driver.create_input_topic("ref")
    out = driver.create_output_topic("out", value_serde="pickle")
    ref_in.pipe_input("p1", {"price": 10}, timestamp=1)
    orders.pipe_input(1, {"item": "a", "product": "p1"}, timestamp=2)  # joins price 10
    ref_in.pipe_input("p1", None, timestamp=3)
    driver.run_batch()
    final = {1: ("a", None)} if left_join else {}
    assert driver.get_key_value_store("joined").to_dict() == final
    assert {k: v for k, v in out.read_key_values_to_map().items() if v is not None} == final
