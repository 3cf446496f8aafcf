"""The Spark runtime: a topology as one Spark Structured Streaming query.

The only part of streamtable that imports PySpark: the query and its stages, the
``streamtable-kafka`` source that reads Kafka (``kafka_source``), and the SparkSession, its JVM
and the Python processes Spark starts.

Names are imported when first used: Spark's Python processes that only unpickle the Kafka source
or run a stage do not import the application's driver side.

>>> from streamtable.runtime.spark import StreamsApp                   # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamtable.kafka.output import KafkaOutput
    from streamtable.runtime.spark.app import StreamsApp

_EXPORTS = {
    "KafkaOutput": "streamtable.kafka.output",
    "StreamsApp": "streamtable.runtime.spark.app",
}

__all__ = ["KafkaOutput", "StreamsApp"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
