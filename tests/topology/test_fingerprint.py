"""A restart with a changed topology is refused, naming what changed."""

from __future__ import annotations

import json

import pytest

from streamtable import StreamsBuilder
from streamtable.topology.fingerprint import (
    TopologyChangedError,
    check_topology_unchanged,
    fingerprint_diff,
    topology_fingerprint,
)


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


def test_check_writes_then_compares(tmp_path):
    path = tmp_path / "ckpt" / "topology.json"
    check_topology_unchanged(path, word_count(), "wc")  # first start: written
    assert path.exists()
    check_topology_unchanged(path, word_count(), "wc")  # same: fine
    with pytest.raises(TopologyChangedError) as info:
        check_topology_unchanged(path, word_count(store="totals"), "wc")
    message = str(info.value)
    assert "store 'counts' (key-value) removed" in message and "streamtable reset" in message
    assert "wc" in message
    path.unlink()  # what `streamtable reset` does (it removes the state directory)
    check_topology_unchanged(path, word_count(store="totals"), "wc")


def test_state_routed_with_the_old_internal_key_format_is_refused(tmp_path):
    """Internal topics' keys decide a record's task: state written when equal keys could be
    written as different bytes must be rebuilt, not read as if routed the current way."""
    b = StreamsBuilder()
    b.stream("in").group_by(lambda k, v: v).count()
    topology = b.build()
    old = topology_fingerprint(topology)
    del old["internal_keys"]
    path = tmp_path / "topology.json"
    path.write_text(json.dumps(old))
    with pytest.raises(TopologyChangedError, match="keys of internal topics"):
        check_topology_unchanged(path, topology, "app")
    plain = StreamsBuilder()
    plain.stream("in").to("out")  # no internal topic: nothing routed by key bytes
    assert "internal_keys" not in topology_fingerprint(plain.build())
