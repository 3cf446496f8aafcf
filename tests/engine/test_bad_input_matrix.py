"""Each kind of bad input under each handler setting, with caching on and off: ``fail`` stops
with one error naming the record, ``continue`` skips, counts and logs it, a dead-letter topic
receives it with the reason in headers; good records around it are processed as usual.

(Failures at a cache flush are covered in test_errors_at_commit.py.)"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pytest

from streamtable import StreamsBuilder, TopologyTestDriver
from streamtable.errors import DeserializationError, ProcessingError


def _check(v: Any) -> Any:
    if v == 0:
        raise ValueError("zero is not allowed")
    return v


@dataclass
class Case:
    name: str
    topology: Any
    error: type
    reason: str  # in the error's message
    processor: str  # prefix of the failing operator's name
    bad: tuple[bytes | None, bytes | None]  # the raw record to "in"
    expected: list[tuple[Any, Any]]  # "out" after good("a", 5), bad, good("b", 7)
    setup: tuple[tuple[str, bytes, bytes], ...] = ()  # raw records piped before


def _stateless():
    b = StreamsBuilder()
    b.stream("in").map_values(lambda v: 100 // v).to("out")
    return b.build()


def _aggregation():
    b = StreamsBuilder()
    (b.stream("in").group_by_key()
     .aggregate(lambda: 0, lambda k, v, total: total + _check(v), materialized="totals")
     .to_stream().to("out"))
    return b.build()


def _join():
    b = StreamsBuilder()
    table = b.table("tbl")
    b.stream("in").join(table, lambda v, t: _check(v) * t).to("out")
    return b.build()


def _unencodable():
    b = StreamsBuilder()
    b.stream("in").map_values(lambda v: str(v) if v else v).to("out", value_serde="string")
    return b.build()


CASES = [
    Case("undecodable-key", _stateless, DeserializationError, "cannot decode key",
         "KSTREAM-SOURCE", (b"\xff\xfe", b"1"), [("a", 20), ("b", 14)]),
    Case("undecodable-value", _stateless, DeserializationError, "cannot decode value",
         "KSTREAM-SOURCE", (b'"k"', b'{"x": \xff'), [("a", 20), ("b", 14)]),
    Case("stateless", _stateless, ProcessingError, "ZeroDivisionError", "KSTREAM-MAPVALUES",
         (b'"k"', b"0"), [("a", 20), ("b", 14)]),
    Case("aggregation", _aggregation, ProcessingError, "zero is not allowed",
         "KSTREAM-AGGREGATE", (b'"k"', b"0"), [("a", 5), ("b", 7)]),
    Case("join", _join, ProcessingError, "zero is not allowed", "KSTREAM-JOIN",
         (b'"k"', b"0"), [("a", 10), ("b", 14)],
         setup=(("tbl", b'"a"', b"2"), ("tbl", b'"b"', b"2"), ("tbl", b'"k"', b"2"))),
    Case("unencodable-output", _unencodable, ProcessingError, "cannot encode record",
         "KSTREAM-SINK", (b'"k"', b"0"), [("a", "5"), ("b", "7")]),
]
CACHING = {"on": 10_000_000, "off": 0}


def _run(case: Case, settings: dict[str, Any]) -> tuple[TopologyTestDriver, Exception | None]:
    driver = TopologyTestDriver(case.topology(), settings)
    for topic, k, v in case.setup:
        driver.pipe_raw(topic, k, v, 0)
    driver.pipe_raw("in", b'"a"', b"5", 1)
    error = None
    try:
        driver.pipe_raw("in", *case.bad, 2)
    except Exception as e:  # noqa: BLE001 - the test looks at which one
        error = e
    else:
        driver.pipe_raw("in", b'"b"', b"7", 3)
    return driver, error


def _out(driver: TopologyTestDriver, case: Case) -> list[tuple[Any, Any]]:
    return driver.create_output_topic(
        "out", value_serde="string" if case.name == "unencodable-output" else None
    ).read_key_values()


@pytest.mark.parametrize("cache", list(CACHING))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fail_stops_with_one_error_naming_the_record(case, cache):
    driver, error = _run(case, {"cache.max.bytes.buffering": CACHING[cache]})
    assert isinstance(error, case.error), repr(error)
    assert (error.topic, error.partition, error.offset) == ("in", 0, 1)
    assert case.reason in str(error) and "offset=1" in str(error)
    assert error.processor and error.processor.startswith(case.processor), error.processor


@pytest.mark.parametrize("cache", list(CACHING))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_continue_skips_counts_and_logs(case, cache, caplog):
    handlers = {"default.deserialization.exception.handler": "continue",
                "processing.exception.handler": "continue"}
    with caplog.at_level(logging.WARNING):
        driver, error = _run(case, {"cache.max.bytes.buffering": CACHING[cache], **handlers})
    assert error is None
    assert _out(driver, case) == case.expected
    assert driver.dropped_records == {"error": 1}
    skipped = [r.getMessage() for r in caplog.records if "skipped record" in r.getMessage()]
    assert len(skipped) == 1 and case.reason in skipped[0] and "offset=1" in skipped[0]


@pytest.mark.parametrize("cache", list(CACHING))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_dead_letter_topic_receives_it_with_the_reason(case, cache):
    driver, error = _run(case, {"cache.max.bytes.buffering": CACHING[cache],
                                "errors.dead.letter.queue.topic.name": "dlq"})
    assert error is None
    assert _out(driver, case) == case.expected
    dead = driver.topic_records("dlq")
    assert [(r.key, r.value) for r in dead] == [case.bad]
    headers = dict(dead[0].headers)
    assert headers["__streams.errors.exception"] == case.error.__name__.encode()
    assert case.reason.encode() in headers["__streams.errors.exception.message"]
    assert (headers["__streams.errors.topic"], headers["__streams.errors.partition"],
            headers["__streams.errors.offset"]) == (b"in", b"0", b"1")
