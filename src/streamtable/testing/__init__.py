"""Run a topology in-process, without Spark or a broker: the semantic reference."""

from streamtable.testing.driver import (
    TestInputTopic,
    TestOutputTopic,
    TestRecord,
    TopologyTestDriver,
)

__all__ = ["TestInputTopic", "TestOutputTopic", "TestRecord", "TopologyTestDriver"]
