"""Random topologies over two input topics, and random inputs for them, for differential tests:
a stream joined with a GlobalKTable, a Processor API topology with its store (key-value,
timestamped or window), and a versioned table (a stream joined with it as of each record's
time, with or without a grace period; its changelog and an aggregation of it).

Their inputs are run in micro-batches over several partitions; the reference is the test
driver in batch mode over the same batches and partitions (a global table's updates come
before a batch's stream records, and a versioned table's inputs come out of order, so the
record-by-record driver is not the Spark runtime's order)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tests.runtime.spark.topologies import _stream_ops

from streamtable import (
    Joined,
    Materialized,
    Processor,
    Record,
    Stores,
    StreamsBuilder,
    ValueAndTimestamp,
)
from streamtable.topology import Topology

KINDS = ("global", "papi", "versioned")


@dataclass
class MultiCase:
    topology: Topology
    description: str
    outputs: list[str]
    stores: list[str] = field(default_factory=list)
    versioned_stores: list[str] = field(default_factory=list)
    window_stores: list[str] = field(default_factory=list)
    # the input topics, and the "ref" topic's keys: the global table's (its values' group) or
    # the stream's
    topics: tuple[str, ...] = ("in", "ref")
    ref_keys: int = 12
    # timestamps: rising with the input, or jittered (late by up to this much; some later
    # than the versioned store's history retention)
    jitter: int = 0
    retention: int = 0


# -- Processor API processors (module level: Spark's workers import them) ------------------

class CountPerKey(Processor):
    """A key-value store: each key's count of records so far."""

    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store("papi-store")

    def process(self, record: Record) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count))


class LastWithAge(Processor):
    """A timestamped store: each key's last ``n`` and how long ago the one before came."""

    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store("papi-store")

    def process(self, record: Record) -> None:
        previous = self.store.get(record.key)
        self.store.put(record.key, ValueAndTimestamp(record.value["n"], record.timestamp))
        age = None if previous is None else record.timestamp - previous.timestamp
        self.context.forward(record.with_value([record.value["n"], age]))


WINDOW, WINDOW_RETENTION = 5, 20


class WindowSum(Processor):
    """A window store: each key's sum of ``n`` per 5 ms window; forwards the key's windows of
    the last 20 ms (expired ones are never fetched)."""

    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store("papi-store")

    def process(self, record: Record) -> None:
        start = record.timestamp - record.timestamp % WINDOW
        total = (self.store.fetch(record.key, start) or 0) + record.value["n"]
        self.store.put(record.key, total, start)
        recent = [[s, v] for s, v in self.store.fetch(record.key, record.timestamp - 20,
                                                      record.timestamp)]
        self.context.forward(record.with_value(recent))


def _value_ops(rng: random.Random, s: Any, desc: list[str]) -> Any:
    """Stream operators that keep the key (a processor's store is per key and partition)."""
    for _ in range(rng.randint(0, 2)):
        op = rng.choice(["filter", "map_values", "peek"])
        m, c = rng.randint(2, 4), rng.randint(1, 3)
        if op == "filter":
            s = s.filter(lambda k, v, m=m: v["n"] % m != 0)
        elif op == "map_values":
            s = s.map_values(lambda v, c=c: {"g": v["g"], "n": v["n"] * c})
        else:
            s = s.peek(lambda k, v: None)
        desc.append(op)
    return s


def _joiner(v: Any, r: Any) -> Any:
    return {"n": v["n"], "r": None if r is None else r["r"]}


