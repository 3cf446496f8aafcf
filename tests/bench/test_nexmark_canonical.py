"""The checker's canonical JSON: its fast path (orjson, no rounding walk) gives the text of the
plain definition, ``json.dumps`` of the rounded value with sorted keys, on Nexmark's values and
on the corners where orjson and ``json`` differ."""

from __future__ import annotations

import doctest
import json
import random
from collections import OrderedDict

import bench.nexmark.canonical
import bench.nexmark.check
import bench.nexmark.reference
import pytest
from bench.nexmark.canonical import _normal, _read, canonical, canonical_json, decode
from bench.nexmark.generator import Generator


def plain(obj):
    """The definition: what the checker compared before the fast path."""
    return json.dumps(_normal(obj), sort_keys=True, separators=(",", ":"))


CORNERS: list[object] = [
    0, -1, 2**63 - 1, -(2**63), 2**64, -(2**64) - 1, 10**30, True, False, None, "", "x",
    1.0, -0.0, 0.90800000001, 1e-7, 1e20, 123456.78949, [1, 2.5], (3, (4, 5)),
    {"b": 1, "a": [2, {"d": None, "c": "e"}]}, {"z": 1.5, "y": (1.0, "s")},
    "caf\u00e9", "del\x7f", "tab\t nl\n quote\" back\\ ctrl\x01", {"\u00e9": 1, "e": 2},
    {1: "int key", 2: "b"}, {"a": OrderedDict(b=1)}, [[[]], {}], {"k": [True, 1, None]},
]


@pytest.mark.parametrize("obj", CORNERS, ids=repr)
def test_canonical_is_the_plain_definition(obj):
    assert canonical(obj) == plain(obj)


@pytest.mark.parametrize("obj", [o for o in CORNERS if not isinstance(o, dict)
                                 or all(isinstance(k, str) for k in o)], ids=repr)
def test_a_texts_canonical_form_is_the_plain_definition_of_json_loads(obj):
    for text in (json.dumps(obj), json.dumps(obj, ensure_ascii=False, indent=1)):
        data = text.encode()
        assert canonical_json(data) == plain(json.loads(data))
        assert _normal(json.loads(data)) == decode(data)


def test_what_orjson_refuses_is_read_as_json_reads_it():
    with pytest.raises(ValueError):
        canonical_json(b"[NaN]")
    assert canonical_json(b'\xef\xbb\xbf{"a": 1}') == '{"a":1}'  # a UTF-8 BOM
    assert canonical_json(b"18446744073709551616") == "18446744073709551616"


def rounded_floats():
    """Non-integral floats rounded to 3 decimals, of every magnitude a rounded one has."""
    rng = random.Random(7)
    out = [0.001, -0.001, 0.999, 2.0**52 - 0.5, -(2.0**51) - 0.25, 123456789012.345]
    for digits in range(1, 20):
        for _ in range(2_000):
            x = round(rng.uniform(-1, 1) * 10.0 ** rng.uniform(-3, digits), 3)
            if x != int(x):
                out.append(x)
    return out


def test_a_rounded_float_is_written_as_python_writes_it():
    values = rounded_floats()
    assert canonical(values) == plain(values)
    assert canonical({"price": values[:100], "n": 3}) == plain({"price": values[:100], "n": 3})


def test_a_float_text_is_read_as_python_reads_it():
    rng = random.Random(8)
    texts = [f"{rng.uniform(-1, 1) * 10.0 ** rng.uniform(-8, 18):.{rng.randint(1, 20)}f}"
             for _ in range(10_000)]
    texts += [f"{rng.random():.{rng.randint(1, 17)}f}e{rng.randint(-30, 30)}" for _ in range(5_000)]
    for text in texts:
        data = text.encode()
        assert canonical_json(data) == plain(json.loads(data)), text
        assert _read(data)[1] == (abs(float(text)) < 2**63)  # orjson's, but for the large


def test_the_generated_events_are_written_the_plain_way():
    batch = Generator(3, rate=500).batch(0, 2_000)
    for row in [*batch.persons, *batch.auctions, *batch.bids]:
        assert canonical(row) == plain(row)
        assert canonical_json(json.dumps(row).encode()) == plain(row)


def test_the_examples_in_the_checkers_docstrings_hold():
    for module in (bench.nexmark.canonical, bench.nexmark.check, bench.nexmark.reference):
        failed, tried = doctest.testmod(module)
        assert tried > 0 and failed == 0, module.__name__
