"""The HTTP API: writes land in real Kafka topics, reads come from real serving stores."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from examples.share_holders import service
from examples.share_holders.api import create_api
from examples.share_holders.producer import ShareHoldersProducer
from fastapi.testclient import TestClient
from tests.runtime.spark.kafka_util import read_partitions as read_topic_partitions

from streamtable import TopologyTestDriver
from streamtable.kafka.admin import ensure_topics
from streamtable.kafka.broker import free_port
from streamtable.partitioner import default_partition


@pytest.fixture
def topics(bootstrap: str) -> tuple[str, str]:
    """Fresh positions and ref-data topics (2 partitions each) for one test."""
    suffix = uuid.uuid4().hex[:8]
    names = (f"share-holders-{suffix}", f"shares-ref-data-{suffix}")
    ensure_topics(bootstrap, {n: 2 for n in names})
    return names


@pytest.fixture
def producer(bootstrap: str, topics: tuple[str, str]) -> Iterator[ShareHoldersProducer]:
    p = ShareHoldersProducer(bootstrap, positions_topic=topics[0], ref_data_topic=topics[1])
    yield p
    p.close()


@pytest.fixture
def client(producer: ShareHoldersProducer, store_writer: Any) -> TestClient:
    return TestClient(create_api(producer, store_writer.stores()))


def read_topic(bootstrap: str, topic: str, timeout: float = 20.0,
               with_partition: bool = False) -> list[Any]:
    """Every record of ``topic`` as decoded ``(key, value)`` (``(partition, key, value)``
    ``with_partition``), per partition in offset order."""
    out = []
    for partition, messages in sorted(read_topic_partitions(bootstrap, topic,
                                                            timeout=timeout).items()):
        for msg in messages:
            value = None if msg.value() is None else json.loads(msg.value())
            out.append((partition, json.loads(msg.key()), value))
    if with_partition:
        return out
    return [(k, v) for _, k, v in out]


def read_partitions(bootstrap: str, topic: str) -> dict[Any, int]:
    """The partition of each key's last record."""
    return {k: p for p, k, _ in read_topic(bootstrap, topic, with_partition=True)}


def records_of(bootstrap: str, topic: str, key: Any) -> list[Any]:
    return [v for k, v in read_topic(bootstrap, topic) if k == key]


# -- writes ----------------------------------------------------------------------------------
def test_keys_are_partitioned_like_the_java_client(client, bootstrap, topics):
    tickers = ["AAPL", "FB", "IBM", "MSFT", "VOD", "TSLA", "GOOG", "NVDA"]
    for ticker in tickers:
        r = client.put(f"/ref-data/{ticker}", json={"name": ticker, "exchange": "NYSE"})
        assert r.status_code == 202
    placed = read_partitions(bootstrap, topics[1])
    assert sorted(placed) == sorted(tickers)
    for ticker, partition in placed.items():
        assert partition == default_partition(json.dumps(ticker).encode(), 2), ticker
    assert len(set(placed.values())) == 2


def test_put_ref_data_lands_in_the_ref_data_topic(client, bootstrap, topics):
    r = client.put("/ref-data/AAPL", json={"name": "Apple Inc.", "exchange": "nasdaq"})
    assert r.status_code == 202, r.text
    assert r.json() == {"ticker": "AAPL", "name": "Apple Inc.", "exchange": "NASDAQ"}
    assert read_topic(bootstrap, topics[1]) == [("AAPL", {"name": "Apple Inc.",
                                                          "exchange": "NASDAQ"})]


def test_put_and_close_positions_land_in_the_positions_topic(client, bootstrap, topics):
    r = client.put("/positions/1", json={"client": "client1", "ticker": "AAPL", "amount": 100})
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "set" and r.json()["topic"] == topics[0]
    r = client.put("/positions/2", json={"client": "client1", "ticker": "VOD", "amount": 5.5,
                                         "exchange": "LON"})
    assert r.status_code == 202, r.text
    assert client.put("/positions/2", json={"client": "client1", "ticker": "VOD",
                                            "amount": 0}).json()["status"] == "closed"
    assert client.delete("/positions/1").status_code == 202

    assert records_of(bootstrap, topics[0], 1) == [
        {"id": 1, "client": "client1", "ticker": "AAPL", "amount": 100}, None]
    assert records_of(bootstrap, topics[0], 2) == [
        {"id": 2, "client": "client1", "ticker": "VOD", "amount": 5.5, "exchange": "LON"},
        None]


