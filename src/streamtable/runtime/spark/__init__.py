"""The Spark runtime: a topology as one Spark Structured Streaming query."""

from streamtable.runtime.spark.app import KafkaOutput, StreamsApp

__all__ = ["KafkaOutput", "StreamsApp"]
