from __future__ import annotations

import pytest

from streamtable.serde import DOUBLE, INTEGER, JSON, LONG, PICKLE, STRING, serde_from


def test_kafka_compatible_number_encodings():
    assert INTEGER.serialize("t", 1) == b"\x00\x00\x00\x01"
    assert LONG.serialize("t", -1) == b"\xff" * 8
    assert LONG.deserialize("t", LONG.serialize("t", 2**40)) == 2**40
    assert DOUBLE.deserialize("t", DOUBLE.serialize("t", 1.5)) == 1.5
    with pytest.raises(ValueError, match="expects 8 bytes"):
        LONG.deserialize("t", b"\x00")


def test_tombstones_are_never_encoded():
    for serde in (JSON, STRING, INTEGER, LONG, PICKLE):
        assert serde.serialize("t", None) is None
        assert serde.deserialize("t", None) is None


def test_json_writes_sets_as_sorted_lists_and_pickle_keeps_them():
    assert JSON.serialize("t", {"ids": {3, 1}}) == b'{"ids":[1,3]}'
    assert PICKLE.deserialize("t", PICKLE.serialize("t", {3, 1})) == {1, 3}


def test_serde_by_name():
    assert serde_from("long") is LONG
    assert serde_from(None) is JSON
    with pytest.raises(ValueError, match="unknown serde 'avro'"):
        serde_from("avro")


def test_a_short_json_value_holds_only_its_own_size_in_memory():
    """Encoded keys and values are held (record caches, a batch's outputs): each must cost its
    size, not the capacity of the encoder's buffer."""
    import tracemalloc

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        held = [JSON.serialize("t", f"key-{i}") for i in range(5000)]
        per_value = (tracemalloc.get_traced_memory()[0] - before) / len(held)
    finally:
        tracemalloc.stop()
    assert per_value < 200
