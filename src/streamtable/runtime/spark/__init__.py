"""The Spark runtime: a topology as one Spark Structured Streaming query.

The only part of streamtable that imports PySpark: the query and its stages, the
``streamtable-kafka`` source that reads Kafka (``kafka_source``), and the SparkSession, its JVM
and the Python processes Spark starts.

Names are imported when first used: Spark's Python processes that only unpickle the Kafka source
or run a stage do not import the application's driver side.

>>> from streamtable.runtime.spark import StreamsApp                   # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamtable._lazy import lazy_exports

if TYPE_CHECKING:
    from streamtable.kafka.output import KafkaOutput
    from streamtable.runtime.spark.app import StreamsApp

_EXPORTS = {
    "KafkaOutput": "streamtable.kafka.output",
    "StreamsApp": "streamtable.runtime.spark.app",
}

__all__ = ["KafkaOutput", "StreamsApp"]


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
