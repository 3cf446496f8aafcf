"""What a Nexmark query is for the runner: its name, how its output topic is read (``append``:
a multiset of records, ``table``: the last value per key), and a function building its
streamtable topology from :class:`Params`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.nexmark.generator import Generator

AUCTION_FIELDS = ("id", "itemName", "description", "initialBid", "reserve", "dateTime",
                  "expires", "seller", "category", "extra")


@dataclass(frozen=True)
class Params:
    """What a topology needs to know about its input beyond the topics.

    ``bid_before_ms``/``bid_after_ms``: how far before or after its auction a bid can be
    (q20's join window); ``grace_ms``: the grace period of every window and join, which must
    cover how far out of event-time order a task can see its records (see the README).

    >>> p = Params.of(Generator(rate=10_000), grace_ms=60_000)
    >>> p.bid_before_ms, p.bid_after_ms
    (26, 176)
    """

    bid_before_ms: int
    bid_after_ms: int
    grace_ms: int

    @classmethod
    def of(cls, generator: Generator, grace_ms: int) -> Params:
        before, after = generator.max_bid_distance_ms()
        return cls(before, after, grace_ms)


@dataclass(frozen=True)
class Query:
    """A query: ``topology(params, output_topic)`` builds it; ``kind`` says how its output is
    read (``append`` or ``table``)."""

    name: str
    title: str
    kind: str
    topology: Callable[[Params, str], Any]
    #: the input topics it reads (the runner creates and fills every input topic anyway)
    inputs: tuple[str, ...] = ()


def euros(price: int) -> float:
    """``0.908 * price``: dollars to euros (a DECIMAL in the SQL; 3 decimals here)."""
    return price * 908 / 1000


def pick(record: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    return {f: record[f] for f in fields}
