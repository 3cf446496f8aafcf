"""The share-holders demo, in-process on the TopologyTestDriver.

It loads the seed's positions table, shows the US share-holders table, closes and moves a
position and shows the change. The end-to-end service on Spark, the broker and SMTP replaces
this once it lands.
"""

from __future__ import annotations

from typing import Any

from streamtable import StreamsBuilder, TopologyTestDriver

SEED_POSITIONS = [
    (1, "client1", "AAPL", 100, "NASDAQ"),
    (2, "client1", "VOD", 5, "LON"),
    (3, "client1", "FB", 33, "NASDAQ"),
    (4, "client2", "AAPL", 25, "NASDAQ"),
    (5, "client3", "VOD", 33, "LON"),
]


def build_topology(us_exchanges: tuple[str, ...] = ("NASDAQ", "NYSE")) -> Any:
    builder = StreamsBuilder()
    (builder.table("share-holders", materialized="share-holder-store")
        .filter(lambda key, p: p["exchange"] in us_exchanges)
        .group_by(lambda key, p: (p["client"], {p["id"]}))
        .reduce(adder=lambda a, b: a | b,
                subtractor=lambda a, b: (a - b) or None,
                materialized="us-share-holders"))
    return builder.build()


def _show(title: str, table: dict[str, set[int]]) -> None:
    print(f"\n{title}")
    print(f"  {'client':<10} positions")
    for client, ids in table.items():
        print(f"  {client:<10} {sorted(ids)}")


def run_demo(once: bool = False) -> int:
    driver = TopologyTestDriver(build_topology())
    topic = driver.create_input_topic("share-holders")
    store = driver.get_key_value_store("us-share-holders")
    for pid, client, ticker, amount, exchange in SEED_POSITIONS:
        topic.pipe_input(pid, {"id": pid, "client": client, "ticker": ticker,
                               "amount": amount, "exchange": exchange})
    first = store.to_dict()
    _show("US share-holders after loading positions 1-5:", first)
    topic.pipe_input(4, None)
    topic.pipe_input(3, {"id": 3, "client": "client3", "ticker": "FB", "amount": 33,
                         "exchange": "NASDAQ"})
    second = store.to_dict()
    _show("after closing position 4 and moving position 3 to client3:", second)
    ok = first == {"client1": {1, 3}, "client2": {4}} and second == {
        "client1": {1}, "client3": {3}}
    print("\ndemo " + ("OK" if ok else "FAILED: unexpected tables"))
    return 0 if ok else 1
