"""A foreign-key join's result joined back to its left table, and foreign-key joins chained to
one right table: their sub-topologies form a cycle through internal topics (as in Kafka
Streams), which every host runs, a micro-batch in rounds. Kafka Streams'
KTableKTableForeignKeyJoinIntegrationTest (with ``rejoin``) ported: record by record, and in
batch mode a batch per record and one batch for all."""

from __future__ import annotations

import pytest

from streamtable import StreamsBuilder, TopologyTestDriver
from streamtable.engine.wiring import is_cyclic


def extractor(value: str) -> str:
    return value.split("|")[1]


def kafka_topology(left_join: bool, store: str | None = "store"):
    """KTableKTableForeignKeyJoinIntegrationTest.getTopology with rejoin: the FK join of
    left_table with right_table, and that join joined again (on the primary key) with
    left_table."""
    b = StreamsBuilder()
    left, right = b.table("left_table"), b.table("right_table")
    joiner = lambda v1, v2: f"({v1},{v2})"  # noqa: E731
    rejoiner = lambda v1, v2: f"rejoin({v1},{v2})"  # noqa: E731
    if left_join:
        fk = left.left_join(right, joiner, foreign_key_extractor=extractor, materialized=store)
        again = fk.left_join(left, rejoiner)
    else:
        fk = left.join(right, joiner, foreign_key_extractor=extractor, materialized=store)
        again = fk.join(left, rejoiner)
    fk.to_stream().to("output-topic")
    again.to_stream().to("rejoin-output-topic")
    return b.build()


class Run:
    """One driver over the topology: record by record, or a batch per ``step``."""

    def __init__(self, topology, how: str, cache: bool) -> None:
        self.batch = how != "records"
        self.driver = TopologyTestDriver(
            topology, {"cache.max.bytes.buffering": 10**7 if cache else 0},
            batch_mode=self.batch)
        self.left = self.driver.create_input_topic("left_table")
        self.right = self.driver.create_input_topic("right_table")
        self.out = self.driver.create_output_topic("output-topic")
        self.rejoin = self.driver.create_output_topic("rejoin-output-topic")

    def step(self, topic: str, key: str, value: str | None, ts: int) -> None:
        getattr(self, topic).pipe_input(key, value, timestamp=ts)
        if self.batch:
            self.driver.run_batch()

    def outputs(self):
        """The last value per key of each output since the last call, tombstones as None
        (Kafka's readKeyValuesToMap)."""
        return dict(self.out.read_key_values()), dict(self.rejoin.read_key_values())


def test_the_fk_join_joined_back_to_its_left_table_is_a_cycle():
    assert is_cyclic(kafka_topology(False))


@pytest.mark.parametrize("cache", [False, True])
@pytest.mark.parametrize("how", ["records", "batches"])
@pytest.mark.parametrize("left_join", [False, True])
def test_join_from_left_then_delete_left_entity(left_join, how, cache):
    run = Run(kafka_topology(left_join), how, cache)
    for i, (k, v) in enumerate([("rhs1", "rhsValue1"), ("rhs2", "rhsValue2"),
                                ("rhs3", "rhsValue3")]):
        run.step("right", k, v, i)
    assert run.outputs() == ({}, {})
    run.step("left", "lhs1", "lhsValue1|rhs1", 3)
    run.step("left", "lhs2", "lhsValue2|rhs2", 4)
    assert run.outputs() == (
        {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs2,rhsValue2)"},
        {"lhs1": "rejoin((lhsValue1|rhs1,rhsValue1),lhsValue1|rhs1)",
         "lhs2": "rejoin((lhsValue2|rhs2,rhsValue2),lhsValue2|rhs2)"})
    run.step("left", "lhs3", "lhsValue3|rhs1", 5)
    assert run.outputs() == ({"lhs3": "(lhsValue3|rhs1,rhsValue1)"},
                             {"lhs3": "rejoin((lhsValue3|rhs1,rhsValue1),lhsValue3|rhs1)"})
    run.step("left", "lhs1", None, 6)
    assert run.outputs() == ({"lhs1": None}, {"lhs1": None})
    assert run.driver.get_key_value_store("store").to_dict() == {
        "lhs2": "(lhsValue2|rhs2,rhsValue2)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"}


