"""Compare what a contender wrote to a query's output topic with the reference
(``reference.py``): ``append`` outputs as multisets of records, ``table`` outputs as their final
tables (last value per key, a tombstone deleting the key). A mismatch is a short diff.

>>> verdict("append", [(1, {"p": 1.0}), (1, {"p": 2})], [(b"1", b'{"p":2}'), (b"1", b'{"p":1}')])
>>> print(verdict("table", [(1, 5)], [(b"1", b"4"), (b"2", b"7"), (b"2", None)]))
1 of 1 keys differ; key 1: expected 5, got 4
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from bench.nexmark.reference import canonical

Raw = tuple[bytes | None, bytes | None]
#: examples a diff shows of each kind of difference
SHOWN = 3


def _decode(data: bytes | None) -> Any:
    return None if data is None else json.loads(data)


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def verdict(kind: str, expected: Iterable[tuple[Any, Any]], actual: Iterable[Raw]
            ) -> str | None:
    """None when the output matches, else what differs (a few examples)."""
    if kind == "append":
        return _append(expected, actual)
    return _table(expected, actual)


def _append(expected: Iterable[tuple[Any, Any]], actual: Iterable[Raw]) -> str | None:
    want: Counter[str] = Counter(canonical([k, v]) for k, v in expected)
    got: Counter[str] = Counter(canonical([_decode(k), _decode(v)]) for k, v in actual)
    if want == got:
        return None
    missing, extra = want - got, got - want
    parts = [f"{sum(want.values()):,} records expected, {sum(got.values()):,} written; "
             f"{sum(missing.values()):,} missing, {sum(extra.values()):,} unexpected"]
    for label, diff in (("missing", missing), ("unexpected", extra)):
        for rec, n in list(diff.items())[:SHOWN]:
            parts.append(f"{label}{f' ({n}x)' if n > 1 else ''}: {_short(rec)}")
    return "; ".join(parts)


def _table(expected: Iterable[tuple[Any, Any]], actual: Iterable[Raw]) -> str | None:
    got: dict[str, tuple[str, Any]] = {}
    for k, v in actual:
        key = canonical(_decode(k))
        if v is None:
            got.pop(key, None)
        else:
            value = _decode(v)
            got[key] = (canonical(value), value)
    wrong: list[str] = []
    missing: list[str] = []
    n = 0
    for k, want in expected:
        n += 1
        key = canonical(k)
        have = got.pop(key, None)
        if have is None:
            missing.append(key)
            continue
        ok = want.accepts(*have) if hasattr(want, "accepts") else have[0] == canonical(want)
        if not ok:
            shown = str(want) if hasattr(want, "accepts") else canonical(want)
            wrong.append(f"key {key}: expected {_short(shown)}, got {_short(have[0])}")
    if not (wrong or missing or got):
        return None
    parts = [f"{len(wrong) + len(missing)} of {n:,} keys differ"
             + (f", {len(got):,} unexpected keys" if got else "")]
    parts += wrong[:SHOWN]
    if missing:
        parts.append(f"missing keys ({len(missing):,}): {', '.join(missing[:SHOWN])}")
    if got:
        parts.append("unexpected: " + ", ".join(f"{k} -> {_short(v[0], 100)}"
                                                for k, v in list(got.items())[:SHOWN]))
    return "; ".join(parts) if len(parts) > 1 else parts[0]
