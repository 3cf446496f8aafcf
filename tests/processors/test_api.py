"""The Processor API on the test driver: user processors with stores, stream-time and wall-clock
punctuation (Kafka Streams' PunctuationQueue rules), errors through the handler."""

from __future__ import annotations

import pytest

from streamtable import (
    ProcessingError,
    Processor,
    PunctuationType,
    Record,
    Stores,
    StreamsBuilder,
    TopologyTestDriver,
)


class RunningTotal(Processor):
    """Sums values per key in a store and forwards each new total; reports every key's total
    on a punctuation."""

    def __init__(self, kind: PunctuationType | None = None, interval: int = 10) -> None:
        self.kind = kind
        self.interval = interval
        self.fired: list[int] = []

    def init(self, context):
        self.context = context
        self.totals = context.get_state_store("totals")
        if self.kind is not None:
            self.cancellable = context.schedule(self.interval, self.kind, self.punctuate)

    def process(self, record):
        total = (self.totals.get(record.key) or 0) + record.value
        self.totals.put(record.key, total)
        self.context.forward(record.with_value(total))

    def punctuate(self, now):
        self.fired.append(now)
        for key, total in self.totals.all():
            self.context.forward(Record(key, f"{total}@{now}", now), child=None)


def topology(kind=None, interval=10, queryable=False):
    b = StreamsBuilder()
    store = Stores.key_value_store_builder(Stores.persistent_key_value_store("totals"))
    b.add_state_store(store.with_queryable(queryable))
    b.stream("in").process(lambda: RunningTotal(kind, interval), "totals",
                           named="running-total").to("out")
    return b.build()


def test_a_user_processor_keeps_a_store_and_forwards():
    driver = TopologyTestDriver(topology())
    topic = driver.create_input_topic("in")
    for key, value in [("a", 1), ("b", 5), ("a", 2)]:
        topic.pipe_input(key, value, timestamp=100)
    assert driver.create_output_topic("out").read_key_values() == [("a", 1), ("b", 5), ("a", 3)]
    assert driver.get_key_value_store("totals").to_dict() == {"a": 3, "b": 5}
    assert "Processor: running-total (stores: [totals])" in topology().describe()


def test_stream_time_punctuation_fires_once_per_advance_at_the_next_interval():
    driver = TopologyTestDriver(topology(PunctuationType.STREAM_TIME, 10))
    topic = driver.create_input_topic("in")
    out = driver.create_output_topic("out")
    # Kafka: the schedule starts at 0, so the first record (ts 5) fires it; then the next time
    # is the first multiple of 10 after stream time: 10, then 30 after 23, then 60 after 50
    for ts in (5, 7, 23, 3, 24, 50):
        topic.pipe_input("k", 1, timestamp=ts)
    got = out.read_records()
    assert [(r.value, r.timestamp) for r in got if isinstance(r.value, str)] == [
        ("1@5", 5), ("3@23", 23), ("6@50", 50)]
    # the punctuation follows the record that advanced stream time
    assert [r.value for r in got] == [1, "1@5", 2, 3, "3@23", 4, 5, 6, "6@50"]


def test_wall_clock_punctuation_follows_the_mock_clock_and_skips_missed_intervals():
    driver = TopologyTestDriver(topology(PunctuationType.WALL_CLOCK_TIME, 1000),
                                initial_wall_clock_time_ms=0)
    topic = driver.create_input_topic("in")
    out = driver.create_output_topic("out")
    topic.pipe_input("k", 1, timestamp=10)
    driver.advance_wall_clock_time(500)
    assert out.read_values() == [1]
    driver.advance_wall_clock_time(600)  # 1100: due since 1000
    assert out.read_records()[0].timestamp == 1100
    driver.advance_wall_clock_time(3000)  # 4100: three intervals elapsed, one punctuation
    assert out.read_values() == ["1@4100"]
    driver.advance_wall_clock_time(899)  # 4999: next is 5000
    assert out.read_values() == []
    driver.advance_wall_clock_time(1)
    assert out.read_values() == ["1@5000"]


class Countdown(Processor):
    """Forwards a tick per wall-clock second, three times, then cancels itself."""

    def init(self, context):
        self.context = context
        self.left = context.get_state_store("left")
        self.schedule = context.schedule(1000, PunctuationType.WALL_CLOCK_TIME, self.tick)

    def process(self, record):
        self.left.put("n", record.value)

    def tick(self, now):
        n = self.left.get("n")
        self.context.forward(Record("tick", n, now))
        if n == 1:
            self.schedule.cancel()
        self.left.put("n", n - 1)


def countdown_topology():
    b = StreamsBuilder()
    b.add_state_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("left")))
    b.stream("in").process(Countdown, "left").to("out")
    return b.build()


