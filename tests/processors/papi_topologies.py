"""Topologies of the Processor API's stores, shared by the driver's tests and the Spark ones:
a processor counting clicks per window in a window store, one reading a table's store with
timestamps, and a global store kept by a user processor."""

from __future__ import annotations

from typing import Any

from streamtable import Processor, Record, Stores, StreamsBuilder
from streamtable.topology import Topology

WINDOW = 10_000
RETENTION = 35_000


class WindowedClicks(Processor):
    """Counts each key's records per 10 s window in a window store; forwards the key's
    windows with a start in the last minute, ``[[start, count], ...]`` (expired ones are not
    fetched)."""

    def init(self, context: Any) -> None:
        self.context = context
        self.windows = context.get_state_store("clicks")

    def process(self, record: Record) -> None:
        start = record.timestamp - record.timestamp % WINDOW
        count = (self.windows.fetch(record.key, start) or 0) + 1
        self.windows.put(record.key, count, start)
        recent = [[s, c] for s, c in self.windows.fetch(record.key, record.timestamp - 60_000,
                                                         record.timestamp)]
        self.context.forward(record.with_value(recent))


def windowed_clicks(source: str = "clicks-in", out: str = "clicks-out") -> Topology:
    b = StreamsBuilder()
    b.add_state_store(Stores.window_store_builder(
        Stores.persistent_window_store("clicks", RETENTION, WINDOW)).with_queryable())
    b.stream(source).process(WindowedClicks, "clicks", named="windowed-clicks").to(out)
    return b.build()


class PriceStamp(Processor):
    """Tags each order with the product's price and the timestamp of that price, read from the
    prices table's store (a ``TimestampedKeyValueStore`` in Kafka Streams)."""

    def init(self, context: Any) -> None:
        self.context = context
        self.prices = context.get_state_store("prices-store")

    def process(self, record: Record) -> None:
        price = self.prices.get(record.key)
        value = None if price is None else [record.value, price.value, price.timestamp]
        self.context.forward(record.with_value(value))


def priced_orders(prices: str = "prices", orders: str = "orders",
                  out: str = "priced") -> Topology:
    b = StreamsBuilder()
    b.table(prices, materialized="prices-store")
    b.stream(orders).process(PriceStamp, "prices-store", named="price-stamp").to(out)
    return b.build()


class LatestPerUser(Processor):
    """Keeps, in the global store, each user's record with the largest ``seq`` (a global store's
    processor puts what it wants: here it ignores records older than what it holds)."""

    def init(self, context: Any) -> None:
        self.store = context.get_state_store("profiles")

    def process(self, record: Record) -> None:
        held = self.store.get(record.key)
        if record.value is None:
            self.store.delete(record.key)
        elif held is None or record.value["seq"] > held["seq"]:
            self.store.put(record.key, record.value)


class Greet(Processor):
    """Joins each visit with the visitor's profile from the global store."""

    def init(self, context: Any) -> None:
        self.context = context
        self.profiles = context.get_state_store("profiles")

    def process(self, record: Record) -> None:
        profile = self.profiles.get(record.value)
        name = None if profile is None else profile["name"]
        self.context.forward(record.with_value(f"{record.value}:{name}"))


def global_profiles(profiles: str = "profiles-in", visits: str = "visits",
                    out: str = "greetings") -> Topology:
    b = StreamsBuilder()
    b.add_global_store(Stores.key_value_store_builder(
        Stores.persistent_key_value_store("profiles")).with_queryable(),
        profiles, LatestPerUser)
    b.stream(visits).process(Greet, "profiles", named="greet").to(out)
    return b.build()
