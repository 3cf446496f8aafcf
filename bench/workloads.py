"""The workloads: seeded generators, the reference results computed in plain Python, and the
checkers that compare a contender's output with them.

W1 word count: lines of ~10 words (5..15) from a Zipf-distributed vocabulary, null keys.
W2 share-holders: upserts and deletes (tombstones) of positions keyed by position id; the result
is the set of US (NASDAQ/NYSE) position ids per client, absent when a client has none.
"""

from __future__ import annotations

import itertools
import json
import random
import string
import struct
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

US_EXCHANGES = frozenset(("NASDAQ", "NYSE"))
OTHER_EXCHANGES = ("LSE", "XETRA", "EURONEXT", "TSE", "HKEX")
TICKERS = (
    "AAPL", "MSFT", "GOOG", "AMZN", "NVDA", "META", "TSLA", "IBM", "ORCL", "INTC", "CSCO",
    "ADBE", "KO", "PEP", "JPM", "BAC", "WMT", "DIS", "NFLX", "AMD", "SAP", "SIE", "BP", "HSBC",
    "SONY", "TM", "ASML", "NESN", "SHEL", "ULVR",
)

W1_PROBE_PREFIX = "zzprobe"   # vocabulary words are letters only, probes carry digits
W2_PROBE_PREFIX = "probe"     # clients are c00000.., probes probe0000000..
W2_PROBE_ID_BASE = 10_000_000


Record = tuple[bytes | None, bytes | None]  # (key, value)


@dataclass
class Dataset:
    workload: str
    records: list[Record]
    expected: dict[Any, Any]          # reference result
    stats: dict[str, Any] = field(default_factory=dict)
    probe_at: dict[int, bytes] = field(default_factory=dict)  # record index -> probe output key


# ------------------------------------------------------------------------------------- W1