def random_multi_case(seed: int, kind: str) -> MultiCase:
    rng = random.Random(seed)
    b = StreamsBuilder()
    desc = [kind]
    if kind == "global":
        s, _ = _stream_ops(rng, b.stream("in"), desc)
        ref = b.global_table("ref", materialized="ref-store")
        left = rng.random() < 0.5
        desc.append("left_join" if left else "join")
        (s.left_join if left else s.join)(ref, lambda k, v: v["g"], _joiner).to("out-stream")
        outputs, stores = ["out-stream"], ["ref-store"]
        if rng.random() < 0.5:
            (s.join(ref, lambda k, v: v["g"], lambda v, r: r["r"]).group_by_key()
             .reduce(lambda a, v: a + v, "agg").to_stream().to("out-table"))
            outputs.append("out-table")
            stores.append("agg")
            desc.append("reduce")
        return MultiCase(b.build(), "-".join(desc), outputs, stores, ref_keys=4)
    if kind == "papi":
        store_kind = rng.choice(["key-value", "timestamped", "window"])
        desc.append(store_kind)
        if store_kind == "key-value":
            builder = Stores.key_value_store_builder(
                Stores.persistent_key_value_store("papi-store"))
            processor: Any = CountPerKey
        elif store_kind == "timestamped":
            builder = Stores.timestamped_key_value_store_builder(
                Stores.persistent_timestamped_key_value_store("papi-store"))
            processor = LastWithAge
        else:
            builder = Stores.window_store_builder(
                Stores.persistent_window_store("papi-store", WINDOW_RETENTION, WINDOW))
            processor = WindowSum
        b.add_state_store(builder.with_queryable())
        s = _value_ops(rng, b.stream("in"), desc)
        s.process(processor, "papi-store").to("out-stream")
        windowed = store_kind == "window"
        return MultiCase(b.build(), "-".join(desc), ["out-stream"],
                         [] if windowed else ["papi-store"],
                         window_stores=["papi-store"] if windowed else [], topics=("in",))
    retention = rng.choice([30, 100, 400])
    table = b.table("ref", Materialized.as_(
        Stores.persistent_versioned_key_value_store("vt", retention, rng.choice([10, 50]))))
    desc.append(f"retention{retention}")
    versioned = ["vt"]
    if rng.random() < 0.4:  # a derived table kept in a versioned store of its own
        table = table.filter(lambda k, v: v["r"] % 3 != 0, Materialized.as_(
            Stores.persistent_versioned_key_value_store("vt-filtered", retention)))
        versioned.append("vt-filtered")
        desc.append("filter")
    s, _ = _stream_ops(rng, b.stream("in"), desc)
    grace = rng.choice([None, 0, min(retention, 20)])
    joined = None if grace is None else Joined.with_grace_period(grace)
    left = rng.random() < 0.5
    desc.append(("left_join" if left else "join") + ("" if grace is None else f"-grace{grace}"))
    (s.left_join if left else s.join)(table, _joiner, joined=joined).to("out-stream")
    table.to_stream().to("out-table")
    outputs, stores = ["out-stream", "out-table"], []
    if rng.random() < 0.5:
        (table.group_by(lambda k, v: (v["r"] % 3, v["r"]))
         .reduce(lambda a, v: a + v, lambda a, v: a - v, "agg").to_stream().to("out-agg"))
        outputs.append("out-agg")
        stores.append("agg")
        desc.append("reduce")
    return MultiCase(b.build(), "-".join(desc), outputs, stores, versioned,
                     jitter=retention + 40, retention=retention)


def random_multi_input(seed: int, case: MultiCase, n: int,
                       keys: int = 12) -> list[tuple[str, Any, Any, int]]:
    """``(topic, key, value, timestamp)`` records: about a third to ``ref``. Timestamps rise
    by 10 ms a record; with ``case.jitter``, records come up to that much late."""
    rng = random.Random(seed * 7919 + 3)
    records = []
    for i in range(n):
        ts = 1_000 + 10 * i
        if case.jitter and rng.random() < 0.4:
            ts -= rng.randint(1, case.jitter)
        if "ref" in case.topics and rng.random() < 0.35:
            value = None if rng.random() < 0.2 else {"r": rng.randint(1, 9)}
            records.append(("ref", rng.randrange(case.ref_keys), value, ts))
        else:
            records.append(("in", rng.randrange(keys),
                            {"g": rng.randrange(4), "n": rng.randint(1, 9)}, ts))
    return records