@pytest.mark.parametrize("batch_mode", [False, True])
def test_a_punctuator_cancels_itself(batch_mode):
    driver = TopologyTestDriver(countdown_topology(), initial_wall_clock_time_ms=0,
                                batch_mode=batch_mode)
    driver.create_input_topic("in").pipe_input("k", 3, timestamp=0)
    for _ in range(6):
        driver.advance_wall_clock_time(1000)
        if batch_mode:
            driver.run_batch()
    assert driver.create_output_topic("out").read_records() == [
        _rec("tick", 3, 1000), _rec("tick", 2, 2000), _rec("tick", 1, 3000)]


def _rec(k, v, ts):
    from streamtable.testing.driver import TestRecord

    return TestRecord(k, v, ts)


def test_batch_mode_punctuates_wall_clock_at_every_batch_even_without_records():
    driver = TopologyTestDriver(topology(PunctuationType.WALL_CLOCK_TIME, 1000),
                                initial_wall_clock_time_ms=0, batch_mode=True)
    topic = driver.create_input_topic("in")
    out = driver.create_output_topic("out")
    topic.pipe_input("k", 1, timestamp=10)
    driver.advance_wall_clock_time(1500)  # waits for the batch
    assert out.read_values() == []
    driver.run_batch()  # records first, then the punctuation due at the batch's time
    assert out.read_values() == [1, "1@1500"]
    driver.advance_wall_clock_time(1000)
    driver.run_batch()  # a batch without records still punctuates
    assert out.read_values() == ["1@2500"]


def test_stream_time_punctuation_in_batch_mode_equals_record_mode():
    outputs = []
    for batch_mode in (False, True):
        driver = TopologyTestDriver(topology(PunctuationType.STREAM_TIME, 10),
                                    batch_mode=batch_mode)
        topic = driver.create_input_topic("in")
        for i, ts in enumerate((1, 4, 12, 11, 35, 36, 70)):
            topic.pipe_input(f"k{i % 2}", i, timestamp=ts)
            if batch_mode and i % 3 == 2:
                driver.run_batch()
        if batch_mode:
            driver.run_batch()
        outputs.append(driver.create_output_topic("out").read_records())
    assert outputs[0] == outputs[1]
    assert sum(isinstance(r.value, str) for r in outputs[0]) == 1 + 2 + 2 + 2  # at 1, 12, 35, 70


class Failing(Processor):
    def init(self, context):
        self.context = context
        context.schedule(1000, PunctuationType.WALL_CLOCK_TIME, self.punctuate)
        self.ticks = 0

    def process(self, record):
        if record.value == "bad":
            raise ValueError("cannot take this one")
        self.context.forward(record)

    def punctuate(self, now):
        self.ticks += 1
        if self.ticks == 1:
            raise KeyError("punctuator broke")
        self.context.forward(Record("tick", now, now))


def failing_topology():
    b = StreamsBuilder()
    b.stream("in").process(Failing, named="my-processor").to("out")
    return b.build()


def test_errors_of_user_processors_and_punctuators_name_the_operator():
    driver = TopologyTestDriver(failing_topology(), initial_wall_clock_time_ms=0)
    topic = driver.create_input_topic("in")
    with pytest.raises(ProcessingError) as e:
        topic.pipe_input("k", "bad", timestamp=1)
    assert "processor=my-processor" in str(e.value) and "offset=0" in str(e.value)
    with pytest.raises(ProcessingError) as e:
        driver.advance_wall_clock_time(1000)
    assert "processor=my-processor" in str(e.value)
    assert "punctuator broke" in str(e.value) and "WALL_CLOCK_TIME punctuator" in str(e.value)


def test_with_continue_a_failing_record_or_punctuation_is_skipped_and_counted():
    driver = TopologyTestDriver(failing_topology(), {"processing.exception.handler": "continue"},
                                initial_wall_clock_time_ms=0)
    topic = driver.create_input_topic("in")
    topic.pipe_input("k", "bad", timestamp=1)
    topic.pipe_input("k", "good", timestamp=2)
    driver.advance_wall_clock_time(1000)  # the punctuator raises: skipped, still scheduled
    driver.advance_wall_clock_time(1000)
    assert driver.create_output_topic("out").read_key_values() == [("k", "good"),
                                                                   ("tick", 2000)]
    assert driver.dropped_records == {"error": 2}


def test_a_processor_reaches_only_the_stores_connected_to_it():
    class Snoop(Processor):
        def init(self, context):
            context.get_state_store("totals")

    b = StreamsBuilder()
    b.add_state_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("totals")))
    b.stream("in").process(lambda: RunningTotal(), "totals").to("out")
    b.stream("other").process(Snoop, named="snoop")
    with pytest.raises(ProcessingError, match="'totals' is not connected to processor 'snoop'"):
        TopologyTestDriver(b.build())


