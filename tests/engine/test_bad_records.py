"""Bad input: errors name the record; a dead-letter topic receives poison records."""

from __future__ import annotations

import pytest

from streamtable import (
    DeserializationError,
    ProcessingError,
    StreamsBuilder,
    TopologyTestDriver,
)


def topology():
    b = StreamsBuilder()
    b.stream("in").map_values(lambda v: 100 // v["n"]).to("out")
    return b.build()


def test_undecodable_value_fails_naming_topic_partition_offset():
    driver = TopologyTestDriver(topology())
    driver.pipe_raw("in", b'"k"', b'{"n": 1}', 0)
    with pytest.raises(DeserializationError) as info:
        driver.pipe_raw("in", b'"k"', b"{not json", 0)
    err = info.value
    assert (err.topic, err.partition, err.offset) == ("in", 0, 1)
    assert "cannot decode value" in str(err)
    assert "offset=1" in str(err)


def test_user_function_error_names_record_and_operator():
    driver = TopologyTestDriver(topology())
    t = driver.create_input_topic("in")
    with pytest.raises(ProcessingError) as info:
        t.pipe_input("k", {"n": 0})
    assert info.value.offset == 0
    assert info.value.processor == "KSTREAM-MAPVALUES-0000000001"
    assert "ZeroDivisionError" in str(info.value)
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_poison_records_go_to_dead_letter_topic_and_processing_continues():
    driver = TopologyTestDriver(topology(), {"errors.dead.letter.queue.topic.name": "dlq"})
    driver.pipe_raw("in", b'"a"', b"{broken", 7)
    t = driver.create_input_topic("in")
    t.pipe_input("b", {"n": 0})
    t.pipe_input("c", {"n": 4})
    assert driver.create_output_topic("out").read_key_values() == [("c", 25)]
    dead = driver.topic_records("dlq")
    assert [(r.key, r.value) for r in dead] == [(b'"a"', b"{broken"), (b'"b"', b'{"n":0}')]
    headers = dict(dead[0].headers)
    assert headers["__streams.errors.topic"] == b"in"
    assert headers["__streams.errors.offset"] == b"0"
    assert headers["__streams.errors.exception"] == b"DeserializationError"
    assert b"ZeroDivisionError" in dict(dead[1].headers)["__streams.errors.exception.message"]
    assert driver.dropped_records == {"error": 2}


def test_continue_handler_skips_and_counts_without_dead_letter_topic():
    driver = TopologyTestDriver(topology(), {"processing.exception.handler": "continue"})
    t = driver.create_input_topic("in")
    t.pipe_input("a", {"n": 0})
    t.pipe_input("b", {"n": 50})
    assert driver.create_output_topic("out").read_key_values() == [("b", 2)]
    assert driver.dropped_records == {"error": 1}


def test_unencodable_output_names_sink():
    b = StreamsBuilder()
    b.stream("in").to("out", value_serde="string")
    driver = TopologyTestDriver(b.build())
    with pytest.raises(ProcessingError, match="cannot encode record for topic 'out'") as info:
        driver.create_input_topic("in").pipe_input("k", 5)
    assert info.value.topic == "in" and info.value.offset == 0
    assert info.value.processor == "KSTREAM-SINK-0000000001"
