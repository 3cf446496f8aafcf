"""Record headers on Spark, through a real broker: from input to output through a map and two
counts (one behind a repartition), with ``dsl.store.format`` default and ``headers``, equal to
the test driver; with ``headers``, the counts' stores keep each row's headers across a restart
and across kill -9 of ``streamtable run`` at random moments, and every output record is
written once with its own headers and the sink's exactly-once tags once. Topics have one
partition, so that "the last record of a key" is the same record behind the repartition on
Spark as on the driver."""

from __future__ import annotations

import json
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from tests.runtime.spark.kafka_util import new_topics, read_all
from tests.runtime.spark.word_count_cli import CliRun, run_cli

from streamtable.cli import app_topology, load_app
from streamtable.testing import TopologyTestDriver

pytestmark = pytest.mark.spark

# The application, as a file: the in-process runs load it as the CLI does (its processor is
# shipped to Spark's workers by value), the kill -9 test runs it with `streamtable run`.
APP = '''
from streamtable import Processor, StreamsBuilder

config = {{"dsl.store.format": {fmt!r}}}


class StoredHeaders(Processor):
    """Answers a probe with the count stored for its key, its timestamp and that row's
    headers (None with the default format, whose rows have none)."""

    def init(self, context):
        self.context = context
        self.counts = context.get_state_store("counts")

    def process(self, record):
        stored = self.counts.get(record.key)
        headers = getattr(stored, "headers", None)
        self.context.forward(record.with_value(None if stored is None else [
            stored.value, stored.timestamp,
            None if headers is None else [[k, v.decode()] for k, v in headers]]))


def build_topology():
    b = StreamsBuilder()
    doubled = b.stream({events!r}).map_values(lambda v: v * 2)
    doubled.to({mapped!r})
    doubled.group_by_key().count(materialized="counts").to_stream().to({counts!r})
    doubled.group_by(lambda k, v: k[0]).count(materialized="by-initial") \\
        .to_stream().to({initials!r})
    b.stream({probes!r}).process_values(StoredHeaders, "counts").to({answers!r})
    return b.build()
'''

NAMES = ("events", "mapped", "counts", "initials", "probes", "answers")


def write_app(path: Path, fmt: str, topics: dict[str, str]) -> Path:
    app = path / f"headers_app_{fmt}.py"
    app.write_text(APP.format(fmt=fmt, **topics))
    return app


