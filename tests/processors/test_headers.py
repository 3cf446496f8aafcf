"""Record headers through the DSL and its stores, on the test driver record by record and in
batch mode: carried from input to output by stateless and stateful operators with
``dsl.store.format`` default or ``headers``; read and set by a processor (``process_values``);
kept with their values by the stores of the ``headers`` format (KIP-1271/KIP-1285), across the
batch mode's check-out and check-in of task state."""

from __future__ import annotations

from typing import Any

import pytest

from streamtable import (
    JoinWindows,
    Processor,
    Record,
    Stores,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    TopologyTestDriver,
    ValueAndTimestamp,
    ValueTimestampHeaders,
)
from streamtable.errors import ProcessingError
from streamtable.processors.user import TimestampedKeyValueStoreWithHeadersView
from streamtable.state import InMemoryKeyValueStore

FORMATS = ["default", "headers"]
MODES = [False, True]


def trace(n: int) -> tuple[tuple[str, bytes], ...]:
    return (("trace", f"t{n}".encode()),)


def driver_for(builder: StreamsBuilder, fmt: str, batch: bool, **config: Any
               ) -> TopologyTestDriver:
    return TopologyTestDriver(builder.build(), {"dsl.store.format": fmt, **config},
                              batch_mode=batch)


def pipe(driver: TopologyTestDriver, topic: str,
         records: list[tuple[Any, Any, int, Any]]) -> None:
    """Pipe ``(key, value, timestamp, headers)`` records, then run them (batch mode)."""
    t = driver.create_input_topic(topic)
    for k, v, ts, h in records:
        t.pipe_input(k, v, ts, headers=h)
    if driver.batch_mode:
        driver.run_batch()


# records of three users; each record's header names it
EVENTS = [("ann", 1, 10, trace(0)), ("bob", 2, 20, trace(1)), ("ann", 3, 30, trace(2)),
          ("cid", 4, 40, trace(3)), ("bob", 5, 50, trace(4)), ("ann", 6, 60, trace(5))]


