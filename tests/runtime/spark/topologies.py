"""Random topologies from the core DSL, and random inputs for them, for differential tests."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from streamtable import (
    BufferConfig,
    JoinWindows,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
)
from streamtable.topology import Topology

INPUT = "in"


@dataclass
class Case:
    topology: Topology
    description: str
    outputs: list[str]
    stores: list[str]
    table_input: bool
    stateless_only: bool
    # a suppression's final results depend on each task's stream time: the test driver (one
    # task for all partitions) and Spark (a task per partition) agree with one partition only
    single_partition: bool = False


def _stream_ops(rng: random.Random, s: Any, desc: list[str]) -> tuple[Any, bool]:
    keyed_by_value = False
    for _ in range(rng.randint(0, 3)):
        op = rng.choice(["filter", "filter_not", "map_values", "select_key", "flat_map_values",
                         "map", "peek"])
        m, r, c = rng.randint(2, 4), rng.randint(0, 1), rng.randint(1, 3)
        if op == "filter":
            s = s.filter(lambda k, v, m=m, r=r: v["n"] % m != r)
        elif op == "filter_not":
            s = s.filter_not(lambda k, v, m=m, r=r: v["n"] % m == r)
        elif op == "map_values":
            s = s.map_values(lambda v, c=c: {"g": v["g"], "n": v["n"] * c})
        elif op == "select_key":
            s = s.select_key(lambda k, v: v["g"])
            keyed_by_value = True
        elif op == "flat_map_values":
            s = s.flat_map_values(lambda v, c=c: [v] * (1 + v["n"] % c))
        elif op == "map":
            s = s.map(lambda k, v, m=m: ((k or 0) % m, {"g": v["g"], "n": v["n"] + 1}))
            keyed_by_value = True
        else:
            s = s.peek(lambda k, v: None)
        desc.append(op)
    return s, keyed_by_value


def _windowed(rng: random.Random, grouped: Any, desc: list[str]) -> tuple[Any, bool]:
    """A windowed count or reduce (tumbling/hopping, sliding or session windows), maybe with
    its final results only; returns the table and whether it suppresses."""
    kind = rng.choice(["time", "sliding", "session"])
    if kind == "time":
        size = rng.choice([4, 6])
        windows: Any = TimeWindows.of(size).advance_by(rng.choice([size, size // 2]))
        windows = windows.with_grace(rng.randint(0, 3))
    elif kind == "sliding":
        windows = SlidingWindows.of_time_difference_and_grace(rng.randint(2, 5),
                                                              rng.randint(0, 3))
    else:
        windows = SessionWindows.of_inactivity_gap(rng.randint(1, 3)).with_grace(
            rng.randint(0, 3))
    windowed = grouped.windowed_by(windows)
    if rng.random() < 0.5:
        t = windowed.count("wagg")
        desc.append(f"{kind}-count")
    else:
        t = windowed.reduce(lambda a, v: {"g": v["g"], "n": a["n"] + v["n"]}, "wagg")
        desc.append(f"{kind}-reduce")
    final = rng.random() < 0.4
    if final:
        t = t.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        desc.append("suppress")
    return t, final


def random_case(seed: int, topics: dict[str, str] | None = None,
                windowed: bool = False, joined: bool = False) -> Case:
    """Random case ``seed``; ``topics`` renames its topics ("in", "out-stream", "out-table");
    ``windowed``: a stream's windowed aggregation (time, sliding or session windows);
    ``joined``: a join (a stream's windowed inner join with itself, or a table's primary-key
    inner, left or outer join with a table derived from it)."""
    names = {"in": INPUT, "out-stream": "out-stream", "out-table": "out-table"}
    names.update(topics or {})
    rng = random.Random(seed)
    b = StreamsBuilder()
    desc: list[str] = []
    outputs: list[str] = []
    stores: list[str] = []
    table_input = rng.random() < 0.5 and not windowed
    if joined:
        return _joined_case(rng, b, names, table_input)
    stateless_only = False
    single_partition = False
    if not table_input:
        s = b.stream(names["in"])
        desc.append("stream")
        s, _ = _stream_ops(rng, s, desc)
        shape = rng.choice(["to", "count", "reduce", "aggregate", "to_table", "windowed"])
        if windowed:
            shape = "windowed"
        desc.append(shape)
        if shape == "to":
            s.to(names["out-stream"])
            outputs.append(names["out-stream"])
            stateless_only = True
        else:
            grouped = (s.group_by(lambda k, v: v["g"]) if rng.random() < 0.5
                       else s.group_by_key())
            if shape == "count":
                t = grouped.count("agg")
            elif shape == "reduce":
                t = grouped.reduce(lambda a, v: {"g": v["g"], "n": a["n"] + v["n"]}, "agg")
            elif shape == "aggregate":
                t = grouped.aggregate(lambda: 0, lambda k, v, a: a + v["n"], "agg")
            elif shape == "windowed":
                t, single_partition = _windowed(rng, grouped, desc)
                # windowed keys leave as "key@start-end" (an output topic's key is plain)
                (t.to_stream()
                 .map(lambda wk, v: (f"{wk.key}@{wk.start}-{wk.end}", v))
                 .to(names["out-table"]))
                outputs.append(names["out-table"])
                return Case(b.build(), "-".join(desc), outputs, stores, table_input,
                            stateless_only, single_partition)
            else:
                t = s.to_table("agg")
            stores.append("agg")
            if rng.random() < 0.5:
                t = t.filter(lambda k, v: (v if isinstance(v, int) else v["n"]) % 2 == 0,
                             materialized="agg-filtered")
                stores.append("agg-filtered")
                desc.append("filter")
            t.to_stream().to(names["out-table"])
            outputs.append(names["out-table"])
    else:
        t = b.table(names["in"], materialized="source")
        stores.append("source")
        desc.append("table")
        for _ in range(rng.randint(0, 2)):
            op = rng.choice(["filter", "filter_not", "map_values"])
            m, c = rng.randint(2, 3), rng.randint(1, 3)
            if op == "filter":
                t = t.filter(lambda k, v, m=m: v["n"] % m != 0)
            elif op == "filter_not":
                t = t.filter_not(lambda k, v, m=m: v["n"] % m == 0)
            else:
                t = t.map_values(lambda v, c=c: {"g": v["g"], "n": v["n"] * c})
            desc.append(op)
        shape = rng.choice(["to_stream", "count", "reduce", "aggregate"])
        desc.append(shape)
        if shape == "to_stream":
            t.to_stream().to(names["out-table"])
        else:
            grouped = t.group_by(lambda k, v: (v["g"], v["n"]))
            if shape == "count":
                agg = grouped.count("agg")
            elif shape == "reduce":
                agg = grouped.reduce(lambda a, v: a + v, lambda a, v: (a - v) or None, "agg")
            else:
                agg = grouped.aggregate(lambda: 0, lambda k, v, a: a + v,
                                        lambda k, v, a: a - v, "agg")
            stores.append("agg")
            agg.to_stream().to(names["out-table"])
        outputs.append(names["out-table"])
    return Case(b.build(), "-".join(desc), outputs, stores, table_input, stateless_only)


def _joined_case(rng: random.Random, b: StreamsBuilder, names: dict[str, str],
                 table_input: bool) -> Case:
    desc: list[str] = []
    if not table_input:
        s = b.stream(names["in"])
        s, _ = _stream_ops(rng, s, ["stream"])
        # an inner join's results do not depend on stream time when timestamps increase, so
        # the driver (one task) and Spark (a task per partition) agree on every record
        windows = JoinWindows.of_time_difference_and_grace(rng.randint(1, 4), rng.randint(0, 2))
        (s.join(s, lambda a, c: {"g": a["g"], "n": a["n"] * 10 + c["n"]}, windows)
         .to(names["out-stream"]))
        return Case(b.build(), "stream-self-join", [names["out-stream"]], [], False, False)
    t = b.table(names["in"], materialized="source")
    c, m = rng.randint(1, 3), rng.randint(2, 3)
    right = t.map_values(lambda v, c=c: {"g": v["g"], "n": v["n"] * c}, materialized="right")
    if rng.random() < 0.5:
        right = right.filter(lambda k, v, m=m: v["n"] % m != 0, materialized="right-filtered")
        desc.append("filter")
    kind = rng.choice(["join", "left_join", "outer_join"])
    joined = getattr(t, kind)(right, lambda a, c: [a and a["n"], c and c["n"]],
                              materialized="joined")
    joined.to_stream().to(names["out-table"])
    return Case(b.build(), "-".join(["table", *desc, kind]), [names["out-table"]],
                ["source", "joined"], True, False)


def random_input(seed: int, case: Case, n: int, keys: int = 12) -> list[tuple[Any, Any]]:
    rng = random.Random(seed * 7919 + 1)
    records = []
    for _ in range(n):
        k = rng.randrange(keys)
        if case.table_input and rng.random() < 0.2:
            records.append((k, None))
        else:
            records.append((k, {"g": rng.randrange(4), "n": rng.randint(1, 9)}))
    return records
