"""The main benchmark's two workloads as operator families, with its generators, topologies,
output decoding and references (``bench/workloads.py``, ``bench/contenders/``)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from bench.operators.family import Family, Raw
from bench.operators.inputs import PARTITIONS, Clock, Input, time_base
from bench.workloads import decode_output, w1_dataset, w2_dataset

ROOT = Path(__file__).resolve().parents[2]


@cache
def _word_count_app() -> Any:
    from streamtable.cli import load_app

    return load_app(str(ROOT / "examples" / "word_count" / "app.py"))


class _Workload(Family):
    """A workload of ``bench/workloads.py``: its dataset, its reference and its decoding."""

    workload = ""

    def dataset(self, records: int, seed: int) -> Any:
        raise NotImplementedError

    def generate(self, records: int, seed: int) -> Input:
        ds = self.dataset(records, seed)
        clock = Clock(time_base(records), random.Random(seed))
        inp = Input(stats=dict(ds.stats), expected=ds.expected)
        for i, (key, value) in enumerate(ds.records):
            # keyed records where Kafka's partitioner puts them, lines round-robin (as the
            # main benchmark loads them)
            inp.add("in", key, value, clock.at(i), None if key is not None else i % PARTITIONS)
        return inp

    def reference(self, inp: Input) -> dict[Any, Any]:
        expected: dict[Any, Any] = inp.expected
        return expected

    def result(self, records: Iterable[Raw]) -> dict[Any, Any]:
        last: dict[Any, bytes] = {}
        for k, v in records:
            if v is None:
                last.pop(k, None)
            else:
                last[k] = v
        out, bad = decode_output(self.workload, last)
        if bad:
            out["<undecodable>"] = tuple(bad[:5])
        return out


class WordCount(_Workload):
    """W1 word count, the topology of ``examples/word_count/app.py`` (``flat_map_values`` →
    ``group_by`` word → ``count``, with a repartition), on the main benchmark's lines of ~10
    Zipf-distributed words over a 10k vocabulary, without keys.

    Check (final table): the last count per word equals the number of times the word occurs
    in the input (the main benchmark's checker).
    """

    name = "w1"
    title = "W1 word count (flat_map → group_by → count)"
    check = "final table = occurrences per word"
    workload = "w1"

    @property
    def settings(self) -> dict[str, Any]:
        return {k: v for k, v in _word_count_app().config.items()
                if k not in ("application.id", "bootstrap.servers")}

    def topology(self, topics: Mapping[str, str], output: str) -> Any:
        return _word_count_app().build_topology(topics["in"], output)

    def dataset(self, records: int, seed: int) -> Any:
        return w1_dataset(records, seed)


class ShareHolders(_Workload):
    """W2 share-holders: ``table`` → ``filter`` (US exchanges) → ``group_by`` client →
    ``reduce`` with adder and subtractor (the main benchmark's topology), on its position
    upserts and deletes over 100,000 positions and 10,000 clients.

    Check (final table): each client's final set of US position ids equals the reference's
    (clients without one absent).
    """

    name = "w2"
    title = "W2 table → group_by → reduce (share-holders)"
    check = "final table = the set of US position ids per client"
    workload = "w2"

    def topology(self, topics: Mapping[str, str], output: str) -> Any:
        from bench.contenders.streamtable_app import w2_topology

        return w2_topology(topics["in"], output)

    def dataset(self, records: int, seed: int) -> Any:
        return w2_dataset(records, seed)
