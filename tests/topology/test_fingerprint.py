"""The shape kept with the state, and what changed in it (see test_evolution.py for what an
upgrade keeps)."""

from __future__ import annotations

import json

from streamtable import StreamsBuilder
from streamtable.topology.fingerprint import fingerprint_diff, topology_fingerprint


def word_count(store: str = "counts", extra_filter: bool = False, factor: int = 1):
    b = StreamsBuilder()
    words = b.stream("lines").flat_map_values(lambda line: line.split() * factor)
    if extra_filter:
        words = words.filter(lambda k, w: len(w) > 1)
    words.group_by(lambda k, w: w).count(materialized=store).to_stream().to("counts-out")
    return b.build()


def test_the_same_topology_built_again_has_the_same_fingerprint():
    # lambdas differ in body but not in shape: no change
    assert fingerprint_diff(topology_fingerprint(word_count()),
                            topology_fingerprint(word_count(factor=2))) == []
    # and the fingerprint survives JSON
    fp = topology_fingerprint(word_count())
    assert fingerprint_diff(json.loads(json.dumps(fp)), fp) == []


def test_a_renamed_store_is_named():
    diff = fingerprint_diff(topology_fingerprint(word_count()),
                            topology_fingerprint(word_count(store="totals")))
    assert "store 'counts' (key-value) removed" in diff
    assert "store 'totals' (key-value) added" in diff


def test_an_added_operator_is_named():
    diff = fingerprint_diff(topology_fingerprint(word_count()),
                            topology_fingerprint(word_count(extra_filter=True)))
    assert any("KSTREAM-FILTER" in d and d.endswith("added") for d in diff), diff
