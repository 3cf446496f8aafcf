"""The share-holders seed: the tables and logs it shows, reproduced by the test driver."""

from __future__ import annotations

import pytest

from streamtable import StreamsBuilder, TopologyTestDriver

POSITIONS = [
    (1, "client1", "AAPL", 100, "NASDAQ"),
    (2, "client1", "VOD", 5, "LON"),
    (3, "client1", "FB", 33, "NASDAQ"),
    (4, "client2", "AAPL", 25, "NASDAQ"),
    (5, "client3", "VOD", 33, "LON"),
]


def position(pid, client, ticker, amount, exchange):
    return {"id": pid, "client": client, "ticker": ticker, "amount": amount, "exchange": exchange}


def us_share_holders(builder: StreamsBuilder):
    positions = builder.table("share-holders", materialized="share-holder-store")
    return (
        positions.filter(lambda key, p: p["exchange"] == "NASDAQ")
        .group_by(lambda key, p: (p["client"], {p["id"]}))
        .reduce(
            adder=lambda a, b: a | b,
            subtractor=lambda a, b: (a - b) or None,
            materialized="us-share-holders",
        )
    )


@pytest.fixture(params=[True, False], ids=["cached", "uncached"])
def driver(request):
    builder = StreamsBuilder()
    us_share_holders(builder).to_stream().to("us-share-holders-out", value_serde="pickle")
    cache = 10 * 1024 * 1024 if request.param else 0
    with TopologyTestDriver(builder.build(), {"cache.max.bytes.buffering": cache}) as d:
        yield d


def load_seed_table(driver):
    topic = driver.create_input_topic("share-holders")
    for p in POSITIONS:
        topic.pipe_input(p[0], position(*p))
    return topic


def test_seed_table_gives_client1_1_3_and_client2_4(driver):
    load_seed_table(driver)
    store = driver.get_key_value_store("us-share-holders")
    assert store.to_dict() == {"client1": {1, 3}, "client2": {4}}
    assert [k for k, _ in store.all()] == ["client1", "client2"]
    assert driver.get_key_value_store("share-holder-store").approximate_num_entries() == 5


def test_closing_last_position_deletes_client(driver):
    topic = load_seed_table(driver)
    out = driver.create_output_topic("us-share-holders-out", value_serde="pickle")
    out.read_key_values()
    topic.pipe_input(4, None)
    assert driver.get_key_value_store("us-share-holders").get("client2") is None
    assert "client2" not in driver.get_key_value_store("us-share-holders")
    assert out.read_key_values() == [("client2", None)]


def test_closing_one_of_two_positions_keeps_client(driver):
    topic = load_seed_table(driver)
    topic.pipe_input(1, None)
    assert driver.get_key_value_store("us-share-holders").to_dict() == {
        "client1": {3},
        "client2": {4},
    }


def test_moving_position_between_clients_updates_both(driver):
    topic = load_seed_table(driver)
    topic.pipe_input(3, position(3, "client2", "FB", 33, "NASDAQ"))
    assert driver.get_key_value_store("us-share-holders").to_dict() == {
        "client1": {1},
        "client2": {3, 4},
    }


def test_position_leaving_us_exchange_is_subtracted(driver):
    topic = load_seed_table(driver)
    topic.pipe_input(4, position(4, "client2", "AAPL", 25, "LON"))
    assert driver.get_key_value_store("us-share-holders").to_dict() == {"client1": {1, 3}}


def test_closing_unknown_position_changes_nothing(driver):
    topic = load_seed_table(driver)
    out = driver.create_output_topic("us-share-holders-out", value_serde="pickle")
    out.read_key_values()
    topic.pipe_input(99, None)
    assert out.read_key_values() == []
    assert driver.get_key_value_store("us-share-holders").to_dict() == {
        "client1": {1, 3},
        "client2": {4},
    }


def daniel(amount):
    return {"client": "daniel", "id": "daniel:::AAPL", "ticker": "AAPL", "exchange": "NASDAQ",
            "amount": amount}


def seed_log_run(cache_bytes: int):
    """The implementation-notes seed: add, remove, add, update one position of 'daniel'."""
    builder = StreamsBuilder()
    us_share_holders(builder).to_stream().to("changes", value_serde="pickle")
    driver = TopologyTestDriver(builder.build(), {"cache.max.bytes.buffering": cache_bytes})
    topic = driver.create_input_topic("share-holders")
    out = driver.create_output_topic("changes", value_serde="pickle")
    steps = []
    for value in (daniel(99), None, daniel(99), daniel(1)):
        topic.pipe_input("daniel:::AAPL", value)
        steps.append(out.read_key_values())
    return steps


def test_seed_log_without_caching_update_is_subtract_then_add():
    added, removed, readded, updated = seed_log_run(0)
    assert added == [("daniel", {"daniel:::AAPL"})]
    assert removed == [("daniel", None)]
    assert readded == [("daniel", {"daniel:::AAPL"})]
    # cache.max.bytes.buffering = 0: "(null<-null)" then "(#{...}<-null)"
    assert updated == [("daniel", None), ("daniel", {"daniel:::AAPL"})]


def test_seed_log_with_caching_update_is_one_emission():
    added, removed, readded, updated = seed_log_run(10 * 1024 * 1024)
    assert added == [("daniel", {"daniel:::AAPL"})]
    assert removed == [("daniel", None)]
    assert readded == [("daniel", {"daniel:::AAPL"})]
    assert updated == [("daniel", {"daniel:::AAPL"})]


def test_reduce_result_timestamp_is_max_of_inputs():
    builder = StreamsBuilder()
    us_share_holders(builder)
    driver = TopologyTestDriver(builder.build())
    topic = driver.create_input_topic("share-holders")
    topic.pipe_input(1, position(1, "c", "AAPL", 1, "NASDAQ"), timestamp=500)
    topic.pipe_input(2, position(2, "c", "FB", 1, "NASDAQ"), timestamp=200)
    store = driver.get_timestamped_key_value_store("us-share-holders")
    assert store.get("c") == ({1, 2}, 500)
