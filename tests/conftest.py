"""Shared fixtures: one real broker and one real SparkSession per test session."""

from __future__ import annotations

import itertools
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

# Spark's Python workers (and the driver-side Python planner of the data source) are separate
# processes: they find `streamtable` through PYTHONPATH, inherited from this process.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
_pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if str(SRC) not in _pythonpath:
    os.environ["PYTHONPATH"] = os.pathsep.join([str(SRC), *_pythonpath])

from confluent_kafka import Producer  # noqa: E402

from streamtable.kafka.admin import ensure_topics  # noqa: E402
from streamtable.kafka.broker import EmbeddedBroker, development_producer_config  # noqa: E402

_counter = itertools.count()


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    from streamtable.kafka.sink import close_producers

    with EmbeddedBroker() as b:
        yield b
        close_producers()  # the sink keeps producers for reuse: drop them while the broker is up


@pytest.fixture(scope="session")
def bootstrap(broker: EmbeddedBroker) -> str:
    return broker.bootstrap_servers


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The SparkSession streamtable itself would create, on local[2], with our Kafka source."""
    from streamtable.runtime.spark.kafka_source import register
    from streamtable.runtime.spark.process.session import spark_session

    os.environ.setdefault("STREAMTABLE_SPARK_LOG_LEVEL", "ERROR")
    session = spark_session(
        "local[2]", "streamtable-tests",
        conf={"spark.ui.enabled": "false", "spark.sql.streaming.stopTimeout": "30s"},
    )
    register(session)
    yield session
    session.stop()


@pytest.fixture
def new_topic(bootstrap: str, request: pytest.FixtureRequest) -> Callable[[int], str]:
    """Create a fresh topic with the given partition count and return its name."""

    def make(partitions: int = 2) -> str:
        base = request.node.name.replace("[", "-").replace("]", "")[:40]
        name = f"{base}-{next(_counter)}-{uuid.uuid4().hex[:6]}"
        ensure_topics(bootstrap, {name: partitions})
        return name

    return make


@pytest.fixture
def produce(bootstrap: str) -> Callable[..., None]:
    """Produce ``(partition, key, value, timestamp, headers)`` tuples in one-record batches.

    One record per batch is the development broker profile: Tansu then reports exact high
    watermarks through ListOffsets, which is what the source reads on real Kafka.
    """

    def do(topic: str, records: list[tuple[int, bytes | None, bytes | None, int, Any]]) -> None:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                **development_producer_config(),
            }
        )
        errors: list[Any] = []
        for part, key, value, ts, headers in records:
            producer.produce(
                topic,
                key=key,
                value=value,
                partition=part,
                timestamp=ts,
                headers=headers,
                on_delivery=lambda err, msg: errors.append(err) if err else None,
            )
        assert producer.flush(30) == 0
        assert not errors, errors

    return do


@pytest.fixture
def read_topic(bootstrap: str) -> Callable[..., dict[int, list[Any]]]:
    """Every record of a topic, per partition, in offset order (reads to the end of the log)."""
    from tests.runtime.spark.kafka_util import read_partitions

    def read(topic: str, partitions: int | None = None,
             timeout: float = 30.0) -> dict[int, list[Any]]:
        return read_partitions(bootstrap, topic, partitions, timeout)

    return read


@pytest.fixture(scope="session")
def registry() -> Iterator[Any]:
    """The development Schema Registry, in this process; ``registry.url`` is its URL."""
    from streamtable.kafka.registry import DevelopmentRegistry

    with DevelopmentRegistry() as r:
        yield r
