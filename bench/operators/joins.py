"""Joins: stream-stream (inner and outer, 10 s windows), stream-table, stream-GlobalKTable,
table-table on the primary key and on a foreign key. Values carry a record id (``{"id": i}``)
and every join writes the ids it joined, so a result names exactly the records it came from.
"""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from bench.operators.family import Family
from bench.operators.inputs import (
    HOUR_MS,
    PARTITIONS,
    Clock,
    Input,
    Keys,
    encode,
    key_count,
    time_base,
)

JOIN_WINDOW_MS = 10_000
JOIN_GRACE_MS = 10_000


def ids(left: Any, right: Any) -> list[Any]:
    """A join result: the ids of the records joined (``None`` for a missing side)."""
    return [None if left is None else left["id"], None if right is None else right["id"]]


def with_tier(record: Any, row: Any) -> list[Any]:
    return [record["id"], row["tier"]]


def ref_of(key: Any, value: Any) -> Any:
    return value["ref"]


def customer_of(order: Any) -> Any:
    return order["customer"]


# ------------------------------------------------------------------------ stream-stream


SLOTS = [(role, p) for p in range(PARTITIONS) for role in ("left", "right")]


class StreamStreamInner(Family):
    """Stream-stream inner join: ``left.join(right, ids, JoinWindows
    .of_time_difference_and_grace(10 s, 10 s))``.

    Input: the i-th record goes to side and partition ``i % 4`` (left 0, right 0, left 1,
    right 1), so both sides of a task advance together in event time and each micro-batch
    ends at about the same time on every side.

    Check (every emitted record): the emitted pairs are exactly the pairs of a left and a right
    record of the same key at most 10 s apart, each once. Which record of a pair arrives second
    depends on order only, not on batches, and no record is late, so the set is
    batch-independent.
    """

    name = "ss-inner"
    title = "stream-stream inner join (10 s windows, grace 10 s)"
    check = "multiset of pairs = left/right records of a key ≤ 10 s apart"
    kind = "multiset"
    outer = False

    def topology(self, topics: Mapping[str, str], output: str) -> Any:
        from streamtable import JoinWindows, StreamsBuilder

        b = StreamsBuilder()
        left, right = b.stream(topics["left"]), b.stream(topics["right"])
        windows = JoinWindows.of_time_difference_and_grace(JOIN_WINDOW_MS, JOIN_GRACE_MS)
        join = left.outer_join if self.outer else left.join
        join(right, ids, windows).to(output)
        return b.build()

    def generate(self, records: int, seed: int) -> Input:
        rng = random.Random(seed)
        keys = Keys(key_count(records))
        clock = Clock(time_base(records), rng)
        per_slot = records // len(SLOTS) - (1 if self.outer else 0)
        n = per_slot * len(SLOTS)
        inp = Input(stats={"keys": len(keys.names)})
        for i in range(n):
            role, p = SLOTS[i % len(SLOTS)]
            j = rng.choice(keys.by_partition[p])
            inp.add(role, keys.encoded[j], encode({"id": i}), clock.at(i), p)
        if self.outer:
            inp.end_markers(["left", "right"], clock.base + n)
        late = inp.max_disorder()
        assert late < JOIN_GRACE_MS, f"a record {late} ms out of order"
        return inp

    def reference(self, inp: Input) -> dict[Any, Any]:
        sides: dict[str, dict[Any, list[tuple[int, int]]]] = {}
        for role in ("left", "right"):
            by_key: dict[Any, list[tuple[int, int]]] = defaultdict(list)
            for key, value, ts, _ in inp.decoded(role):
                by_key[key].append((ts, value["id"]))
            for records in by_key.values():
                records.sort()
            sides[role] = by_key
        out: Counter[Any] = Counter()
        matched_right: set[int] = set()
        for key, lefts in sides["left"].items():
            rights = sides["right"].get(key, [])
            times = [ts for ts, _ in rights]
            for ts, lid in lefts:
                lo = bisect_left(times, ts - JOIN_WINDOW_MS)
                hi = bisect_right(times, ts + JOIN_WINDOW_MS)
                for _, rid in rights[lo:hi]:
                    out[(key, (lid, rid))] += 1
                    matched_right.add(rid)
                if self.outer and lo == hi:
                    out[(key, (lid, None))] += 1
        if self.outer:
            for key, rights in sides["right"].items():
                for _, rid in rights:
                    if rid not in matched_right:
                        out[(key, (None, rid))] += 1
        return out


