"""The Processor API: deduplication of events with a key-value store and a stream-time
punctuation that forgets old event ids."""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Mapping
from typing import Any

from bench.operators.family import Family, frozen
from bench.operators.inputs import PARTITIONS, Clock, Input, Keys, encode, key_count, time_base
from streamtable.processors.api import Processor, PunctuationType

STORE = "dedup-seen"
TTL_MS = 60_000
SWEEP_MS = 10_000
DUPLICATES = 0.2
RECENT = 1_000  # a duplicate repeats one of its partition's last this many events


class Dedup(Processor):
    """Forwards an event the first time its id (``value["eid"]``) is seen in the task; the
    store keeps each id with its timestamp, and every 10 s of stream time the ids older than
    a minute are forgotten."""

    def init(self, context: Any) -> None:
        self.context = context
        self.seen = context.get_state_store(STORE)
        context.schedule(SWEEP_MS, PunctuationType.STREAM_TIME, self.sweep)

    def process(self, record: Any) -> None:
        eid = record.value["eid"]
        if self.seen.get(eid) is None:
            self.seen.put(eid, record.timestamp)
            self.context.forward(record)

    def sweep(self, now: int) -> None:
        old = [eid for eid, ts in self.seen.all() if ts < now - TTL_MS]
        for eid in old:
            self.seen.delete(eid)


class Deduplication(Family):
    """Processor-API deduplication: ``stream.process(Dedup, "dedup-seen")`` with a
    persistent key-value store of the event ids seen (see :class:`Dedup`). Records are
    ``device -> {"eid": ..., "n": i}``; one in five repeats (same device, same event id, new
    ``n``) one of the last thousand events of its partition, at most ~2 s earlier.

    Check (every emitted record): each event id is forwarded exactly once, with the value of
    its first occurrence (its ``n``); a duplicate comes long before its id is forgotten, so
    which records pass depends only on the order of each partition, not on batches.
    """

    name = "dedup"
    title = "Processor-API dedup (key-value store, stream-time punctuation)"
    check = "multiset = the first occurrence of each event id, once"
    kind = "multiset"

    def topology(self, topics: Mapping[str, str], output: str) -> Any:
        from streamtable import Stores, StreamsBuilder

        b = StreamsBuilder()
        b.add_state_store(Stores.key_value_store_builder(Stores.persistent_key_value_store(STORE)))
        b.stream(topics["in"]).process(Dedup, STORE).to(output)
        return b.build()

    def generate(self, records: int, seed: int) -> Input:
        rng = random.Random(seed)
        keys = Keys(key_count(records), prefix="d")
        clock = Clock(time_base(records), rng)
        recent: list[deque[tuple[int, str]]] = [deque(maxlen=RECENT) for _ in range(PARTITIONS)]
        inp = Input(stats={"keys": len(keys.names)})
        repeats = 0
        for i in range(records):
            p = i % PARTITIONS
            if recent[p] and rng.random() < DUPLICATES:
                j, eid = rng.choice(recent[p])
                repeats += 1
            else:
                j, eid = rng.choice(keys.by_partition[p]), f"e{i}"
                recent[p].append((j, eid))
            inp.add("in", keys.encoded[j], encode({"eid": eid, "n": i}), clock.at(i), p)
        inp.stats["duplicates"] = repeats
        return inp

    def reference(self, inp: Input) -> dict[Any, Any]:
        seen: set[str] = set()
        out: Counter[Any] = Counter()
        for key, value, _, _ in inp.decoded("in"):
            if value["eid"] not in seen:
                seen.add(value["eid"])
                out[(key, frozen(value))] += 1
        return out
