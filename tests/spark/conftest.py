from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def spark():
    from streamtable.runtime.spark.session import spark_session

    os.environ.setdefault("STREAMTABLE_SPARK_LOG_LEVEL", "ERROR")
    return spark_session("local[2]", "streamtable-tests", conf={"spark.ui.enabled": "false"})


@pytest.fixture(scope="session")
def kafka():
    """A real Kafka-protocol broker (the embedded development broker)."""
    from streamtable.kafka.broker import EmbeddedBroker

    with EmbeddedBroker() as broker:
        yield broker.bootstrap_servers