class StreamStreamOuter(StreamStreamInner):
    """Stream-stream outer join: ``left.outer_join(right, ids, JoinWindows
    .of_time_difference_and_grace(10 s, 10 s))``; input as the inner join's, plus one
    end-of-input marker per side and partition (an hour after the last record, its own key):
    it closes every window in every task, so every record without a partner is emitted,
    however the input was cut into batches.

    Check (every emitted record): the pairs of the inner join, plus ``[id, null]`` for each
    left record and ``[null, id]`` for each right record with no partner within 10 s, each
    exactly once. Unmatched records are held until their window closes (stream time past
    their timestamp + 10 s + grace) and no partner arrives that late here, so no record is
    both paired and emitted alone.
    """

    name = "ss-outer"
    title = "stream-stream outer join (10 s windows, grace 10 s)"
    check = "multiset = inner pairs + each unpartnered record with null, once"
    outer = True


# ------------------------------------------------------------------------- stream-table


def table_rows(inp: Input, role: str, keys: Keys, rng: random.Random, base: int,
               present: float = 0.9) -> dict[str, Any]:
    """One row ``{"tier": 1..5}`` for about ``present`` of the keys, in key order, an hour
    before the stream's first record (so every task has the whole table before any stream
    record); returns the rows by key name."""
    rows = {}
    for j, name in enumerate(keys.names):
        if rng.random() < present:
            row = {"tier": rng.randint(1, 5)}
            rows[name] = row
            inp.add(role, keys.encoded[j], encode(row), base - HOUR_MS + j)
    return rows


class StreamTable(Family):
    """Stream-table inner join: ``stream.join(table, [record id, row's tier])``, the table
    read from a topic of one row for 90% of :func:`key_count` keys (100,000 keys from a million
    records up), the stream's keys drawn from all of them.

    The table's rows are an hour older than every stream record, and the whole table fits in
    the first micro-batch (Spark's batch cap is spread evenly over the four partitions), so
    each task applies all its rows before its first stream record, in every run.

    Check (every emitted record): each stream record whose key has a row joins it exactly once
    (``[id, tier]``); the others give nothing.
    """

    name = "stream-table"
    title = "stream-table join (table of 100k rows from 1M records)"
    check = "multiset = one [id, tier] per stream record whose key has a row"
    kind = "multiset"

    def topology(self, topics: Mapping[str, str], output: str) -> Any:
        from streamtable import StreamsBuilder

        b = StreamsBuilder()
        table = b.table(topics["table"])
        b.stream(topics["stream"]).join(table, with_tier).to(output)
        return b.build()

    def generate(self, records: int, seed: int) -> Input:
        rng = random.Random(seed)
        keys = Keys(key_count(records))
        base = time_base(records)
        inp = Input()
        rows = table_rows(inp, "table", keys, rng, base)
        clock = Clock(base, rng)
        for i in range(max(0, records - len(rows))):
            p = i % PARTITIONS
            j = rng.choice(keys.by_partition[p])
            inp.add("stream", keys.encoded[j], encode({"id": i}), clock.at(i), p)
        inp.stats = {"keys": len(keys.names), "table_rows": len(rows)}
        return inp

    def reference(self, inp: Input) -> dict[Any, Any]:
        rows = {key: value for key, value, _, _ in inp.decoded("table")}
        out: Counter[Any] = Counter()
        for key, value, _, _ in inp.decoded("stream"):
            row = rows.get(key)
            if row is not None:
                out[(key, (value["id"], row["tier"]))] += 1
        return out


class GlobalTable(Family):
    """Stream-GlobalKTable join: ``stream.join(global_table, value["ref"], [record id, row's
    tier])``; the global table has a row for 90% of :func:`key_count` reference keys
    (``"r000042"``), each stream record names one of all of them.

    On Spark a micro-batch's global-table records are applied before its stream records; the
    rows are an hour older than the stream and all in the first batch, so every stream record
    sees the whole table, as in the test driver.

    Check (every emitted record): each stream record whose reference has a row joins it once.
    """

    name = "global-table"
    title = "stream-GlobalKTable join"
    check = "multiset = one [id, tier] per stream record whose ref has a row"
    kind = "multiset"

    def topology(self, topics: Mapping[str, str], output: str) -> Any:
        from streamtable import StreamsBuilder

        b = StreamsBuilder()
        table = b.global_table(topics["global"])
        b.stream(topics["stream"]).join(table, ref_of, with_tier).to(output)
        return b.build()

    def generate(self, records: int, seed: int) -> Input:
        rng = random.Random(seed)
        n_keys = key_count(records)
        refs = Keys(n_keys, prefix="r")
        keys = Keys(n_keys)
        base = time_base(records)
        inp = Input()
        rows = table_rows(inp, "global", refs, rng, base)
        clock = Clock(base, rng)
        for i in range(max(0, records - len(rows))):
            p = i % PARTITIONS
            j = rng.choice(keys.by_partition[p])
            ref = refs.names[rng.randrange(n_keys)]
            inp.add("stream", keys.encoded[j], encode({"id": i, "ref": ref}), clock.at(i), p)
        inp.stats = {"keys": n_keys, "global_rows": len(rows)}
        return inp

    def reference(self, inp: Input) -> dict[Any, Any]:
        rows = {key: value for key, value, _, _ in inp.decoded("global")}
        out: Counter[Any] = Counter()
        for key, value, _, _ in inp.decoded("stream"):
            row = rows.get(value["ref"])
            if row is not None:
                out[(key, (value["id"], row["tier"]))] += 1
        return out


