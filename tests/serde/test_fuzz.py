"""Fuzzed input to every serde, read by a source: a value or a DeserializationError naming the
record, never another exception, never a crash."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamtable import StreamsBuilder, TopologyTestDriver
from streamtable.errors import DeserializationError
from streamtable.serde import serde_from
from streamtable.serde.serdes import INTERNAL

SERDES = ["json", "string", "int", "long", "double", "bytes", "pickle", INTERNAL]


def _nested(depth: int, open_: bytes, close: bytes) -> bytes:
    return open_ * depth + close * depth


HOSTILE = st.one_of(
    st.binary(max_size=64),
    st.binary(min_size=1, max_size=16).map(lambda b: b * 20_000),  # huge
    st.integers(1, 20_000).map(lambda n: _nested(n, b"[", b"]")),  # deep JSON nesting
    st.integers(1, 20_000).map(lambda n: _nested(n, b'{"a":', b"}")),
    st.integers(1, 5000).map(lambda n: b"\x80\x05" + b"]" * n + b"."),  # pickle lists
    st.integers(1, 5000).map(lambda n: b"M" + b"[\x01\x00\x00\x00" * n + b"N"),  # marshal
    st.integers(0, 40).map(lambda n: b"1" * n),  # numbers beyond 64 bits
    st.sampled_from([b"\xff", b"\xc3\x28", b'"\xed\xa0\x80"', b"\xe2\x82", b"NaN",
                     b"Infinity", b"\x00", b"", b"M", b"P", b"\x80"]),  # invalid UTF-8 ...
)


def _driver(serde):
    b = StreamsBuilder()
    b.stream("in", key_serde=serde, value_serde=serde).to("out", key_serde=serde,
                                                          value_serde=serde)
    return TopologyTestDriver(b.build())


@pytest.mark.parametrize("name", SERDES, ids=lambda s: getattr(s, "name", s))
@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(key=HOSTILE, value=HOSTILE)
def test_random_bytes_decode_or_fail_naming_the_record(name, key, value):
    serde = serde_from(name)
    driver = _driver(serde)
    for i, (k, v) in enumerate(((key, None), (None, value))):
        try:
            driver.pipe_raw("in", k, v, 0)
        except DeserializationError as e:
            assert e.topic == "in" and e.offset is not None and e.processor
            assert ("cannot decode key" if i == 0 else "cannot decode value") in str(e)
        # any other exception (a serde's own, a BaseException) escapes and fails the test
