"""The peer contenders of the Nexmark bench: each says it supports exactly the queries it
implements, its command runs its own module, and the record-level Python shared by the Python
peers (``contenders/rows.py``) gives the reference's results. The engines themselves run only in
``python -m bench.nexmark --contenders ...`` (their venvs are built on demand)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from bench.nexmark import check
from bench.nexmark.contenders import Run, contenders, rows
from bench.nexmark.contenders.peer import PeerContender
from bench.nexmark.generator import Generator
from bench.nexmark.queries import ORDER
from bench.nexmark.reference import EXPECTED, Events

PEERS = [c for c in contenders().values() if isinstance(c, PeerContender)]
EVENTS = 6000


def run_of(query: str) -> Run:
    return Run(query=query, output=f"nexmark-{query}-out", bootstrap="127.0.0.1:9092",
               run_id=f"t-{query}", state_dir=Path("/state"), status=Path("/status.jsonl"),
               events=10, rate=10_000, seed=42, grace_ms=60_000,
               input_counts={"nexmark-bid": 9})


@pytest.mark.parametrize("peer", PEERS, ids=lambda c: c.name)
def test_a_peer_supports_the_queries_its_module_implements(peer: PeerContender,
                                                           monkeypatch) -> None:
    module = importlib.import_module(peer.module)
    assert module.CONTENDER is peer
    assert peer.queries == frozenset(module.QUERIES)
    assert peer.queries <= set(ORDER), peer.queries - set(ORDER)
    assert not peer.supports("q10")
    monkeypatch.setattr(PeerContender, "python", lambda self: "/venv/bin/python")
    for q in sorted(peer.queries):
        cmd, env = peer.command(run_of(q))
        assert cmd[:3] == ["/venv/bin/python", "-m", peer.module]
        assert cmd[cmd.index("--query") + 1] == q
        assert cmd[cmd.index("--input-counts") + 1] == '{"nexmark-bid":9}'
        assert env["PYTHONPATH"]


def test_every_spark_query_reads_views_it_defines() -> None:
    from bench.nexmark.contenders import spark_sql

    for q, (views, mode, sql) in spark_sql.QUERIES.items():
        assert set(views) <= set(spark_sql.VIEWS), q
        assert mode in ("append", "update", "complete"), q
        assert " AS k" in sql and " AS v" in sql, q


@pytest.fixture(scope="module")
def source() -> Events:
    gen = Generator(42)
    return Events(generator=gen, count=EVENTS)


def records(query: str, source: Events) -> list[tuple[bytes, bytes]]:
    """What a Python peer writes for ``query``: the rows.py functions over the bids, keyed as
    the engines key them."""
    from bench.nexmark.contenders.peer import encode

    out = []
    if query in rows.STATELESS:
        for b in source.each_bid():
            kv = rows.STATELESS[query](b)
            if kv is not None:
                out.append(kv)
    elif query == "q7":
        state: dict = {}
        for b in source.each_bid():
            for cand in rows.q7_candidates(b):
                state[cand[0]], kv = rows.q7_fold(state.get(cand[0]), cand)
                if kv is not None:
                    out.append(kv)
    elif query == "q5":
        counts: dict = {}
        hot: dict = {}
        for b in source.each_bid():
            for wa in rows.q5_windows(b):
                counts[wa], c = rows.q5_count(counts.get(wa), wa)
                hot[wa[0]], kv = rows.q5_hot(hot.get(wa[0]), c)
                if kv is not None:
                    out.append(kv)
    elif query in ("q15", "q16"):
        reports: dict = {}
        fold = rows.report_fold(query)
        for b in source.each_bid():
            group = str(rows.report_group(query, b)[0])
            reports[group], kv = fold(reports.get(group), b)
            out.append(kv)
    elif query == "q11":
        # the bids of the two partitions interleaved as one consumer reads them: out of order
        bids = sorted(source.each_bid(), key=lambda b: (b["dateTime"] // 700, b["auction"] % 2))
        sessions: dict = {}
        for b in bids:
            sessions[b["bidder"]], kvs = rows.q11_fold(sessions.get(b["bidder"]), b)
            out.extend(kvs)
    elif query in ("q3", "q4", "q8", "q9", "q20"):
        # both topics in event-time order: some bids and auctions come before what they name
        fold, left, right = {
            "q3": (rows.q3_join, ("auction", lambda a: a["seller"], lambda a: a["category"] == 10),
                   ("person", lambda p: p["id"], lambda p: p["state"] in ("OR", "ID", "CA"))),
            "q8": (rows.q8_join, ("person", lambda p: (p["id"], p["dateTime"] // 10_000),
                                  lambda p: True),
                   ("auction", lambda a: (a["seller"], a["dateTime"] // 10_000),
                    lambda a: True)),
            "q4": (rows.q4_winners, ("auction", lambda a: a["id"], lambda a: True),
                   ("bid", lambda b: b["auction"], lambda b: True)),
            "q9": (rows.q9_join, ("auction", lambda a: a["id"], lambda a: True),
                   ("bid", lambda b: b["auction"], lambda b: True)),
            "q20": (rows.q20_join, ("auction", lambda a: a["id"], lambda a: True),
                    ("bid", lambda b: b["auction"], lambda b: True))}[query]
        items = [(r["dateTime"], kind, r) for kind, key, where in (left, right)
                 for r in getattr(source, f"each_{kind}")() if where(r)]
        keys = {left[0]: left[1], right[0]: right[1]}
        states: dict = {}
        for _, kind, r in sorted(items, key=lambda t: t[0]):
            k = keys[kind](r)
            states[k], kvs = fold(states.get(k), (kind, r))
            out.extend(kvs)
        if query == "q4":
            averages: dict = {}
            changes, out = out, []
            for change in changes:
                averages[change[0]], kv = rows.q4_average(averages.get(change[0]), change)
                out.append(kv)
    else:
        fold, key = {"q17": (rows.q17_fold, lambda b: (b["auction"], b["dateTime"] // 86_400_000)),
                     "q18": (rows.q18_fold, lambda b: (b["bidder"], b["auction"])),
                     "q19": (rows.q19_fold, lambda b: b["auction"])}[query]
        states: dict = {}
        for b in source.each_bid():
            states[key(b)], kv = fold(states.get(key(b)), b)
            if kv is not None:
                out.append(kv)
    return [(encode(k), None if v is None else encode(v)) for k, v in out]


@pytest.mark.parametrize("query", [*rows.STATELESS, "q3", "q4", "q5", "q7", "q8", "q9", "q11",
                                   "q15", "q16", "q17", "q18", "q19", "q20"])
def test_the_python_peers_record_logic_gives_the_reference(query: str, source: Events) -> None:
    from bench.nexmark.queries import QUERIES

    expected = list(EXPECTED[query](source))
    assert expected
    assert check.verdict(QUERIES[query].kind, expected, records(query, source)) is None


def test_a_bid_bridging_two_sessions_merges_them_and_deletes_the_later_key() -> None:
    state, out = None, []
    for ts in (0, 15_000, 9_999, 25_000):
        state, changes = rows.q11_fold(state, {"bidder": 7, "dateTime": ts})
        out.extend(changes)
    assert out[-3:] == [([7, 15_000], None),
                        ([7, 0], {"bidder": 7, "bid_count": 3, "starttime": 0,
                                  "endtime": 25_000}),
                        ([7, 25_000], {"bidder": 7, "bid_count": 1, "starttime": 25_000,
                                       "endtime": 35_000})]
    assert state == [[0, 15_000, 3], [25_000, 25_000, 1]]
