"""A user function that fails while a record cache forwards a held change (at a commit, with
caching on) goes through the processing exception handler like any other failure, naming the
input record that caused the change; a table group_by selector returning None skips the row."""

from __future__ import annotations

import pytest

from streamtable import StreamsBuilder, TopologyTestDriver
from streamtable.errors import ProcessingError


def _selector(key, p):
    if p["client"] == "boom":
        raise ValueError("no client")
    return p["client"], {p["id"]}


def _topology(selector=_selector):
    b = StreamsBuilder()
    (b.table("positions")
     .group_by(selector)
     .reduce(lambda a, c: a | c, lambda a, c: (a - c) or None, materialized="holders"))
    return b.build()


CACHED = {"cache.max.bytes.buffering": 10_000_000}


def test_failure_at_commit_stops_with_the_record_that_caused_it():
    driver = TopologyTestDriver(_topology(), CACHED)
    topic = driver.create_input_topic("positions")
    topic.pipe_input(1, {"id": 1, "client": "c1"})
    with pytest.raises(ProcessingError) as info:
        topic.pipe_input(2, {"id": 2, "client": "boom"})
    err = info.value
    assert (err.topic, err.partition, err.offset) == ("positions", 0, 1)
    assert err.processor and err.processor.startswith("KTABLE-SELECT")
    assert "ValueError: no client" in str(err)


def test_failure_at_commit_is_skipped_and_counted_with_continue():
    driver = TopologyTestDriver(_topology(), {**CACHED, "processing.exception.handler": "continue"})
    topic = driver.create_input_topic("positions")
    topic.pipe_input(1, {"id": 1, "client": "c1"})
    topic.pipe_input(2, {"id": 2, "client": "boom"})
    topic.pipe_input(3, {"id": 3, "client": "c1"})
    assert driver.get_key_value_store("holders").to_dict() == {"c1": {1, 3}}
    assert driver.dropped_records == {"error": 1}


def test_failure_at_commit_goes_to_the_dead_letter_topic():
    driver = TopologyTestDriver(
        _topology(), {**CACHED, "errors.dead.letter.queue.topic.name": "dlq"})
    topic = driver.create_input_topic("positions")
    topic.pipe_input(2, {"id": 2, "client": "boom"})
    dead = driver.topic_records("dlq")
    assert len(dead) == 1
    headers = dict(dead[0].headers)
    assert headers["__streams.errors.topic"] == b"positions"
    assert headers["__streams.errors.offset"] == b"0"
    assert b"no client" in headers["__streams.errors.exception.message"]


@pytest.mark.parametrize("cache", [True, False])
def test_table_group_by_selector_returning_none_skips_the_row(cache):
    def selector(key, p):
        return None if p["client"] is None else (p["client"], {p["id"]})

    config = CACHED if cache else {"cache.max.bytes.buffering": 0}
    driver = TopologyTestDriver(_topology(selector), config)
    topic = driver.create_input_topic("positions")
    topic.pipe_input(1, {"id": 1, "client": "c1"})
    topic.pipe_input(2, {"id": 2, "client": None})
    topic.pipe_input(2, {"id": 2, "client": "c1"})  # the old value selects nothing either
    assert driver.get_key_value_store("holders").to_dict() == {"c1": {1, 2}}
    assert driver.dropped_records == {
        "group_by selected no key-value pair": 1,
        "group_by selected no key-value pair (old value)": 1,
    }
