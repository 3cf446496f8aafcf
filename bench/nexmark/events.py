"""The Nexmark events in Kafka: one topic per event type, JSON values, keyed for co-partitioning.

========================  ===========  ===========================================
topic                     key (JSON)   value (JSON object)
========================  ===========  ===========================================
``nexmark-person``        ``id``       id, name, emailAddress, creditCard, city,
                                       state, dateTime, extra
``nexmark-auction``       ``id``       id, itemName, description, initialBid,
                                       reserve, dateTime, expires, seller,
                                       category, extra
``nexmark-bid``           ``auction``  auction, bidder, price, channel, url,
                                       dateTime, extra
``nexmark-side-input``    ``key``      the string ``str(key)`` (q13's side input)
========================  ===========  ===========================================

Each topic has :data:`PARTITIONS` partitions; times (``dateTime``, ``expires``) are epoch
milliseconds, and every record's Kafka timestamp is its ``dateTime`` (event time), so windowed
queries need no timestamp extractor.

Why these keys: a person and the auctions naming it, or an auction and its bids, are in the same
partition number of their topics only if the records are keyed by the id they join on. Keying
auctions by ``id`` and bids by ``auction`` (JSON numbers, the bytes streamtable's default JSON
serde writes, placed by Kafka's default murmur2 partitioner) makes the auction-bid joins (q4,
q9, q20) co-partitioned as they come, with no repartition; a query that joins on another field
(q3 and q8 on the seller) repartitions, as it would in any Kafka-based engine.

>>> encode({"id": 1000, "name": "Kate Smith"})
b'{"id":1000,"name":"Kate Smith"}'
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from typing import Any

from bench.nexmark.generator import Batch, Generator

log = logging.getLogger("bench.nexmark")

PARTITIONS = 2
PERSON_TOPIC = "nexmark-person"
AUCTION_TOPIC = "nexmark-auction"
BID_TOPIC = "nexmark-bid"
SIDE_INPUT_TOPIC = "nexmark-side-input"
#: event type -> (topic, the field that is the record's key)
TOPICS = {"person": (PERSON_TOPIC, "id"), "auction": (AUCTION_TOPIC, "id"),
          "bid": (BID_TOPIC, "auction")}
#: the generated events are years old (a fixed base time): a broker must keep them anyway
TOPIC_CONFIG = {"retention.ms": "-1"}


def encode(obj: Any) -> bytes:
    """Compact JSON, as streamtable's default serde writes it."""
    return json.dumps(obj, separators=(",", ":")).encode()


def output_topic(query: str) -> str:
    """``nexmark-q5-out`` for ``q5``."""
    return f"nexmark-{query}-out"


def create_input_topics(bootstrap: str) -> None:
    from bench.harness import create_topics

    names = [t for t, _ in TOPICS.values()] + [SIDE_INPUT_TOPIC]
    create_topics(bootstrap, dict.fromkeys(names, PARTITIONS), TOPIC_CONFIG)


def _person(r: dict[str, Any]) -> bytes:
    return (f'{{"id":{r["id"]},"name":"{r["name"]}","emailAddress":"{r["emailAddress"]}",'
            f'"creditCard":"{r["creditCard"]}","city":"{r["city"]}","state":"{r["state"]}",'
            f'"dateTime":{r["dateTime"]},"extra":"{r["extra"]}"}}').encode()


def _auction(r: dict[str, Any]) -> bytes:
    return (f'{{"id":{r["id"]},"itemName":"{r["itemName"]}",'
            f'"description":"{r["description"]}","initialBid":{r["initialBid"]},'
            f'"reserve":{r["reserve"]},"dateTime":{r["dateTime"]},"expires":{r["expires"]},'
            f'"seller":{r["seller"]},"category":{r["category"]},'
            f'"extra":"{r["extra"]}"}}').encode()


def _bid(r: dict[str, Any]) -> bytes:
    return (f'{{"auction":{r["auction"]},"bidder":{r["bidder"]},"price":{r["price"]},'
            f'"channel":"{r["channel"]}","url":"{r["url"]}","dateTime":{r["dateTime"]},'
            f'"extra":"{r["extra"]}"}}').encode()


#: what :func:`encode` writes, spelled out: the generator's strings need no JSON escaping
#: (letters, digits, spaces and URL punctuation), and a format string is ~3x faster
_ENCODERS = {"id": {"emailAddress": _person, "itemName": _auction}, "auction": {"url": _bid}}


def _encoder(rows: list[dict[str, Any]], key_field: str) -> Any:
    for marker, fn in _ENCODERS[key_field].items():
        if marker in rows[0]:
            return fn
    return encode


def _records(rows: list[dict[str, Any]], key_field: str) -> tuple[list[tuple[bytes, bytes]],
                                                                   list[int]]:
    """``([(key, value)], [timestamp])`` of ``rows``, keyed by ``key_field``."""
    if not rows:
        return [], []
    value = _encoder(rows, key_field)
    return ([(str(r[key_field]).encode(), value(r)) for r in rows],
            [r["dateTime"] for r in rows])


def produce(bootstrap: str, batches: Iterable[Batch]) -> dict[str, int]:
    """Write the events to their topics (creating them first); returns records per type."""
    from bench.harness import load_topic

    create_input_topics(bootstrap)
    counts = dict.fromkeys(TOPICS, 0)
    for batch in batches:
        for kind, (topic, key_field) in TOPICS.items():
            rows = getattr(batch, f"{kind}s")
            records, stamps = _records(rows, key_field)
            if records:
                load_topic(bootstrap, topic, records, PARTITIONS, timestamps=stamps)
            counts[kind] += len(records)
    return counts


def produce_side_input(bootstrap: str, generator: Generator) -> int:
    """q13's side input into :data:`SIDE_INPUT_TOPIC` (timestamp: the first event's time, so
    a table read from it holds every row before the first bid)."""
    from bench.harness import load_topic

    rows = generator.side_input()
    stamp = generator.timestamp(0)
    load_topic(bootstrap, SIDE_INPUT_TOPIC, [(encode(k), encode(v)) for k, v in rows],
               PARTITIONS, timestamps=[stamp] * len(rows))
    return len(rows)


def generate_into(bootstrap: str, generator: Generator, events: int) -> dict[str, Any]:
    """Generate ``events`` events into the topics; what was written and how long it took."""
    t0 = time.time()
    counts = produce(bootstrap, generator.batches(events))
    counts["side-input"] = produce_side_input(bootstrap, generator)
    seconds = time.time() - t0
    log.info("generated %s events into Kafka in %.1fs (%s; %.0f events/s)", f"{events:,}",
             seconds, counts, events / seconds if seconds else 0.0)
    return {"counts": counts, "seconds": round(seconds, 2)}
