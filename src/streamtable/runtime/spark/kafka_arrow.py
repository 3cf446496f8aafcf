"""The records of one offset range as Arrow record batches of the ``streamtable-kafka``
source's columns (``read.mode=records``), made where Spark reads the partition.

>>> batches = read_partition(consumer_conf={"bootstrap.servers": "localhost:9092"},
...     topic="orders", partition=0, start=0, end=100, schema=KAFKA_SCHEMA,
...     arrow_batch_size=10_000, read_timeout_s=120)                 # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.types import StructType

from streamtable.kafka.ranges import consume_range

__all__ = ["read_partition"]


def read_partition(
    *,
    consumer_conf: dict[str, Any],
    topic: str,
    partition: int,
    start: int,
    end: int,
    schema: StructType,
    arrow_batch_size: int,
    read_timeout_s: float,
) -> Iterator[Any]:
    """Yield pyarrow RecordBatches with the records of ``topic[partition]`` in ``[start, end)``."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    headers_type = arrow_schema.field("headers").type
    header_struct = headers_type.value_type
    for messages in consume_range(consumer_conf, topic, partition, start, end,
                                  arrow_batch_size, read_timeout_s):
        n = len(messages)
        timestamps: list[int | None] = []
        header_offsets: list[int] = [0]
        header_keys: list[str] = []
        header_values: list[bytes | None] = []
        for msg in messages:
            ts_type, ts = msg.timestamp()
            timestamps.append(ts if ts_type and ts >= 0 else None)
            hdrs = msg.headers()
            if hdrs:
                for hk, hv in hdrs:
                    header_keys.append(hk)
                    header_values.append(hv)
            header_offsets.append(len(header_keys))
        header_items = pa.StructArray.from_arrays(
            [pa.array(header_keys, pa.string()), pa.array(header_values, pa.binary())],
            fields=list(header_struct),
        )
        headers = pa.ListArray.from_arrays(
            pa.array(header_offsets, pa.int32()), header_items, type=headers_type
        )
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([topic] * n, pa.string()),
                pa.array([partition] * n, pa.int32()),
                pa.array([m.offset() for m in messages], pa.int64()),
                pa.array(timestamps, pa.int64()),
                pa.array([m.key() for m in messages], pa.binary()),
                pa.array([m.value() for m in messages], pa.binary()),
                headers,
            ],
            schema=arrow_schema,
        )
