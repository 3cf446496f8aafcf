"""`streamtable consume` shows a record's headers (a dead-letter record's reason can be read) and
`streamtable produce` says, once, when it sends text that is not JSON as a JSON string."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from streamtable import StreamsBuilder, TopologyTestDriver
from streamtable.cli import main
from streamtable.cli.records import parse_records
from streamtable.serde import JSON, STRING


def dead_letter_record() -> Any:
    """The record the engine sends to the dead-letter topic for a value its map cannot take."""
    b = StreamsBuilder()
    b.stream("in").map_values(lambda v: 100 // v["n"]).to("out")
    driver = TopologyTestDriver(b.build(), {"errors.dead.letter.queue.topic.name": "dlq"})
    driver.create_input_topic("in").pipe_input("b", {"n": 0})
    (dead,) = driver.topic_records("dlq")
    return dead


def test_consume_shows_a_dead_letter_records_headers(
        bootstrap: str, new_topic: Callable[[int], str], produce: Callable[..., None],
        capsys: pytest.CaptureFixture[str]) -> None:
    dead = dead_letter_record()
    reason = dict(dead.headers)["__streams.errors.exception.message"].decode()
    assert "ZeroDivisionError" in reason
    dlq = new_topic(1)
    produce(dlq, [(0, dead.key, dead.value, 1_000, list(dead.headers))])
    common = [dlq, "--from-beginning", "--bootstrap-servers", bootstrap]

    assert main(["consume", *common]) == 0
    assert capsys.readouterr().out == 'b\t{"n": 0}\n'  # without --headers: as before

    assert main(["consume", *common, "--headers"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == 'b\t{"n": 0}'
    assert lines[1:] == [
        "  __streams.errors.exception: ProcessingError",
        f"  __streams.errors.exception.message: {reason.replace(chr(10), chr(92) + 'n')}",
        "  __streams.errors.topic: in",
        "  __streams.errors.partition: 0",
        "  __streams.errors.offset: 0",
    ]

    assert main(["consume", *common, "--format", "json"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["key"] == "b" and row["value"] == {"n": 0} and row["offset"] == 0
    assert row["headers"] == [[name, value.decode()] for name, value in dead.headers]


def test_consume_json_has_empty_headers_when_a_record_has_none(
        bootstrap: str, new_topic: Callable[[int], str], produce: Callable[..., None],
        capsys: pytest.CaptureFixture[str]) -> None:
    topic = new_topic(1)
    produce(topic, [(0, b'"k"', b"1", 1_000, None), (0, b'"k"', b"2", 2_000, [("h", None)])])
    assert main(["consume", topic, "--from-beginning", "--bootstrap-servers", bootstrap,
                 "--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["headers"] for r in rows] == [[], [["h", None]]]


def test_produce_warns_once_when_text_is_sent_as_a_json_string(
        caplog: pytest.LogCaptureFixture) -> None:
    lines = io.StringIO('a\t{"n": 1}\nb\thello\nc\tworld\n"d"\t2\n')
    with caplog.at_level(logging.INFO, logger="streamtable"):
        records = list(parse_records(lines, STRING, JSON, source="in.txt"))
    assert [(r.key, r.value) for r in records] == [
        ("a", {"n": 1}), ("b", "hello"), ("c", "world"), ('"d"', 2)]
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [w.getMessage() for w in warnings] == [
        'in.txt, line 2: the value hello is not JSON: sent as the string "hello", as is any such '
        'key or value that follows (write "hello" to mean a string)']


def test_produce_does_not_warn_about_json(caplog: pytest.LogCaptureFixture) -> None:
    lines = io.StringIO('1\t"text"\n{"id": 2}\t[1, 2]\nnull\tnull\n')
    with caplog.at_level(logging.INFO, logger="streamtable"):
        records = list(parse_records(lines, JSON, JSON))
    assert [(r.key, r.value) for r in records] == [(1, "text"), ({"id": 2}, [1, 2]),
                                                   (None, None)]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