INVALID_WRITES = [
    ("/positions/1", {"client": "c", "ticker": "aapl", "amount": 1}, "ticker"),
    ("/positions/1", {"client": "c", "ticker": "AAPL", "amount": -1}, "amount"),
    ("/positions/1", {"client": "", "ticker": "AAPL", "amount": 1}, "client"),
    ("/positions/1", {"client": "  ", "ticker": "AAPL", "amount": 1}, "client"),
    ("/positions/1", {"client": "c", "ticker": "AAPL"}, "amount"),
    ("/positions/1", {"client": "c", "ticker": "AAPL", "amount": "lots"}, "amount"),
    ("/positions/1", {"client": "c", "ticker": "AAPL", "amount": 1, "colour": "red"},
     "colour"),
    ("/positions/1", {"client": "c", "ticker": "AAPL", "amount": 1, "exchange": ""},
     "exchange"),
    ("/positions/x", {"client": "c", "ticker": "AAPL", "amount": 1}, "position_id"),
    ("/positions/-3", {"client": "c", "ticker": "AAPL", "amount": 1}, "position_id"),
    ("/ref-data/aapl", {"name": "Apple", "exchange": "NASDAQ"}, "ticker"),
    ("/ref-data/AAPL", {"name": "", "exchange": "NASDAQ"}, "name"),
    ("/ref-data/AAPL", {"name": "  ", "exchange": "NASDAQ"}, "name"),
    ("/ref-data/AAPL", {"name": "Apple"}, "exchange"),
]


def test_invalid_writes_are_422_with_a_reason_and_write_nothing(client, bootstrap, topics):
    for path, body, reason in INVALID_WRITES:
        r = client.put(path, json=body)
        assert r.status_code == 422, (path, body, r.text)
        assert reason in json.dumps(r.json()["detail"]), (path, body, r.text)
    assert read_topic(bootstrap, topics[0]) == [] and read_topic(bootstrap, topics[1]) == []


def test_non_finite_amounts_are_422_at_validation(client, bootstrap, topics):
    # Python's JSON parser reads NaN, Infinity and 1e400 (an overflow to inf): none is a number
    # of shares, and the 422 itself must be valid JSON
    for amount in ("NaN", "Infinity", "-Infinity", "1e400"):
        r = client.put("/positions/1", content=f'{{"client": "c", "ticker": "AAPL", '
                                                f'"amount": {amount}}}',
                       headers={"content-type": "application/json"})
        assert r.status_code == 422, (amount, r.text)
        assert "amount must be a finite number" in json.dumps(r.json()["detail"]), r.text
    assert read_topic(bootstrap, topics[0]) == []


def test_a_position_id_beyond_64_bits_is_422_on_every_route(client, bootstrap, topics):
    huge = "1" + "0" * 22
    body = {"client": "c", "ticker": "AAPL", "amount": 1}
    for r in (client.put(f"/positions/{huge}", json=body), client.delete(f"/positions/{huge}"),
              client.get(f"/positions/{huge}"), client.put(f"/positions/{2**63}", json=body)):
        assert r.status_code == 422, r.text
        assert "must fit a signed 64-bit integer" in json.dumps(r.json()["detail"]), r.text
    assert read_topic(bootstrap, topics[0]) == []
    assert client.put(f"/positions/{2**63 - 1}", json=body).status_code == 202


