"""Topologies of versioned stores and tables, shared by the driver's tests and the Spark ones:
a processor writing a versioned store of its own (Kafka Streams'
``VersionedKeyValueStoreIntegrationTest``), and orders priced by a versioned table of rates,
joined as of each order's time, with or without a grace period."""

from __future__ import annotations

from typing import Any

from streamtable import Joined, Materialized, Processor, Record, Stores, StreamsBuilder
from streamtable.topology import Topology

HISTORY = 60_000
DELETE = "delete"


class VersionedWriter(Processor):
    """Puts each record into a versioned store at its timestamp (the value ``"delete"``
    deletes) and forwards what the store answered: ``["put", valid_to]`` or ``["deleted",
    [value, timestamp] or None]``, then the key's latest version and the one just before."""

    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store("versioned-store")

    def process(self, record: Record) -> None:
        if record.value == DELETE:
            found = self.store.delete(record.key, record.timestamp)
            answer: list[Any] = ["deleted", None if found is None else list(found[:2])]
        else:
            answer = ["put", self.store.put(record.key, record.value, record.timestamp)]
        latest = self.store.get(record.key)
        before = self.store.get(record.key, record.timestamp - 1)
        self.context.forward(record.with_value(
            [*answer, None if latest is None else list(latest),
             None if before is None else list(before)]))


def versioned_papi(source: str = "in", out: str = "out") -> Topology:
    b = StreamsBuilder()
    b.add_state_store(Stores.versioned_key_value_store_builder(
        Stores.persistent_versioned_key_value_store("versioned-store", HISTORY)
    ).with_queryable())
    b.stream(source).process(VersionedWriter, "versioned-store", named="writer").to(out)
    return b.build()


# VersionedKeyValueStoreIntegrationTest.shouldPutGetAndDelete's data, from timestamp 100
PAPI_BATCHES = [
    [(1, "a0", 100), (2, "b0", 100), (3, None, 100)],
    [(1, "a5", 105), (2, None, 105), (3, "c5", 105)],
    [(1, "a2", 102), (2, "b2", 102), (3, None, 102)],  # out of order
    [(1, "a5_new", 105), (2, "b5", 105), (3, None, 105)],  # replaces the versions at 105
    [(1, DELETE, 107), (2, DELETE, 107), (3, DELETE, 107)],
]


def priced_orders(grace: int | None = None, rates: str = "rates", orders: str = "orders",
                  out: str = "priced") -> Topology:
    """Orders (amounts) priced at the rate valid at each order's time; with ``grace``, orders
    wait that long for late rates. The rates table is queryable as ``rates``."""
    b = StreamsBuilder()
    table = b.table(rates, Materialized.as_(
        Stores.persistent_versioned_key_value_store("rates", HISTORY)))
    joined = None if grace is None else Joined.with_grace_period(grace)
    (b.stream(orders)
     .left_join(table, lambda amount, rate: [amount, rate], joined=joined)
     .to(out))
    table.to_stream().to(f"{out}-rates")
    return b.build()
