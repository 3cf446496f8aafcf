"""streamtable: Kafka Streams' stream-table model for Python, on Apache Spark.

>>> from streamtable import StreamsBuilder, TopologyTestDriver
>>> builder = StreamsBuilder()
>>> positions = builder.table("share-holders", materialized="share-holder-store")
>>> us_holders = (positions
...     .filter(lambda key, p: p["exchange"] == "NASDAQ")
...     .group_by(lambda key, p: (p["client"], {p["id"]}))
...     .reduce(adder=lambda a, b: a | b,
...             subtractor=lambda a, b: (a - b) or None,
...             materialized="us-share-holders"))
>>> driver = TopologyTestDriver(builder.build())
>>> topic = driver.create_input_topic("share-holders")
>>> topic.pipe_input(1, {"id": 1, "client": "client1", "ticker": "AAPL", "exchange": "NASDAQ"})
>>> driver.get_key_value_store("us-share-holders").get("client1")
{1}
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamtable._lazy import lazy_exports

if TYPE_CHECKING:
    from streamtable.config import StreamsConfig
    from streamtable.dsl import (
        BranchedKStream,
        KGroupedStream,
        KGroupedTable,
        KStream,
        KTable,
        Materialized,
        StreamsBuilder,
    )
    from streamtable.dsl.global_table import GlobalKTable
    from streamtable.dsl.joins import Joined, StreamJoined
    from streamtable.dsl.stores import StoreBuilder, Stores
    from streamtable.dsl.topology_builder import TopologyBuilder
    from streamtable.errors import (
        ApplicationFailedError,
        DeserializationError,
        ProcessingError,
        RecordError,
        StoreNotReadyError,
        StreamsError,
        TopologyError,
    )
    from streamtable.processors.api import (
        Change,
        Processor,
        ProcessorContext,
        PunctuationType,
        Record,
    )
    from streamtable.runtime.spark import StreamsApp
    from streamtable.state.timestamped import ValueAndTimestamp, ValueTimestampHeaders
    from streamtable.state.versioned import VersionedKeyValueStore, VersionedRecord
    from streamtable.state.window_store import WindowStore
    from streamtable.testing import TestInputTopic, TestOutputTopic, TopologyTestDriver
    from streamtable.topology import Topology
    from streamtable.windowing import (
        BufferConfig,
        EmitStrategy,
        JoinWindows,
        SessionWindows,
        SlidingWindows,
        Suppressed,
        TimeWindows,
        Window,
        Windowed,
        Windows,
    )

# Names are imported when first used: Spark's Python processes that only unpickle the Kafka
# source or run a stage do not pay for the DSL, the test driver and their dependencies, and
# ``import streamtable`` does not import PySpark until ``StreamsApp`` is used.
_EXPORTS = {
    "StreamsConfig": "streamtable.config",
    "BranchedKStream": "streamtable.dsl",
    "KGroupedStream": "streamtable.dsl",
    "KGroupedTable": "streamtable.dsl",
    "KStream": "streamtable.dsl",
    "KTable": "streamtable.dsl",
    "Materialized": "streamtable.dsl",
    "StreamsBuilder": "streamtable.dsl",
    "GlobalKTable": "streamtable.dsl.global_table",
    "StreamJoined": "streamtable.dsl.joins",
    "Joined": "streamtable.dsl.joins",
    "StoreBuilder": "streamtable.dsl.stores",
    "Stores": "streamtable.dsl.stores",
    "TopologyBuilder": "streamtable.dsl.topology_builder",
    "ApplicationFailedError": "streamtable.errors",
    "DeserializationError": "streamtable.errors",
    "ProcessingError": "streamtable.errors",
    "RecordError": "streamtable.errors",
    "StoreNotReadyError": "streamtable.errors",
    "StreamsError": "streamtable.errors",
    "TopologyError": "streamtable.errors",
    "Change": "streamtable.processors.api",
    "Processor": "streamtable.processors.api",
    "ProcessorContext": "streamtable.processors.api",
    "PunctuationType": "streamtable.processors.api",
    "Record": "streamtable.processors.api",
    "SlidingWindows": "streamtable.windowing",
    "JoinWindows": "streamtable.windowing",
    "BufferConfig": "streamtable.windowing",
    "EmitStrategy": "streamtable.windowing",
    "Suppressed": "streamtable.windowing",
    "SessionWindows": "streamtable.windowing",
    "TimeWindows": "streamtable.windowing",
    "Windowed": "streamtable.windowing",
    "Window": "streamtable.windowing",
    "Windows": "streamtable.windowing",
    "StreamsApp": "streamtable.runtime.spark",
    "ValueAndTimestamp": "streamtable.state.timestamped",
    "ValueTimestampHeaders": "streamtable.state.timestamped",
    "VersionedKeyValueStore": "streamtable.state.versioned",
    "VersionedRecord": "streamtable.state.versioned",
    "WindowStore": "streamtable.state.window_store",
    "TestInputTopic": "streamtable.testing",
    "TestOutputTopic": "streamtable.testing",
    "TopologyTestDriver": "streamtable.testing",
    "Topology": "streamtable.topology",
}

__version__ = "0.1.0"

__all__ = [
    "ApplicationFailedError",
    "BranchedKStream",
    "Change",
    "DeserializationError",
    "GlobalKTable",
    "JoinWindows",
    "Joined",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "Materialized",
    "ProcessingError",
    "Processor",
    "ProcessorContext",
    "PunctuationType",
    "Record",
    "RecordError",
    "StoreNotReadyError",
    "StreamJoined",
    "StoreBuilder",
    "Stores",
    "StreamsBuilder",
    "StreamsConfig",
    "StreamsError",
    "StreamsApp",
    "TestInputTopic",
    "TestOutputTopic",
    "BufferConfig",
    "EmitStrategy",
    "SessionWindows",
    "SlidingWindows",
    "Suppressed",
    "TimeWindows",
    "Window",
    "Windowed",
    "Windows",
    "WindowStore",
    "ValueAndTimestamp",
    "ValueTimestampHeaders",
    "VersionedKeyValueStore",
    "VersionedRecord",
    "Topology",
    "TopologyBuilder",
    "TopologyError",
    "TopologyTestDriver",
]


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