def test_a_body_over_the_limit_is_413(client, bootstrap, topics):
    from examples.share_holders.api import MAX_BODY_BYTES

    big = {"client": "c" * MAX_BODY_BYTES, "ticker": "AAPL", "amount": 1}
    r = client.put("/positions/1", json=big)
    assert r.status_code == 413 and "over the limit of" in r.json()["detail"], r.text

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit counts the bytes read
        yield b'{"client": "'
        for _ in range(MAX_BODY_BYTES // 1000 + 1):
            yield b"c" * 1000
        yield b'", "ticker": "AAPL", "amount": 1}'

    r = client.put("/positions/1", content=chunks(), headers={"content-type": "application/json"})
    assert "content-length" not in r.request.headers
    assert r.status_code == 413 and "over the limit of" in r.json()["detail"], r.text
    assert read_topic(bootstrap, topics[0]) == []
    small = client.put("/positions/1", json={**big, "client": "c" * 1000})
    assert small.status_code == 202, small.text


def test_kafka_down_is_503(store_writer):
    dead = ShareHoldersProducer(f"127.0.0.1:{free_port()}", timeout=0.5)
    api = TestClient(create_api(dead, store_writer.stores()))
    r = api.put("/positions/1", json={"client": "c", "ticker": "AAPL", "amount": 1})
    assert r.status_code == 503 and "share-holders" in r.json()["detail"]
    dead.close(0)


# -- reads -----------------------------------------------------------------------------------
def test_reads_show_what_the_topology_made_of_the_writes(client, bootstrap, topics,
                                                        store_writer, topology, sync):
    for ticker, name, exchange in [("AAPL", "Apple Inc.", "NASDAQ"), ("VOD", "Vodafone", "LON"),
                                   ("FB", "Meta Platforms", "NASDAQ")]:
        assert client.put(f"/ref-data/{ticker}",
                          json={"name": name, "exchange": exchange}).status_code == 202
    for pid, who, ticker, amount in [(1, "client1", "AAPL", 100), (2, "client1", "VOD", 5),
                                     (3, "client1", "FB", 33), (4, "client2", "AAPL", 25),
                                     (5, "client3", "VOD", 33)]:
        r = client.put(f"/positions/{pid}", json={"client": who, "ticker": ticker,
                                                  "amount": amount})
        assert r.status_code == 202, r.text
    client.delete("/positions/4")

    # what the streaming app does, in-process: the records from Kafka through the topology
    driver = TopologyTestDriver(topology)
    for real, logical in ((topics[1], "shares-ref-data"), (topics[0], "share-holders")):
        for key, value in read_topic(bootstrap, real):
            driver.pipe_raw(logical, json.dumps(key).encode(),
                            None if value is None else json.dumps(value).encode(), 0)
    sync(driver, store_writer)

    r = client.get("/share-holders")
    assert r.status_code == 200
    assert [h["client"] for h in r.json()] == ["client1"]
    one = client.get("/share-holders/client1").json()
    assert [(p["id"], p["ticker"], p["name"], p["amount"], p["exchange"])
            for p in one["positions"]] == [(1, "AAPL", "Apple Inc.", 100, "NASDAQ"),
                                           (3, "FB", "Meta Platforms", 33, "NASDAQ")]
    assert client.get("/share-holders/client2").status_code == 404  # position closed
    r = client.get("/share-holders/client3")  # London only
    assert r.status_code == 404 and "not a US share-holder" in r.json()["detail"]
    assert client.get("/positions/5").json()["exchange"] == "LON"
    assert client.get("/positions/4").status_code == 404
    assert client.get("/health").json()["stores"]["us-share-holders"] == 1


def test_openapi_docs(client):
    assert client.get("/docs").status_code == 200
    spec = client.get("/openapi.json").json()
    assert {"/ref-data/{ticker}", "/positions/{position_id}", "/share-holders",
            "/share-holders/{client}"} <= set(spec["paths"])
    assert "PositionIn" in spec["components"]["schemas"]


# -- service wiring --------------------------------------------------------------------------
def test_http_server_serves_the_api_in_a_thread(producer, store_writer):
    store_writer.position(1, "client1", "AAPL", 3)
    store_writer.holder("client1", {1}, task=0)
    http = service.HttpServer(create_api(producer, store_writer.stores()), "127.0.0.1",
                              0).start()
    try:
        assert http.port != 0
        r = httpx.get(f"{http.url}/share-holders/client1", timeout=10)
        assert r.status_code == 200 and r.json()["positions"][0]["ticker"] == "AAPL"
    finally:
        http.stop()


def test_topics_stores_and_task_count(bootstrap, topology, store_writer):
    assert service.create_topics(bootstrap, 2) == {"share-holders": 2, "shares-ref-data": 2}
    assert service.store_task_count(topology, "share-holders",
                                    {"share-holders": 2, "shares-ref-data": 2}) == 2
    stores = service.open_stores(store_writer.serving)
    assert set(stores) == {"us-share-holders", "positions-enriched"}
