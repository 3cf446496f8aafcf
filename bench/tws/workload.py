"""The share-holders workload of the TWS comparison: topology, input batches, reference result.

Input: N position upserts/deletes (about 10% deletes) over N/10 positions and N/100 clients, JSON
keys and values, placed on P partitions by Kafka's default partitioner, cut into micro-batches and
written as one parquet file per batch in the Kafka source's schema, so that both runtimes read
exactly the same rows (streamtable: one static DataFrame per file; the TWS variant: a file stream
with one file per trigger).
"""

from __future__ import annotations

import json
import os
import random
from collections import defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from streamtable.runtime.spark.stage import RECORD_DDL, RECORD_FIELDS

US = ("NASDAQ", "NYSE")
OTHER = ("LSE", "XETRA", "EURONEXT", "TSE", "HKEX")
TICKERS = ("AAPL", "MSFT", "GOOG", "AMZN", "NVDA", "IBM", "ORCL", "SAP", "BP", "HSBC")
TOPIC = "positions"

SOURCE_DDL = RECORD_DDL
SOURCE_SCHEMA = pa.schema(RECORD_FIELDS)


def topology():  # type: ignore[no-untyped-def]
    """The brief's topology (two sub-topologies)."""
    from streamtable import StreamsBuilder

    builder = StreamsBuilder()
    (builder.table(TOPIC, materialized="positions-store")
        .filter(lambda k, p: p["exchange"] in ("NASDAQ", "NYSE"))
        .group_by(lambda k, p: (p["client"], frozenset([p["id"]])))
        .reduce(lambda a, v: a | v, lambda a, v: (a - v) or None,
                materialized="us-share-holders"))
    return builder.build()


def count_topology():  # type: ignore[no-untyped-def]
    """A non-idempotent control for the replay check: events per client (a replayed batch
    applied twice to a count shows up, unlike upserts into a table)."""
    from streamtable import StreamsBuilder

    builder = StreamsBuilder()
    (builder.stream(TOPIC)
        .filter(lambda k, p: p is not None)
        .group_by(lambda k, p: p["client"])
        .count(materialized="client-events"))
    return builder.build()


def expected_counts(events: list[tuple[int, dict[str, Any] | None]]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for _pid, p in events:
        if p is not None:
            out[p["client"]] += 1
    return dict(out)


def generate(n: int, seed: int = 7) -> tuple[list[tuple[int, dict[str, Any] | None]],
                                              dict[int, dict[str, Any]]]:
    """N events over N/10 positions and N/100 clients; returns the events and the final table."""
    rng = random.Random(seed)
    positions = max(1, n // 10)
    clients = max(1, n // 100)
    state: dict[int, dict[str, Any]] = {}
    events: list[tuple[int, dict[str, Any] | None]] = []
    for _ in range(n):
        pid = rng.randrange(positions)
        old = state.get(pid)
        if old is not None and rng.random() < 0.11:  # ~10% of all records once the table fills
            del state[pid]
            events.append((pid, None))
            continue
        exchange = rng.choice(US) if rng.random() < 0.5 else rng.choice(OTHER)
        if old is None or rng.random() < 0.3:
            client = f"c{rng.randrange(clients):05d}"
        else:
            client = old["client"]
        new = {"client": client, "id": pid, "ticker": rng.choice(TICKERS),
               "amount": rng.randint(1, 10_000), "exchange": exchange}
        state[pid] = new
        events.append((pid, new))
    return events, state


def expected_holders(positions: dict[Any, dict[str, Any]]) -> dict[str, frozenset[int]]:
    """us-share-holders recomputed in plain Python from a positions table."""
    out: dict[str, set[int]] = defaultdict(set)
    for p in positions.values():
        if p["exchange"] in US:
            out[p["client"]].add(p["id"])
    return {c: frozenset(ids) for c, ids in out.items()}


def batch_bounds(n: int, batch: int, warmup: int) -> list[tuple[int, int]]:
    """Batch 0 is a small warm-up batch (Python workers, imports); then batches of ``batch``."""
    bounds = []
    lo = 0
    if warmup:
        bounds.append((0, min(warmup, n)))
        lo = min(warmup, n)
    while lo < n:
        bounds.append((lo, min(lo + batch, n)))
        lo += batch
    return bounds


def write_batches(events: list[tuple[int, dict[str, Any] | None]], bounds: list[tuple[int, int]],
                  partitions: int, directory: str) -> list[str]:
    """One parquet file per batch, rows as the Kafka source gives them."""
    from streamtable.partitioner import default_partition

    os.makedirs(directory, exist_ok=True)
    offsets: dict[int, int] = defaultdict(int)
    paths = []
    for b, (lo, hi) in enumerate(bounds):
        cols: dict[str, list[Any]] = {f.name: [] for f in SOURCE_SCHEMA}
        for i in range(lo, hi):
            pid, value = events[i]
            key = json.dumps(pid).encode()
            p = default_partition(key, partitions)
            cols["topic"].append(TOPIC)
            cols["partition"].append(p)
            cols["offset"].append(offsets[p])
            cols["timestamp"].append(1_000 + i)
            cols["key"].append(key)
            cols["value"].append(None if value is None else
                                 json.dumps(value, separators=(",", ":")).encode())
            cols["headers"].append(None)
            offsets[p] += 1
        table = pa.Table.from_pydict(cols, schema=SOURCE_SCHEMA)
        path = os.path.join(directory, f"batch-{b:05d}.parquet")
        pq.write_table(table, path)
        # the file source orders files by modification time
        os.utime(path, (1_700_000_000 + b, 1_700_000_000 + b))
        paths.append(path)
    return paths