@pytest.mark.parametrize("cache", [False, True])
@pytest.mark.parametrize("how", ["records", "batches"])
@pytest.mark.parametrize("left_join", [False, True])
def test_join_from_right_then_delete_right_entity(left_join, how, cache):
    run = Run(kafka_topology(left_join), how, cache)
    run.step("left", "lhs1", "lhsValue1|rhs1", 0)
    run.step("left", "lhs2", "lhsValue2|rhs2", 1)
    run.step("left", "lhs3", "lhsValue3|rhs1", 2)
    unmatched = {"lhs1": "(lhsValue1|rhs1,null)", "lhs2": "(lhsValue2|rhs2,null)",
                 "lhs3": "(lhsValue3|rhs1,null)"} if left_join else {}
    fk, rejoin = run.outputs()
    assert {k: v.replace("None", "null") for k, v in fk.items()} == unmatched
    assert set(rejoin) == set(unmatched)
    run.step("right", "rhs1", "rhsValue1", 3)
    assert run.outputs() == (
        {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"},
        {"lhs1": "rejoin((lhsValue1|rhs1,rhsValue1),lhsValue1|rhs1)",
         "lhs3": "rejoin((lhsValue3|rhs1,rhsValue1),lhsValue3|rhs1)"})
    run.step("right", "rhs2", "rhsValue2", 4)
    assert run.outputs() == ({"lhs2": "(lhsValue2|rhs2,rhsValue2)"},
                             {"lhs2": "rejoin((lhsValue2|rhs2,rhsValue2),lhsValue2|rhs2)"})
    run.step("right", "rhs3", "rhsValue3", 5)  # an unreferenced foreign key
    assert run.outputs() == ({}, {})
    run.step("right", "rhs1", None, 6)
    fk, rejoin = run.outputs()
    if left_join:
        assert fk == {"lhs1": "(lhsValue1|rhs1,None)", "lhs3": "(lhsValue3|rhs1,None)"}
        assert rejoin == {"lhs1": "rejoin((lhsValue1|rhs1,None),lhsValue1|rhs1)",
                          "lhs3": "rejoin((lhsValue3|rhs1,None),lhsValue3|rhs1)"}
    else:
        assert (fk, rejoin) == ({"lhs1": None, "lhs3": None}, {"lhs1": None, "lhs3": None})


def chained_to_one_right_table():
    """Two foreign-key joins in a row with the same right table: each order's product, then
    the product's successor (also a product)."""
    b = StreamsBuilder()
    orders, products = b.table("orders"), b.table("products", materialized="products")
    with_product = orders.join(products, lambda o, p: {**o, "name": p["name"],
                                                       "next": p["next"]},
                               foreign_key_extractor=lambda o: o["product"],
                               materialized="with-product")
    with_next = with_product.left_join(
        products, lambda o, p: [o["name"], None if p is None else p["name"]],
        foreign_key_extractor=lambda o: o["next"], materialized="with-next")
    with_next.to_stream().to("out")
    return b.build()


@pytest.mark.parametrize("cache", [False, True])
def test_fk_joins_chained_to_one_right_table_in_one_batch_equal_record_by_record(cache):
    topology = chained_to_one_right_table()
    assert is_cyclic(topology)
    events = [("products", "p1", {"name": "one", "next": "p2"}),
              ("orders", 1, {"product": "p1"}),
              ("products", "p2", {"name": "two", "next": "p3"}),
              ("orders", 2, {"product": "p2"}),
              ("products", "p3", {"name": "three", "next": "p1"}),
              ("products", "p1", {"name": "uno", "next": "p3"}),
              ("orders", 3, {"product": "p3"}),
              ("products", "p2", None)]
    results = []
    for batch_mode in (False, True):
        driver = TopologyTestDriver(topology, {"cache.max.bytes.buffering": 10**7 if cache
                                               else 0}, batch_mode=batch_mode)
        topics = {t: driver.create_input_topic(t) for t in ("orders", "products")}
        for i, (topic, k, v) in enumerate(events):
            topics[topic].pipe_input(k, v, timestamp=i)
        if batch_mode:
            driver.run_batch()
        results.append((driver.create_output_topic("out").read_key_values_to_map(),
                        driver.get_key_value_store("with-next").to_dict()))
    assert results[0] == results[1]
    assert results[0][0] == {1: ["uno", "three"], 3: ["three", "uno"]}
