"""Compare what a contender wrote to a query's output topic with the reference
(``reference.py``): ``append`` outputs as multisets of records, ``table`` outputs as their final
tables (last value per key, a tombstone deleting the key). A mismatch is a short diff.

Both sides are compared in canonical JSON (``canonical.py``). An append output is compared by
a digest of its records (count and sum of hashes) in constant memory, and only when the digests
differ read again for a diff, sampled above :data:`SAMPLE` records; a table output is held as
its final table.

>>> verdict("append", [(1, {"p": 1.0}), (1, {"p": 2})], [(b"1", b'{"p":2}'), (b"1", b'{"p":1}')])
>>> print(verdict("table", [(1, 5)], [(b"1", b"4"), (b"2", b"7"), (b"2", None)]))
1 of 1 keys differ; key 1: expected 5, got 4
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from bench.nexmark.canonical import canonical, canonical_json, decode

Raw = tuple[bytes | None, bytes | None]
#: examples a diff shows of each kind of difference
SHOWN = 3


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


Source = Iterable[Any] | Callable[[], Iterable[Any]]
#: a sampled diff of an append output keeps about this many records of each side
SAMPLE = 200_000
_MASK = (1 << 64) - 1


def _fresh(source: Source) -> Iterable[Any]:
    """The records of ``source``: a callable gives a fresh iterable per call, so a stream
    (the reference replaying the generator, the output topic read again) can be read twice."""
    return source() if callable(source) else source


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused: a check makes millions of small objects that
    reference counting frees (none is in a cycle), and the collector's passes over the ones
    held (a table, the reference's state) took a quarter of q18's check."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def verdict(kind: str, expected: Source, actual: Source) -> str | None:
    """None when the output matches, else what differs (a few examples). ``expected`` yields
    ``(key, value)`` pairs, ``actual`` the topic's ``(key bytes, value bytes)`` records; either
    may be a callable returning them (an append output is read twice when it differs)."""
    with _collector_paused():
        if kind == "append":
            return _append(expected, actual)
        return _table(_fresh(expected), _fresh(actual))


def check_topic(bootstrap: str, topic: str, kind: str, expected: Source,
                timeout: float) -> tuple[str | None, int]:
    """:func:`verdict` on what ``topic`` holds (read with a fresh consumer, again for a diff),
    and how many records it holds."""
    from bench.harness import read_topic

    written = [0]

    def records() -> Iterator[Raw]:
        written[0] = 0
        for m in read_topic(bootstrap, topic, timeout=timeout):
            written[0] += 1
            yield m.key(), m.value()

    diff = verdict(kind, expected, records)
    return diff, written[0]


def _expected_records(expected: Source) -> Iterator[str]:
    return (canonical([k, v]) for k, v in _fresh(expected))


def _written_records(actual: Source) -> Iterator[str]:
    # canonical([key, value]), spelled out: the two texts in a JSON list
    return (f"[{canonical_json(k)},{canonical_json(v)}]" for k, v in _fresh(actual))


def _digest(records: Iterable[str]) -> tuple[int, int]:
    """``(count, sum of hashes mod 2**64)``: equal for equal multisets, and (but for a chance
    of about 2**-64) different for different ones, in constant memory."""
    n = total = 0
    for r in records:
        n += 1
        total = (total + hash(r)) & _MASK
    return n, total


def _sample(records: Iterable[str], every: int) -> Counter[str]:
    return Counter(r for r in records if hash(r) % every == 0)


def _append(expected: Source, actual: Source) -> str | None:
    want_n, want_sum = _digest(_expected_records(expected))
    got_n, got_sum = _digest(_written_records(actual))
    if (want_n, want_sum) == (got_n, got_sum):
        return None
    every = max(1, max(want_n, got_n) // SAMPLE)
    want = _sample(_expected_records(expected), every)
    got = _sample(_written_records(actual), every)
    missing, extra = want - got, got - want
    scope = "" if every == 1 else f" (in a 1/{every} sample of the records)"
    parts = [f"{want_n:,} records expected, {got_n:,} written; {sum(missing.values()):,} "
             f"missing, {sum(extra.values()):,} unexpected{scope}"]
    for label, diff in (("missing", missing), ("unexpected", extra)):
        for rec, n in list(diff.items())[:SHOWN]:
            parts.append(f"{label}{f' ({n}x)' if n > 1 else ''}: {_short(rec)}")
    return "; ".join(parts)


def _table(expected: Iterable[tuple[Any, Any]], actual: Iterable[Raw]) -> str | None:
    got: dict[str, str] = {}
    for k, v in actual:
        key = canonical_json(k)
        if v is None:
            got.pop(key, None)
        else:
            got[key] = canonical_json(v)
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
        if hasattr(want, "accepts"):
            ok, shown = want.accepts(have, decode(have)), str(want)
        else:
            shown = canonical(want)
            ok = have == shown
        if not ok:
            wrong.append(f"key {key}: expected {_short(shown)}, got {_short(have)}")
    if not (wrong or missing or got):
        return None
    parts = [f"{len(wrong) + len(missing):,} of {n:,} keys differ"
             + (f", {len(got):,} unexpected keys" if got else "")]
    parts += wrong[:SHOWN]
    if missing:
        parts.append(f"missing keys ({len(missing):,}): {', '.join(missing[:SHOWN])}")
    if got:
        parts.append("unexpected: " + ", ".join(f"{k} -> {_short(v, 100)}"
                                                for k, v in list(got.items())[:SHOWN]))
    return "; ".join(parts) if len(parts) > 1 else parts[0]