def test_process_needs_a_supplier_and_known_stores():
    from streamtable import TopologyError

    b = StreamsBuilder()
    with pytest.raises(TopologyError, match="supplier"):
        b.stream("in").process(RunningTotal())
    with pytest.raises(TopologyError, match="no store named 'nope'"):
        b.stream("in2").process(RunningTotal, "nope")


def test_the_low_level_topology_api_routes_to_named_children_with_a_shared_store():
    from streamtable import TopologyBuilder

    class Route(Processor):
        def init(self, context):
            self.context = context
            self.counts = context.get_state_store("counts")
            context.schedule(100, PunctuationType.STREAM_TIME, self.report)

        def process(self, record):
            self.counts.put(record.key, (self.counts.get(record.key) or 0) + 1)
            self.context.forward(record, child="big" if record.value >= 10 else "small")

        def report(self, now):
            self.context.forward(Record("counts", dict(self.counts.all()), now), child="stats")

    t = (TopologyBuilder()
         .add_source("numbers", "in")
         .add_processor("route", Route, "numbers")
         .add_state_store(Stores.key_value_store_builder(
             Stores.in_memory_key_value_store("counts")), "route")
         .add_sink("big", "big-numbers", "route")
         .add_sink("small", "small-numbers", "route")
         .add_sink("stats", "stats", "route"))
    assert "Processor: route (stores: [counts])" in t.describe()
    driver = TopologyTestDriver(t.build())
    topic = driver.create_input_topic("in")
    for ts, (k, v) in enumerate([("a", 1), ("b", 20), ("a", 30)]):
        topic.pipe_input(k, v, timestamp=ts * 60)
    assert driver.create_output_topic("big-numbers").read_key_values() == [("b", 20), ("a", 30)]
    assert driver.create_output_topic("small-numbers").read_key_values() == [("a", 1)]
    # stream time 0 fires (first record), then 120 (past 100): after the 1st and 3rd records
    assert driver.create_output_topic("stats").read_values() == [{"a": 1}, {"a": 2, "b": 1}]


def test_the_low_level_api_rejects_unknown_parents_stores_and_children():
    from streamtable import TopologyBuilder, TopologyError

    t = TopologyBuilder().add_source("s", "in")
    with pytest.raises(TopologyError, match="parent 'nope'"):
        t.add_processor("p", RunningTotal, "nope")
    t.add_processor("p", lambda: RunningTotal(), "s")
    with pytest.raises(TopologyError, match="no store named 'x'"):
        t.connect_processor_and_state_stores("p", "x")
    t.add_state_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("totals")),
                      "p")

    class Misroute(Processor):
        def process(self, record):
            self.context.forward(record, child="nowhere")

    t.add_processor("m", Misroute, "s").add_sink("out", "out", "m")
    driver = TopologyTestDriver(t.build())
    with pytest.raises(ProcessingError, match="'nowhere' is not a child of processor 'm'"):
        driver.create_input_topic("in").pipe_input("k", 1)


def test_a_failure_downstream_of_a_punctuation_names_the_failing_operator():
    class Tick(Processor):
        def init(self, context):
            context.schedule(1000, PunctuationType.WALL_CLOCK_TIME,
                             lambda now: context.forward(Record("t", 0, now)))

    b = StreamsBuilder()
    (b.stream("in").process(Tick, named="ticker")
     .map_values(lambda v: 1 / v, named="divide").to("out"))
    driver = TopologyTestDriver(b.build(), initial_wall_clock_time_ms=0)
    with pytest.raises(ProcessingError) as e:
        driver.advance_wall_clock_time(1000)
    assert "processor=divide" in str(e.value)
    assert "ZeroDivisionError" in str(e.value) and "punctuator of ticker" in str(e.value)


def test_the_context_tells_where_and_when():
    seen = []

    class Where(Processor):
        def init(self, context):
            self.context = context
            context.schedule(500, PunctuationType.WALL_CLOCK_TIME, self.tick)

        def process(self, record):
            c = self.context
            seen.append((c.application_id, c.task_id, c.record_metadata(),
                         c.current_stream_time_ms(), c.current_system_time_ms()))
            c.commit()  # a request: the driver commits after every record anyway

        def tick(self, now):
            seen.append(("tick", now, self.context.record_metadata(),
                         self.context.current_stream_time_ms()))

    b = StreamsBuilder()
    b.stream("in").process(Where)
    driver = TopologyTestDriver(b.build(), {"application.id": "where"},
                                initial_wall_clock_time_ms=7)
    topic = driver.create_input_topic("in")
    topic.pipe_input("k", 1, timestamp=40)
    topic.pipe_input("k", 2, timestamp=30)
    driver.advance_wall_clock_time(600)
    from streamtable.processors.api import RecordMetadata

    assert seen == [("where", 0, RecordMetadata("in", 0, 0), 40, 7),
                    ("where", 0, RecordMetadata("in", 0, 1), 40, 7),
                    ("tick", 607, None, 40)]