def produce(bootstrap: str, topic: str, records: list[tuple[str, Any, int, Any]]) -> None:
    """``(key, value, timestamp, headers)`` records, JSON keys and values, each key in the
    partition Kafka's default partitioner gives it (as the application's serdes write it)."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                         "linger.ms": 5})
    for k, v, ts, headers in records:
        producer.produce(topic, key=json.dumps(k).encode(), value=json.dumps(v).encode(),
                         timestamp=ts, headers=list(headers))
    assert producer.flush(30) == 0


def consumed(bootstrap: str, topic: str) -> list[tuple[Any, Any, tuple[Any, ...], list[str]]]:
    """``(key, value, user headers, the sink's tag names)`` of every record of ``topic``."""
    out = []
    for m in read_all(bootstrap, topic):
        headers = m.headers() or []
        value = None if m.value() is None else json.loads(m.value())  # None: a tombstone
        out.append((json.loads(m.key()), value,
                    tuple((k, v) for k, v in headers if not k.startswith("streamtable.")),
                    [k for k, _ in headers if k.startswith("streamtable.")]))
    return out


def events(n: int, start: int = 0, seed: int = 1) -> list[tuple[str, int, int, Any]]:
    rng = random.Random(seed)
    users = ["ann", "bob", "cid", "dan", "eve", "abe"]
    return [(rng.choice(users), rng.randint(1, 9), 1_000_000 + 1_000 * (start + i),
             (("trace", f"t{start + i}".encode()), ("tenant", b"x")))
            for i in range(n)]


def reference(app: Path, topics: dict[str, str], batches: list[tuple[str, list[Any]]]
              ) -> TopologyTestDriver:
    module = load_app(str(app))
    driver = TopologyTestDriver(app_topology(module), module.config)
    for topic, records in batches:
        t = driver.create_input_topic(topics[topic])
        for k, v, ts, headers in records:
            t.pipe_input(k, v, ts, headers=headers)
    return driver


def last_per_key(records: list[tuple[Any, Any, Any, Any]]) -> dict[Any, tuple[Any, Any]]:
    return {k: (v, h) for k, v, h, _ in records}


def check_outputs(bootstrap: str, topics: dict[str, str], driver: TopologyTestDriver) -> None:
    """What the application wrote equals the driver's: every mapped record once with its own
    headers, the counts' last change per key with the headers of its last record, and each
    record tagged by the sink once."""
    def expected(name: str) -> list[tuple[Any, Any, Any]]:
        return [(r.key, r.value, r.headers)
                for r in driver.create_output_topic(topics[name]).read_records()]

    mapped = consumed(bootstrap, topics["mapped"])
    assert [(k, v, h) for k, v, h, _ in mapped] == expected("mapped")
    for name in ("mapped", "counts", "initials"):
        got = consumed(bootstrap, topics[name])
        assert all(sorted(tags) == ["streamtable.app", "streamtable.batch", "streamtable.seq",
                                    "streamtable.writer"] for *_, tags in got), name
        if name != "mapped":  # with caching, Spark forwards the last change per batch
            assert last_per_key(got) == {k: (v, h) for k, v, h in expected(name)}, name
            for key in {k for k, *_ in got}:
                seq = [v for k, v, *_ in got if k == key]
                assert seq == sorted(set(seq)), f"{name} {key}: a count repeats or goes back"


@pytest.mark.parametrize(("fmt", "working_copies"), [
    ("default", "in_memory"), ("headers", "in_memory"), ("headers", "rocksDB")])
def test_headers_through_a_map_and_counts_on_spark_then_read_from_the_restored_store(
        spark: Any, bootstrap: str, tmp_path: Path, fmt: str, working_copies: str) -> None:
    from streamtable.runtime.spark import StreamsApp

    topics = dict(zip(NAMES, new_topics(bootstrap, 1, *NAMES), strict=True))
    app_file = write_app(tmp_path, fmt, topics)
    module = load_app(str(app_file))
    config = dict(module.config, **{"bootstrap.servers": bootstrap,
                                    "application.id": f"headers-{topics['events']}",
                                    "max.records.per.batch": 20,
                                    "default.dsl.store": working_copies})
    first = events(60)
    produce(bootstrap, topics["events"], first)
    StreamsApp(app_topology(module), config=config, state_dir=tmp_path / "state", spark=spark,
               development_broker=True).run_until_caught_up(timeout=300)

    # a new run restores the counts' stores and answers probes from them
    probes = [(k, 0, 100_000, ()) for k in ("ann", "bob", "eve", "zed")]
    produce(bootstrap, topics["probes"], probes)
    StreamsApp(app_topology(module), config=config, state_dir=tmp_path / "state", spark=spark,
               development_broker=True).run_until_caught_up(timeout=300)

    driver = reference(app_file, topics, [("events", first), ("probes", probes)])
    check_outputs(bootstrap, topics, driver)
    answers = consumed(bootstrap, topics["answers"])
    expected = [(r.key, r.value, r.headers)
                for r in driver.create_output_topic(topics["answers"]).read_records()]
    assert sorted((k, json.dumps(v), h) for k, v, h, _ in answers) == sorted(
        (k, json.dumps(v), h) for k, v, h in expected)
    last = {k: h for k, _, _, h in first}
    for key, value, _, _ in answers:
        if key == "zed":
            assert value is None
        elif fmt == "headers":  # the row keeps the headers of the key's last record
            assert value[2] == [[k, v.decode()] for k, v in last[key]]
        else:
            assert value[2] is None


@pytest.mark.slow  # ~1 min: kill -9 as test_kill_and_restart does, on a headers store
def test_stored_headers_survive_kill_9_of_streamtable_run(bootstrap: str, tmp_path: Path
                                                          ) -> None:
    rng = random.Random(11)
    topics = dict(zip(NAMES, new_topics(bootstrap, 1, *NAMES), strict=True))
    app_file = write_app(tmp_path, "headers", topics)
    state = tmp_path / "state"
    sent: list[Any] = []
    for round_ in range(2):
        chunk = events(600, start=len(sent), seed=round_)
        sent.extend(chunk)
        produce(bootstrap, topics["events"], chunk)
        run = CliRun(app_file, bootstrap, state)
        target = rng.randint(1, 2)
        run.wait_for(lambda t=target, r=run: r.batches_done() >= t, 300, "the first batches")
        time.sleep(rng.uniform(0, 2.0))
        run.stop(signal.SIGKILL)
    final = run_cli(app_file, bootstrap, state, "--until-caught-up")
    _, err = final.communicate(timeout=300)
    assert final.returncode == 0, err.decode()[-3000:]

    probes = [(k, 0, 10_000_000, ()) for k in ("ann", "bob", "cid", "dan", "eve", "abe")]
    produce(bootstrap, topics["probes"], probes)
    again = run_cli(app_file, bootstrap, state, "--until-caught-up")
    _, err = again.communicate(timeout=300)
    assert again.returncode == 0, err.decode()[-3000:]

    driver = reference(app_file, topics, [("events", sent), ("probes", probes)])
    check_outputs(bootstrap, topics, driver)
    counts = {k: 0 for k, *_ in probes}
    last: dict[str, Any] = {}
    for k, _, ts, headers in sent:
        counts[k] += 1
        last[k] = (ts, [[name, value.decode()] for name, value in headers])
    answers = {k: v for k, v, _, _ in consumed(bootstrap, topics["answers"])}
    assert answers == {k: [counts[k], *last[k]] for k in counts}
