"""Plain PySpark Structured Streaming, the closest it gets to word count as a table (W1 only).

Source: streamtable's ``streamtable-kafka`` Python data source (this PySpark has no Kafka
connector), with the development-broker option. Then lower/split/explode/groupBy().count() in
update mode, and ``foreachBatch`` producing each batch's updated counts with confluent-kafka.
State lives in Spark's default (HDFS-backed) state store; ``spark.sql.shuffle.partitions=2`` (one
state partition per input partition, like Kafka Streams tasks).

W2 is not possible: a streaming aggregation only ever adds input rows; it cannot subtract a
position's previous value from its previous client (no retractions / changelog semantics).
"""

from __future__ import annotations

import logging
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import Status, log, parse_args, stop_event_on_signals  # noqa: E402


def extra(p):  # type: ignore[no-untyped-def]
    p.add_argument("--max-records-per-batch", type=int, default=500_000)
    p.add_argument("--trigger-ms", type=int, default=100, help="trigger interval, latency mode")
    p.add_argument("--shuffle-partitions", type=int, default=2)


def main() -> int:
    args = parse_args(extra=extra)
    if args.workload != "w1":
        log("plain Spark cannot do W2 (no retractions)")
        return 2
    stop = stop_event_on_signals()
    status = Status(args.status)
    logging.basicConfig(level=logging.WARNING)
    import time

    t0 = time.time()
    from confluent_kafka import Producer
    from pyspark.sql import functions as F

    from streamtable.kafka.broker import development_source_options
    from streamtable.runtime.spark.kafka_source import register
    from streamtable.runtime.spark.process.session import spark_session

    # the JVM does this contender's work: it keeps the JVM's default compilers
    spark = spark_session(None, f"plain-{args.app_id}",
                          conf={"spark.sql.shuffle.partitions": str(args.shuffle_partitions)},
                          quick_jit=False)
    register(spark)
    status.event("engine_ready", seconds=time.time() - t0)
    reader = (spark.readStream.format("streamtable-kafka")
              .option("bootstrap.servers", args.bootstrap)
              .option("topics", args.input)
              .option("max.records.per.batch", str(args.max_records_per_batch)))
    for k, v in development_source_options().items():
        reader = reader.option(k, v)
    lines = reader.load()
    words = (lines
             .select(F.explode(F.split(F.lower(F.col("value").cast("string")), r"\W+"))
                     .alias("word"))
             .where(F.col("word") != ""))
    counts = words.groupBy("word").count()
    producer = Producer({"bootstrap.servers": args.bootstrap, "partitioner": "murmur2_random",
                         "linger.ms": 5})
    pack = struct.Struct(">q").pack
    out = args.output

    def write(batch_df, batch_id):  # type: ignore[no-untyped-def]
        for row in batch_df.collect():
            while True:
                try:
                    producer.produce(out, key=row[0].encode(), value=pack(row[1]))
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.flush(60)

    writer = (counts.writeStream.outputMode("update")
              .option("checkpointLocation", os.path.join(args.state_dir, "checkpoint"))
              .foreachBatch(write))
    if args.mode == "throughput":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{args.trigger_ms} milliseconds")
    status.event("started")
    query = writer.start()
    if args.mode == "throughput":
        query.awaitTermination()
        status.event("caught_up")
        return 0
    while not stop.wait(0.5):
        if not query.isActive:
            log(f"query stopped: {query.exception()}")
            return 1
    query.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