# -------------------------------------------------------------------------- table-table


def final_rows(inp: Input, role: str) -> dict[Any, Any]:
    """A table topic's final rows: the last value per key, a tombstone deleting it."""
    rows: dict[Any, Any] = {}
    for key, value, _, _ in inp.decoded(role):
        if value is None:
            rows.pop(key, None)
        else:
            rows[key] = value
    return rows


def table_updates(records: int, seed: int, sides: list[tuple[str, Keys, float]],
                  value: Any, tombstones: float = 0.05) -> Input:
    """``records`` upserts and deletes: each picks a side with its weight, then a key of that
    side; ``tombstones`` of them delete."""
    rng = random.Random(seed)
    clock = Clock(time_base(records), rng)
    weights = [w for _, _, w in sides]
    inp = Input()
    for i in range(records):
        role, keys, _ = rng.choices(sides, weights)[0]
        j = rng.randrange(len(keys.names))
        v = None if rng.random() < tombstones else encode(value(role, i, rng))
        inp.add(role, keys.encoded[j], v, clock.at(i))
    return inp


class TableTable(Family):
    """Table-table inner join on the primary key: ``left.join(right, ids)`` over two tables
    of :func:`key_count` keys, each input record an upsert (``{"id": i}``) or, one in twenty,
    a delete of a random key on a random side.

    Check (final table): the output table (tombstones deleting) equals, for every key present
    in both final tables, ``[left id, right id]`` of the last upserts. When intermediate
    results were emitted depends on batches; the final table does not.
    """

    name = "table-table"
    title = "table-table primary-key join"
    check = "final table = [left id, right id] for keys in both final tables"

    def topology(self, topics: Mapping[str, str], output: str) -> Any:
        from streamtable import StreamsBuilder

        b = StreamsBuilder()
        left, right = b.table(topics["left"]), b.table(topics["right"])
        left.join(right, ids).to_stream().to(output)
        return b.build()

    def generate(self, records: int, seed: int) -> Input:
        keys = Keys(key_count(records))
        inp = table_updates(records, seed, [("left", keys, 1.0), ("right", keys, 1.0)],
                            lambda role, i, rng: {"id": i})
        inp.stats = {"keys": len(keys.names)}
        return inp

    def reference(self, inp: Input) -> dict[Any, Any]:
        left, right = final_rows(inp, "left"), final_rows(inp, "right")
        return {k: (v["id"], right[k]["id"]) for k, v in left.items() if k in right}


class ForeignKey(Family):
    """Foreign-key table join: ``orders.join(customers, ids, foreign_key_extractor=
    order["customer"])``, :func:`key_count` orders over a tenth as many customers (at least
    100); four in five input records update an order (its customer may change), one in five
    a customer, one in twenty of each deletes.

    Check (final table): the output table equals, for every final order whose customer is in
    the final customers table, ``[order id, customer id]`` of the last upserts. The
    subscription and response records in between, and the intermediate results, depend on
    batches; the final table does not.
    """

    name = "fk-join"
    title = "foreign-key table join"
    check = "final table = [order id, customer id] for orders whose customer exists"

    def topology(self, topics: Mapping[str, str], output: str) -> Any:
        from streamtable import StreamsBuilder

        b = StreamsBuilder()
        customers = b.table(topics["customers"])
        (b.table(topics["orders"]).join(customers, ids, foreign_key_extractor=customer_of)
         .to_stream().to(output))
        return b.build()

    def generate(self, records: int, seed: int) -> Input:
        n_orders = key_count(records)
        orders, customers = Keys(n_orders, "o"), Keys(max(100, n_orders // 10), "c")

        def value(role: str, i: int, rng: random.Random) -> dict[str, Any]:
            if role == "orders":
                return {"id": i, "customer": rng.choice(customers.names)}
            return {"id": i}

        inp = table_updates(records, seed, [("orders", orders, 0.8),
                                            ("customers", customers, 0.2)], value)
        inp.stats = {"orders": n_orders, "customers": len(customers.names)}
        return inp

    def reference(self, inp: Input) -> dict[Any, Any]:
        orders, customers = final_rows(inp, "orders"), final_rows(inp, "customers")
        return {k: (o["id"], customers[o["customer"]]["id"]) for k, o in orders.items()
                if o["customer"] in customers}