def vocabulary(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words: set[str] = set()
    out: list[str] = []
    letters = string.ascii_lowercase
    while len(out) < n:
        w = "".join(rng.choice(letters) for _ in range(rng.randint(3, 10)))
        if w not in words:
            words.add(w)
            out.append(w)
    return out


class LineGenerator:
    def __init__(self, seed: int, vocab_size: int = 10_000, zipf_s: float = 1.0) -> None:
        self.rng = random.Random(seed)
        self.vocab = vocabulary(vocab_size, seed=12345)  # same vocabulary for every phase
        weights = [1.0 / (rank ** zipf_s) for rank in range(1, vocab_size + 1)]
        self.cum = list(itertools.accumulate(weights))

    def lines(self, n: int) -> list[list[str]]:
        rng = self.rng
        lengths = [rng.randint(5, 15) for _ in range(n)]
        words = rng.choices(self.vocab, cum_weights=self.cum, k=sum(lengths))
        out = []
        pos = 0
        for ln in lengths:
            out.append(words[pos:pos + ln])
            pos += ln
        return out


def w1_dataset(n: int, seed: int, probe_every: int = 0) -> Dataset:
    gen = LineGenerator(seed)
    lines = gen.lines(n)
    records: list[Record] = []
    probe_at: dict[int, bytes] = {}
    counts: Counter[str] = Counter()
    probe_no = 0
    for i, words in enumerate(lines):
        if probe_every and i % probe_every == 0:
            probe = f"{W1_PROBE_PREFIX}{probe_no:07d}"
            probe_no += 1
            words = words + [probe]
            probe_at[i] = probe.encode()
        counts.update(words)
        records.append((None, " ".join(words).encode()))
    return Dataset("w1", records, dict(counts),
                   {"lines": n, "words": sum(counts.values()), "distinct_words": len(counts)},
                   probe_at)


# ------------------------------------------------------------------------------------- W2


class PositionGenerator:
    """Position upserts/deletes over ``positions`` ids and ``clients`` clients: ~10% deletes (of
    existing positions), and updates that move a position to another client (15%), change its
    exchange (15%, often between US and non-US) or only its amount."""

    def __init__(self, seed: int, positions: int = 100_000, clients: int = 10_000,
                 delete_ratio: float = 0.10) -> None:
        self.rng = random.Random(seed)
        self.n_positions = positions
        self.n_clients = clients
        self.delete_ratio = delete_ratio
        self.state: dict[int, dict[str, Any]] = {}
        self.counts = Counter()

    def _exchange(self) -> str:
        rng = self.rng
        if rng.random() < 0.5:
            return "NASDAQ" if rng.random() < 0.5 else "NYSE"
        return rng.choice(OTHER_EXCHANGES)

    def _client(self) -> str:
        return f"c{self.rng.randrange(self.n_clients):05d}"

    def event(self) -> tuple[int, dict[str, Any] | None]:
        rng = self.rng
        pid = rng.randrange(self.n_positions)
        old = self.state.get(pid)
        if old is not None and rng.random() < self.delete_ratio:
            del self.state[pid]
            self.counts["delete"] += 1
            return pid, None
        if old is None:
            new = {"client": self._client(), "id": pid, "ticker": rng.choice(TICKERS),
                   "amount": rng.randint(1, 10_000), "exchange": self._exchange()}
            self.counts["insert"] += 1
        else:
            new = dict(old)
            r = rng.random()
            if r < 0.15:
                new["client"] = self._client()
                self.counts["move"] += 1
            elif r < 0.30:
                new["exchange"] = self._exchange()
                self.counts["exchange_change"] += 1
            else:
                self.counts["amount_change"] += 1
            new["amount"] = rng.randint(1, 10_000)
        self.state[pid] = new
        return pid, new


def us_holders(positions: dict[int, dict[str, Any]]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for pid, p in positions.items():
        if p["exchange"] in US_EXCHANGES:
            out.setdefault(p["client"], set()).add(pid)
    return {c: frozenset(ids) for c, ids in out.items()}


def _encode_position(pid: int, value: dict[str, Any] | None) -> Record:
    key = str(pid).encode()
    if value is None:
        return key, None
    return key, json.dumps(value, separators=(",", ":")).encode()


def w2_dataset(n: int, seed: int, probe_every: int = 0, positions: int = 100_000,
               clients: int = 10_000) -> Dataset:
    gen = PositionGenerator(seed, positions, clients)
    records: list[Record] = []
    probe_at: dict[int, bytes] = {}
    final = gen.state
    probes: dict[int, dict[str, Any]] = {}
    probe_no = 0
    for i in range(n):
        if probe_every and i % probe_every == 0:
            pid = W2_PROBE_ID_BASE + probe_no
            client = f"{W2_PROBE_PREFIX}{probe_no:07d}"
            probe_no += 1
            value = {"client": client, "id": pid, "ticker": "AAPL", "amount": 1,
                     "exchange": "NASDAQ"}
            probes[pid] = value
            probe_at[i] = client.encode()
            records.append(_encode_position(pid, value))
            continue
        pid, value = gen.event()
        records.append(_encode_position(pid, value))
    expected = us_holders({**final, **probes})
    stats = dict(gen.counts)
    stats.update({"records": n, "final_positions": len(final),
                  "clients_with_us_positions": len(expected),
                  "us_positions": sum(len(v) for v in expected.values())})
    return Dataset("w2", records, expected, stats, probe_at)


def dataset(workload: str, n: int, seed: int, probe_every: int = 0) -> Dataset:
    if workload == "w1":
        return w1_dataset(n, seed, probe_every)
    if workload == "w2":
        return w2_dataset(n, seed, probe_every)
    raise ValueError(workload)


# ------------------------------------------------------------------------------ output keys


def normalize_key(workload: str, key: bytes | None) -> bytes | None:
    """The output key without serde decoration (W2 clients may be JSON strings)."""
    if key is not None and workload == "w2" and key[:1] == b'"':
        return key[1:-1]
    return key


# --------------------------------------------------------------------------------- checkers

_LONG = struct.Struct(">q")


def _decode_count(v: bytes) -> int:
    if len(v) == 8:
        return _LONG.unpack(v)[0]
    return int(json.loads(v))


def _decode_ids(v: bytes) -> frozenset[int]:
    data = json.loads(v)
    if isinstance(data, dict):  # tolerate {"ids": [...]} style payloads
        data = data.get("ids", data.get("positions", []))
    return frozenset(int(x) for x in data)


def decode_output(workload: str, last: dict[bytes, bytes]) -> tuple[dict[Any, Any], list[str]]:
    """Last value per key of an output topic -> result dict (+ undecodable entries)."""
    out: dict[Any, Any] = {}
    bad: list[str] = []
    for k, v in last.items():
        try:
            if workload == "w1":
                out[k.decode()] = _decode_count(v)
            else:
                key = normalize_key(workload, k).decode()  # type: ignore[union-attr]
                ids = _decode_ids(v)
                if ids:
                    out[key] = ids
        except Exception as exc:  # noqa: BLE001 - report, never crash the checker
            bad.append(f"{k!r}={v[:40]!r}: {exc}")
    return out, bad


def compare(expected: dict[Any, Any], actual: dict[Any, Any], limit: int = 5) -> str | None:
    """None when equal, else a short description of the differences."""
    if actual == expected:
        return None
    missing = [k for k in expected if k not in actual]
    extra = [k for k in actual if k not in expected]
    wrong = [k for k in expected if k in actual and actual[k] != expected[k]]

    def show(v: Any) -> str:
        if isinstance(v, frozenset):
            v = sorted(v)
        s = repr(v)
        return s if len(s) < 60 else s[:57] + "..."

    parts = []
    if missing:
        parts.append(f"{len(missing)} keys missing (e.g. {', '.join(map(repr, missing[:limit]))})")
    if extra:
        parts.append(f"{len(extra)} unexpected keys (e.g. "
                     + ", ".join(f"{k!r}={show(actual[k])}" for k in extra[:limit]) + ")")
    if wrong:
        parts.append(f"{len(wrong)} wrong values (e.g. "
                     + ", ".join(f"{k!r}: got {show(actual[k])} want {show(expected[k])}"
                                 for k in wrong[:limit]) + ")")
    return "; ".join(parts)


def make_checker(workload: str,
                 expected: dict[Any, Any]) -> Callable[[dict[bytes, bytes]], str | None]:
    def check(last: dict[bytes, bytes]) -> str | None:
        actual, bad = decode_output(workload, last)
        diff = compare(expected, actual)
        if bad:
            diff = (diff + "; " if diff else "") + f"{len(bad)} undecodable values: {bad[:3]}"
        return diff
    return check


def store_as_result(workload: str, store: dict[Any, Any]) -> dict[Any, Any]:
    """streamtable's store contents -> result dict."""
    if workload == "w1":
        return {str(k): int(v) for k, v in store.items()}
    return {str(k): frozenset(v) for k, v in store.items() if v}


def chunks(seq: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(seq), size):
        yield seq[i:i + size]
