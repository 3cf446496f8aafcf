"""``Windowed`` keys behave as the plain frozen dataclass they were: equality, hashing,
ordering, immutability, their JSON form, and their pickles (stored state and internal topics
hold them), both ways: state written before reads now, and state written now reads in a
version from before."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import orjson
import pytest

from streamtable import Windowed

# pickle.dumps(Windowed("a", 0, 4), protocol) of the plain frozen dataclass
OLD_PICKLES = {
    0: b"ccopy_reg\n_reconstructor\np0\n(cstreamtable.state.windowed\nWindowed\np1\nc__builtin__"
       b"\nobject\np2\nNtp3\nRp4\n(dp5\nVkey\np6\nVa\np7\nsVstart\np8\nI0\nsVend\np9\nI4\nsb.",
    2: b"\x80\x02cstreamtable.state.windowed\nWindowed\nq\x00)\x81q\x01}q\x02(X\x03\x00\x00\x00"
       b"keyq\x03X\x01\x00\x00\x00aq\x04X\x05\x00\x00\x00startq\x05K\x00X\x03\x00\x00\x00endq"
       b"\x06K\x04ub.",
    5: b"\x80\x05\x95O\x00\x00\x00\x00\x00\x00\x00\x8c\x1astreamtable.state.windowed\x94\x8c"
       b"\x08Windowed\x94\x93\x94)\x81\x94}\x94(\x8c\x03key\x94\x8c\x01a\x94\x8c\x05start\x94K"
       b"\x00\x8c\x03end\x94K\x04ub.",
}


@pytest.mark.parametrize("protocol", sorted(OLD_PICKLES))
def test_pickles_are_those_of_the_dataclass_both_ways(protocol):
    w = Windowed("a", 0, 4)
    assert pickle.dumps(w, protocol=protocol) == OLD_PICKLES[protocol]
    loaded = pickle.loads(OLD_PICKLES[protocol])
    assert loaded == w and hash(loaded) == hash(w) and loaded.key == "a"
    assert {loaded: 1}[w] == 1


def test_equality_hash_and_order_are_the_dataclass_ones():
    w = Windowed(("k", 1), 10, 20)
    assert w == Windowed(("k", 1), 10, 20) and hash(w) == hash((("k", 1), 10, 20))
    assert w != (("k", 1), 10, 20) and w != Windowed(("k", 1), 10, 21)
    assert w != Windowed(("k", 2), 10, 20) and not (w == "k")
    nan = float("nan")
    assert Windowed(nan, 0, 1) == Windowed(nan, 0, 1)  # like the tuples it compared
    assert Windowed(nan, 0, 1) != Windowed(float("nan"), 0, 1)
    assert Windowed(1, 0, 5) == Windowed(1.0, 0, 5) == Windowed(True, 0, 5)
    assert sorted([Windowed("b", 0, 1), Windowed("a", 2, 3), Windowed("a", 1, 9),
                   Windowed("a", 1, 4)]) == [Windowed("a", 1, 4), Windowed("a", 1, 9),
                                             Windowed("a", 2, 3), Windowed("b", 0, 1)]
    with pytest.raises(TypeError):
        _ = Windowed("a", 0, 1) < ("a", 0, 2)
    unhashable = Windowed(["a"], 0, 1)  # built fine; hashing it fails, as it did
    assert repr(unhashable) == "Windowed(key=['a'], start=0, end=1)"
    with pytest.raises(TypeError):
        hash(unhashable)


def test_fields_immutability_and_json():
    w = Windowed("mark", 0, 600_000)
    assert repr(w) == "Windowed(key='mark', start=0, end=600000)"
    assert (w.key, w.start, w.end, w[0], w[-1], w[:2]) == ("mark", 0, 600_000, "mark",
                                                           600_000, ("mark", 0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.start = 1  # type: ignore[misc]
    assert dataclasses.asdict(w) == {"key": "mark", "start": 0, "end": 600_000}
    assert dataclasses.replace(w, end=5) == Windowed("mark", 0, 5)
    assert [f.name for f in dataclasses.fields(Windowed)] == ["key", "start", "end"]
    assert copy.deepcopy(w) == w and copy.copy(w) == w
    assert orjson.dumps(w) == b'{"key":"mark","start":0,"end":600000}'
    assert Windowed(key="k", start=1, end=2) == Windowed("k", 1, 2)