@pytest.mark.parametrize("batch", MODES, ids=["records", "batch"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_headers_go_from_input_to_output_through_a_map_and_aggregations(fmt: str,
                                                                       batch: bool) -> None:
    b = StreamsBuilder()
    doubled = b.stream("in").map_values(lambda v: v * 2)
    doubled.to("mapped")
    doubled.group_by_key().reduce(lambda a, v: a + v, materialized="sums") \
        .to_stream().to("sums")
    # re-keyed: through a repartition (and the combined count's partial counts)
    doubled.group_by(lambda k, v: k[0]).count(materialized="by-initial") \
        .to_stream().to("by-initial")
    driver = driver_for(b, fmt, batch)
    pipe(driver, "in", EVENTS)

    mapped = driver.create_output_topic("mapped").read_records()
    assert [(r.key, r.value, r.headers) for r in mapped] == [
        (k, v * 2, h) for k, v, _, h in EVENTS]
    # an aggregation's change carries the headers of the record that caused it (Kafka Streams'
    # record context); with caching the last change per key per commit
    sums = driver.create_output_topic("sums").read_records()
    expected_sums = ([("ann", 2, trace(0)), ("bob", 4, trace(1)), ("ann", 8, trace(2)),
                      ("cid", 8, trace(3)), ("bob", 14, trace(4)), ("ann", 20, trace(5))]
                     if not batch else
                     [("ann", 20, trace(5)), ("bob", 14, trace(4)), ("cid", 8, trace(3))])
    assert [(r.key, r.value, r.headers) for r in sums] == expected_sums
    last = {r.key: (r.value, r.headers) for r in
            driver.create_output_topic("by-initial").read_records()}
    assert last == {"a": (3, trace(5)), "b": (2, trace(4)), "c": (1, trace(3))}


@pytest.mark.parametrize("batch", MODES, ids=["records", "batch"])
def test_the_headers_format_keeps_each_rows_headers_in_the_store(batch: bool) -> None:
    b = StreamsBuilder()
    stream = b.stream("in")
    stream.group_by_key().count(materialized="counts")
    stream.group_by_key().windowed_by(TimeWindows.of_size_and_grace(100, 0)) \
        .count("per-window")
    b.table("users", materialized="users")
    for fmt in FORMATS:
        driver = driver_for(b, fmt, batch)
        pipe(driver, "in", EVENTS)
        pipe(driver, "users", [("ann", {"name": "Ann"}, 5, (("source", b"crm"),))])
        counts = driver.get_timestamped_key_value_store_with_headers("counts")
        windows = driver.get_timestamped_key_value_store_with_headers("per-window")
        users = driver.get_timestamped_key_value_store_with_headers("users")
        if fmt == "default":  # nothing kept: every row reads with no headers
            assert counts.get("ann") == ValueTimestampHeaders(3, 60, ())
            assert users.get("ann") == ValueTimestampHeaders({"name": "Ann"}, 5, ())
            continue
        assert dict(counts.all()) == {"ann": ValueTimestampHeaders(3, 60, trace(5)),
                                      "bob": ValueTimestampHeaders(2, 50, trace(4)),
                                      "cid": ValueTimestampHeaders(1, 40, trace(3))}
        assert {(w.key, w.start): v for w, v in windows.all()} == {
            ("ann", 0): ValueTimestampHeaders(3, 60, trace(5)),
            ("bob", 0): ValueTimestampHeaders(2, 50, trace(4)),
            ("cid", 0): ValueTimestampHeaders(1, 40, trace(3))}
        assert users.get("ann").headers == (("source", b"crm"),)
        # the other queries show values and timestamps, as Kafka Streams' store() does
        assert driver.get_key_value_store("counts").get("ann") == 3
        assert driver.get_timestamped_key_value_store("counts").get("ann") == (3, 60)


def test_a_windows_row_keeps_the_headers_of_its_last_record() -> None:
    b = StreamsBuilder()
    b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(50, 100)) \
        .count("per-window")
    driver = driver_for(b, "headers", False)
    pipe(driver, "in", EVENTS)
    windows = driver.get_timestamped_key_value_store_with_headers("per-window")
    assert {(w.key, w.start): (v.value, v.headers) for w, v in windows.all()} == {
        ("ann", 0): (2, trace(2)), ("ann", 50): (1, trace(5)), ("bob", 0): (1, trace(1)),
        ("bob", 50): (1, trace(4)), ("cid", 0): (1, trace(3))}


class StoredHeaders(Processor):
    """Answers each probe with the count stored for its key and that row's headers."""

    def init(self, context: Any) -> None:
        self.context = context
        self.counts = context.get_state_store("counts")

    def process(self, record: Record) -> None:
        stored = self.counts.get(record.key)
        self.context.forward(record.with_value(
            None if stored is None else [stored.value, stored.timestamp,
                                         [[k, v.decode()] for k, v in stored.headers]]))


def probed_counts() -> StreamsBuilder:
    b = StreamsBuilder()
    b.stream("in").group_by_key().count(materialized="counts")
    b.stream("probes").process_values(StoredHeaders, "counts").to("answers")
    return b


def test_a_processor_reads_a_dsl_stores_headers_in_a_later_batch() -> None:
    """Batch mode checks each task's state out and in through the task-state persistence:
    the headers written in one batch are read back in the next."""
    driver = driver_for(probed_counts(), "headers", True)
    pipe(driver, "in", EVENTS)
    pipe(driver, "probes", [("ann", 0, 70, ()), ("dan", 0, 70, ())])
    answers = driver.create_output_topic("answers").read_records()
    assert [(r.key, r.value) for r in answers] == [
        ("ann", [3, 60, [["trace", "t5"]]]), ("dan", None)]


def test_with_the_default_format_a_processor_reads_values_and_timestamps() -> None:
    class Reads(Processor):
        def init(self, context: Any) -> None:
            self.context = context
            self.counts = context.get_state_store("counts")

        def process(self, record: Record) -> None:
            self.context.forward(record.with_value(repr(self.counts.get(record.key))))

    b = StreamsBuilder()
    b.stream("in").group_by_key().count(materialized="counts")
    b.stream("probes").process_values(Reads, "counts").to("answers", value_serde="string")
    driver = driver_for(b, "default", False)
    pipe(driver, "in", EVENTS)
    pipe(driver, "probes", [("ann", 0, 70, ())])
    assert driver.create_output_topic("answers", value_serde="string").read_values() == [
        repr(ValueAndTimestamp(3, 60))]


@pytest.mark.parametrize("batch", MODES, ids=["records", "batch"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_final_windowed_result_carries_its_last_records_headers(fmt: str,
                                                                 batch: bool) -> None:
    b = StreamsBuilder()
    b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(50, 0)).count() \
        .suppress(Suppressed.until_window_closes()).to_stream() \
        .map(lambda w, n: (f"{w.key}@{w.start}", n)).to("final")
    driver = driver_for(b, fmt, batch)
    pipe(driver, "in", [*EVENTS, ("zed", 0, 200, trace(9))])
    final = {r.key: (r.value, r.headers) for r in driver.create_output_topic("final")
             .read_records()}
    assert final == {"ann@0": (2, trace(2)), "bob@0": (1, trace(1)), "cid@0": (1, trace(3)),
                     "ann@50": (1, trace(5)), "bob@50": (1, trace(4))}


@pytest.mark.parametrize("batch", MODES, ids=["records", "batch"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_an_unmatched_left_join_record_keeps_its_own_headers_with_the_headers_format(
        fmt: str, batch: bool) -> None:
    b = StreamsBuilder()
    b.stream("left").left_join(b.stream("right"), lambda a, c: [a, c],
                               JoinWindows.of_time_difference_and_grace(100, 0)).to("out")
    driver = driver_for(b, fmt, batch)
    pipe(driver, "right", [("b", "x", 0, trace(8))])
    pipe(driver, "left", [("a", 1, 0, trace(0)), ("a", 2, 0, trace(1)), ("b", 3, 0, trace(2)),
                          ("c", 4, 1000, trace(3))])
    out = [(r.key, r.value, r.headers) for r in driver.create_output_topic("out").read_records()]
    # a join result carries the headers of the record that made it, as in Kafka Streams
    assert ("b", [3, "x"], trace(2)) in out
    unmatched = [(k, v, h) for k, v, h in out if v[1] is None and k == "a"]
    if fmt == "headers":  # each its own, kept in the join's outer store
        assert unmatched == [("a", [1, None], trace(0)), ("a", [2, None], trace(1))]
    else:  # Kafka Streams: the headers of the record whose time closed their window
        assert unmatched == [("a", [1, None], trace(3)), ("a", [2, None], trace(3))]


@pytest.mark.parametrize("batch", MODES, ids=["records", "batch"])
def test_process_values_reads_and_sets_headers_without_a_repartition(batch: bool) -> None:
    b = StreamsBuilder()
    tagged = b.stream("in").process_values(
        lambda r: r.with_value(r.value + 100).with_headers(
            r.headers + (("seen-by", b"app"), ("was", r.last_header("trace")))))
    tagged.group_by_key().count(materialized="counts")
    tagged.to("out")
    assert "repartition" not in b.build().describe()
    driver = driver_for(b, "default", batch)
    pipe(driver, "in", EVENTS[:2])
    assert [(r.key, r.value, r.headers) for r in driver.create_output_topic("out")
            .read_records()] == [
        ("ann", 101, (("trace", b"t0"), ("seen-by", b"app"), ("was", b"t0"))),
        ("bob", 102, (("trace", b"t1"), ("seen-by", b"app"), ("was", b"t1")))]
    assert driver.get_key_value_store("counts").get("ann") == 1


def test_process_with_a_function_may_drop_and_rekey() -> None:
    b = StreamsBuilder()
    b.stream("in").process(lambda r: None if r.value < 3 else r.with_key(r.last_header("trace"))) \
        .to("out", key_serde="bytes")
    driver = driver_for(b, "default", False)
    pipe(driver, "in", EVENTS[:4])
    assert driver.create_output_topic("out", key_serde="bytes").read_key_values() == [
        (b"t2", 3), (b"t3", 4)]


def test_process_values_refuses_a_record_of_another_key() -> None:
    class Rekeys(Processor):
        def process(self, record: Record) -> None:
            self.context.forward(record.with_key("someone-else"))

    b = StreamsBuilder()
    b.stream("in").process_values(Rekeys, named="rekeys").to("out")
    driver = driver_for(b, "default", False)
    with pytest.raises(ProcessingError, match="'rekeys' of process_values forwarded a record "
                                              "with key 'someone-else' while processing key "
                                              "'ann'") as caught:
        pipe(driver, "in", EVENTS[:1])
    assert (caught.value.topic, caught.value.offset) == ("in", 0)


def test_a_processor_function_must_return_a_record_or_none() -> None:
    b = StreamsBuilder()
    b.stream("in").process_values(lambda r: r.value, named="returns-a-value").to("out")
    driver = driver_for(b, "default", False)
    with pytest.raises(ProcessingError, match="returns a Record"):
        pipe(driver, "in", EVENTS[:1])


def test_a_processors_store_with_headers_keeps_what_it_is_given() -> None:
    class LastEvent(Processor):
        def init(self, context: Any) -> None:
            self.context = context
            self.last = context.get_state_store("last-event")

        def process(self, record: Record) -> None:
            before = self.last.get(record.key)
            self.last.put(record.key, ValueTimestampHeaders(record.value, record.timestamp,
                                                            record.headers))
            self.context.forward(record.with_value(
                None if before is None else [before.value, dict(before.headers)["trace"].decode()]))

    b = StreamsBuilder()
    b.add_state_store(Stores.timestamped_key_value_store_with_headers_builder(
        Stores.persistent_timestamped_key_value_store_with_headers("last-event")))
    b.stream("in").process_values(LastEvent, "last-event").to("out")
    for batch in MODES:
        # a processor's own store keeps headers whatever dsl.store.format says
        driver = driver_for(b, "default", batch)
        pipe(driver, "in", EVENTS[:3])
        assert driver.create_output_topic("out").read_values() == [
            None, None, [1, "t0"]]
        assert driver.get_timestamped_key_value_store_with_headers("last-event").get("ann") \
            == ValueTimestampHeaders(3, 30, trace(2))


def test_a_value_stored_without_headers_reads_with_none_and_the_other_way_round() -> None:
    """A store written before the format changed: pairs read with empty headers, and a
    store's triples read as values and timestamps where no headers are asked for."""
    store = InMemoryKeyValueStore("s")
    store.put("old", ("v", 1))
    view = TimestampedKeyValueStoreWithHeadersView(store, lambda: 0)
    assert view.get("old") == ValueTimestampHeaders("v", 1, ())
    view.put("new", ValueAndTimestamp("w", 2))
    view.put("newer", ValueTimestampHeaders("x", 3, {"k": "v"}))
    assert store.get("new") == ("w", 2, ()) and store.get("newer") == ("x", 3, (("k", b"v"),))
    from streamtable.processors.user import TimestampedKeyValueStoreView
    assert TimestampedKeyValueStoreView(store, lambda: 0).get("newer") == ("x", 3)
