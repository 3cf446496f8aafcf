"""The operator suite's input: seeded records with their partition and event time.

Every family's input topics have :data:`PARTITIONS` partitions. Keys are JSON strings
(``"k000042"``, the default serde) placed by Kafka's default partitioner, so the broker, the
Spark runtime and the test driver agree on where each record is. Event time starts on a whole
hour and advances 1 ms per record, with up to :data:`JITTER_MS` of jitter either way, so
records are slightly out of order, but never by as much as a grace period of the suite
(:meth:`Input.max_disorder` tells).

>>> keys = Keys(10)
>>> sorted(len(p) for p in keys.by_partition)
[4, 6]
>>> keys.encoded[0], keys.partition[0] in (0, 1)
(b'"k000000"', True)
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count
from typing import Any, NamedTuple

from streamtable.partitioner import default_partition

PARTITIONS = 2
JITTER_MS = 500
HOUR_MS = 3_600_000
#: keys of end-of-input markers start with this (no generated key does)
END_PREFIX = "~end"


def key_count(records: int) -> int:
    """Distinct keys of a family with ``records`` input records: a tenth of the records,
    within 1,000 and 100,000 (100,000 from a million records up).

    >>> key_count(20_000), key_count(1_000_000), key_count(10_000_000)
    (2000, 100000, 100000)
    """
    return max(1_000, min(100_000, records // 10))


def encode(obj: Any) -> bytes:
    """JSON as streamtable's default serde writes it."""
    return json.dumps(obj, separators=(",", ":")).encode()


def time_base(records: int) -> int:
    """A whole hour far enough back that the input's last event time, and an end marker an
    hour later, are still in the past (the broker keeps records for a week)."""
    now = int(time.time() * 1000)
    return (now - records - 3 * HOUR_MS) // HOUR_MS * HOUR_MS


class InRecord(NamedTuple):
    key: bytes | None
    value: bytes | None
    timestamp: int
    partition: int


class Keys:
    """``count`` keys named ``<prefix>000000``..., with their partition."""

    def __init__(self, count: int, prefix: str = "k") -> None:
        self.names = [f"{prefix}{j:06d}" for j in range(count)]
        self.encoded = [encode(n) for n in self.names]
        self.partition = [default_partition(b, PARTITIONS) for b in self.encoded]
        self.by_partition: list[list[int]] = [[] for _ in range(PARTITIONS)]
        for j, p in enumerate(self.partition):
            self.by_partition[p].append(j)


def end_key(role: str, partition: int) -> tuple[str, bytes]:
    """A key of its own that Kafka's default partitioner puts on ``partition``."""
    for n in count():
        name = f"{END_PREFIX}-{role}-{n}"
        raw = encode(name)
        if default_partition(raw, PARTITIONS) == partition:
            return name, raw
    raise AssertionError("unreachable")


@dataclass
class Input:
    """A family's input: per topic role, its records in the order they are produced."""

    topics: dict[str, list[InRecord]] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    #: the expected result, for a family whose generator computes it on the way
    expected: Any = None

    @property
    def records(self) -> int:
        return sum(len(r) for r in self.topics.values())

    def add(self, role: str, key: bytes | None, value: bytes | None, timestamp: int,
            partition: int | None = None) -> None:
        if partition is None:
            assert key is not None
            partition = default_partition(key, PARTITIONS)
        self.topics.setdefault(role, []).append(InRecord(key, value, timestamp, partition))

    def end_markers(self, roles: list[str], after: int) -> None:
        """One record per partition of each role, an hour after ``after``, with a key no other
        record has: it takes every task's stream time past every window and grace period, so
        what waits for a window to close (suppressed results, unmatched outer-join records)
        is emitted in every run, however the input was cut into batches."""
        for role in roles:
            for p in range(PARTITIONS):
                name, raw = end_key(role, p)
                self.add(role, raw, encode({"end": name}), after + HOUR_MS, p)

    def decoded(self, role: str) -> Iterator[tuple[Any, Any, int, int]]:
        """``(key, value, timestamp, partition)`` of the role's records, end markers left out."""
        for r in self.topics.get(role, []):
            key = None if r.key is None else json.loads(r.key)
            if isinstance(key, str) and key.startswith(END_PREFIX):
                continue
            yield key, (None if r.value is None else json.loads(r.value)), r.timestamp, \
                r.partition

    def max_disorder(self) -> int:
        """The largest amount by which a record's timestamp is behind an earlier record's of
        the same partition (how late a record can be for its task's stream time)."""
        worst = 0
        for records in self.topics.values():
            seen = [-(2**63)] * PARTITIONS
            for r in records:
                p = r.partition
                if r.timestamp < seen[p]:
                    worst = max(worst, seen[p] - r.timestamp)
                else:
                    seen[p] = r.timestamp
        return worst


class Clock:
    """Event times: ``base + i`` for the i-th event, jittered by up to :data:`JITTER_MS`."""

    def __init__(self, base: int, rng: random.Random) -> None:
        self.base = base
        self.rng = rng

    def at(self, i: int) -> int:
        return self.base + i + self.rng.randint(-JITTER_MS, JITTER_MS)
