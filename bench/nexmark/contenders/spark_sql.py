"""Plain PySpark: each query as Spark SQL over Structured Streaming, in the project's own venv.

The topics are read with streamtable's ``streamtable-kafka`` Python data source (this PySpark has
no Kafka connector; ``bench/contenders/spark_plain.py`` reads the same way), one stream per
topic, the JSON values parsed with ``from_json`` into the views ``bid``, ``auction`` and
``person`` (``ts``: ``dateTime`` as a timestamp, the event time). Each query is the
nexmark/nexmark SQL in Spark's dialect, plus a ``k`` and ``v`` column (the output record's key
and value as JSON); ``foreachBatch`` writes every batch with confluent-kafka, one producer per
partition of the batch. ``Trigger.AvailableNow`` reads the topics to their end and stops:
that is ``caught_up`` (live, the latency mode: the default trigger, until stopped). The
session time zone is UTC (``HOUR``, ``DATE_FORMAT``).

Output modes: the stateless queries and the stream-stream joins (q3, q8, q20, with no
watermark: their state is kept whole, as the SQL's regular joins do) are ``append``; the
aggregations q17 and q18 are ``update`` (each batch writes its changed groups); q11's session
windows are ``complete`` (Spark has no update mode for session windows), and the writer deletes
a session that a merge made disappear. q13 joins the bids with the side input read once as a
static table (the SQL's lookup join).

Not expressible in Structured Streaming:

* q4, q6, q9 (winning bids): an aggregation over a stream-stream join, and q4/q6 an aggregation
  over that aggregation. A join runs only in append mode, where an aggregation needs an
  event-time window closed by a watermark; ``GROUP BY A.id`` has none, and an aggregate that
  changes cannot be retracted from its category (no changelog).
* q5 (hot items) and q7 (highest bid): a window's aggregate joined back with (q5) or compared
  with (q7) another aggregate of the same windows. Chained stateful operators run only in
  append mode, which emits a window once the watermark passes its end; at the end of a bounded
  run no later event moves the watermark past the last windows, so their rows never come.
* q19 (top 10 per auction): ``ROW_NUMBER`` over a non-time partition is not supported on a
  streaming DataFrame.
* q15, q16 (bidding statistics): ``count(distinct ...)`` is not supported on a streaming
  DataFrame.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from bench.nexmark.contenders.peer import (
    AUCTION,
    BID,
    PERSON,
    SIDE_INPUT,
    PeerContender,
    Status,
    key_value,
    linger,
    log,
    parse_args,
)

BID_SCHEMA = ("auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, "
              "dateTime BIGINT, extra STRING")
AUCTION_SCHEMA = ("id BIGINT, itemName STRING, description STRING, initialBid BIGINT, "
                  "reserve BIGINT, dateTime BIGINT, expires BIGINT, seller BIGINT, "
                  "category BIGINT, extra STRING")
PERSON_SCHEMA = ("id BIGINT, name STRING, emailAddress STRING, creditCard STRING, city STRING, "
                 "state STRING, dateTime BIGINT, extra STRING")
VIEWS = {"bid": (BID, BID_SCHEMA), "auction": (AUCTION, AUCTION_SCHEMA),
         "person": (PERSON, PERSON_SCHEMA)}
#: to_json keeping null fields (q22's missing directories are JSON nulls)
NULLS = "map('ignoreNullFields', 'false')"

#: query -> (views it reads, output mode, SQL with the columns k and v)
QUERIES: dict[str, tuple[tuple[str, ...], str, str]] = {
    "q0": (("bid",), "append", """
        SELECT CAST(auction AS STRING) AS k,
               to_json(named_struct('auction', auction, 'bidder', bidder, 'price', price,
                                    'dateTime', dateTime, 'extra', extra)) AS v
        FROM bid"""),
    "q1": (("bid",), "append", """
        SELECT CAST(auction AS STRING) AS k,
               to_json(named_struct('auction', auction, 'bidder', bidder,
                                    'price', 0.908 * price, 'dateTime', dateTime,
                                    'extra', extra)) AS v
        FROM bid"""),
    "q2": (("bid",), "append", """
        SELECT CAST(auction AS STRING) AS k,
               to_json(named_struct('auction', auction, 'price', price)) AS v
        FROM bid WHERE auction % 123 = 0"""),
    "q3": (("auction", "person"), "append", """
        SELECT CAST(A.id AS STRING) AS k,
               to_json(named_struct('name', P.name, 'city', P.city, 'state', P.state,
                                    'id', A.id)) AS v
        FROM auction A INNER JOIN person P ON A.seller = P.id
        WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')"""),
    # the SQL's GROUP BYs only remove duplicates (a person is one row; a seller's auctions in
    # one window are one row): a seller with two auctions in a window writes the same record
    # twice here, the same table
    "q8": (("person", "auction"), "append", """
        SELECT to_json(array(P.id, unix_millis(P.w.start))) AS k,
               to_json(named_struct('id', P.id, 'name', P.name,
                                    'starttime', unix_millis(P.w.start))) AS v
        FROM (SELECT id, name, window(ts, '10 seconds') AS w FROM person) P
        JOIN (SELECT seller, window(ts, '10 seconds') AS w FROM auction) A
        ON P.id = A.seller AND P.w.start = A.w.start AND P.w.end = A.w.end"""),
    "q11": (("bid",), "complete", """
        SELECT to_json(array(bidder, unix_millis(s.start))) AS k,
               to_json(named_struct('bidder', bidder, 'bid_count', bid_count,
                                    'starttime', unix_millis(s.start),
                                    'endtime', unix_millis(s.end))) AS v
        FROM (SELECT bidder, session_window(ts, '10 seconds') AS s, count(*) AS bid_count
              FROM bid GROUP BY bidder, session_window(ts, '10 seconds'))"""),
    "q13": (("bid",), "append", """
        SELECT CAST(B.auction AS STRING) AS k,
               to_json(named_struct('auction', B.auction, 'bidder', B.bidder,
                                    'price', B.price, 'dateTime', B.dateTime,
                                    'value', S.value)) AS v
        FROM bid B JOIN side_input S ON B.auction % 10000 = S.key"""),
    "q14": (("bid",), "append", """
        SELECT CAST(auction AS STRING) AS k,
               to_json(named_struct(
                 'auction', auction, 'bidder', bidder, 'price', 0.908 * price,
                 'bidTimeType', CASE
                    WHEN HOUR(ts) >= 8 AND HOUR(ts) <= 18 THEN 'dayTime'
                    WHEN HOUR(ts) <= 6 OR HOUR(ts) >= 20 THEN 'nightTime'
                    ELSE 'otherTime' END,
                 'dateTime', dateTime, 'extra', extra,
                 'c_counts', length(extra) - length(replace(extra, 'c', '')))) AS v
        FROM bid WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000"""),
    "q17": (("bid",), "update", """
        SELECT concat('[', auction, ',"', day, '"]') AS k,
               to_json(named_struct(
                 'auction', auction, 'day', day, 'total_bids', total_bids,
                 'rank1_bids', rank1_bids, 'rank2_bids', rank2_bids,
                 'rank3_bids', rank3_bids, 'min_price', min_price, 'max_price', max_price,
                 'avg_price', avg_price, 'sum_price', sum_price)) AS v
        FROM (SELECT auction, date_format(ts, 'yyyy-MM-dd') AS day, count(*) AS total_bids,
                     count(*) FILTER (WHERE price < 10000) AS rank1_bids,
                     count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
                     count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
                     min(price) AS min_price, max(price) AS max_price,
                     sum(price) DIV count(*) AS avg_price, sum(price) AS sum_price
              FROM bid GROUP BY auction, date_format(ts, 'yyyy-MM-dd'))"""),
    # ROW_NUMBER() ... ORDER BY dateTime DESC = 1, as Spark can say it on a stream: max_by
    "q18": (("bid",), "update", """
        SELECT to_json(array(bidder, auction)) AS k, to_json(last) AS v
        FROM (SELECT bidder, auction,
                     max_by(named_struct('auction', auction, 'bidder', bidder,
                                         'price', price, 'channel', channel, 'url', url,
                                         'dateTime', dateTime, 'extra', extra),
                            dateTime) AS last
              FROM bid GROUP BY bidder, auction)"""),
    "q20": (("bid", "auction"), "append", """
        SELECT CAST(B.auction AS STRING) AS k,
               to_json(named_struct(
                 'auction', B.auction, 'bidder', B.bidder, 'price', B.price,
                 'channel', B.channel, 'url', B.url, 'bid_dateTime', B.dateTime,
                 'bid_extra', B.extra, 'itemName', A.itemName,
                 'description', A.description, 'initialBid', A.initialBid,
                 'reserve', A.reserve, 'auction_dateTime', A.dateTime,
                 'expires', A.expires, 'seller', A.seller, 'category', A.category,
                 'auction_extra', A.extra)) AS v
        FROM bid B INNER JOIN auction A ON B.auction = A.id
        WHERE A.category = 10"""),
    # Spark's regexp_extract gives '' where Flink's REGEXP_EXTRACT gives NULL (no match):
    # the RLIKE says which
    "q21": (("bid",), "append", """
        SELECT CAST(auction AS STRING) AS k,
               to_json(named_struct('auction', auction, 'bidder', bidder, 'price', price,
                                    'channel', channel, 'channel_id', channel_id)) AS v
        FROM (SELECT auction, bidder, price, channel,
                     CASE WHEN lower(channel) = 'apple' THEN '0'
                          WHEN lower(channel) = 'google' THEN '1'
                          WHEN lower(channel) = 'facebook' THEN '2'
                          WHEN lower(channel) = 'baidu' THEN '3'
                          WHEN url RLIKE '(&|^)channel_id='
                            THEN regexp_extract(url, '(&|^)channel_id=([^&]*)', 2)
                     END AS channel_id
              FROM bid)
        WHERE channel_id IS NOT NULL"""),
    # SPLIT_INDEX(url, '/', i): the (i+1)-th piece or NULL
    "q22": (("bid",), "append", f"""
        SELECT CAST(auction AS STRING) AS k,
               to_json(named_struct('auction', auction, 'bidder', bidder, 'price', price,
                                    'channel', channel,
                                    'dir1', try_element_at(split(url, '/'), 4),
                                    'dir2', try_element_at(split(url, '/'), 5),
                                    'dir3', try_element_at(split(url, '/'), 6)),
                       {NULLS}) AS v
        FROM bid"""),
}


def _produce_partition(bootstrap: str, topic: str, rows: Any) -> None:
    """Write one partition of a batch (runs in a Python worker)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                         "linger.ms": 20})
    for row in rows:
        while True:
            try:
                producer.produce(topic, key=row.k.encode(),
                                 value=None if row.v is None else row.v.encode())
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def _side_input(spark: Any, bootstrap: str, count: int) -> Any:
    """q13's side input as a static table ``(key, value)``, read whole from its topic."""
    import json

    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    meta = consumer.list_topics(SIDE_INPUT, timeout=30).topics[SIDE_INPUT]
    consumer.assign([TopicPartition(SIDE_INPUT, p, OFFSET_BEGINNING) for p in meta.partitions])
    rows: dict[int, str] = {}
    deadline = time.time() + 120
    while len(rows) < count and time.time() < deadline:
        for m in consumer.consume(10_000, 1.0):
            if m.error() is None:
                key, value = key_value(m)
                rows[json.loads(key)] = json.loads(value)
    consumer.close()
    if len(rows) < count:
        raise RuntimeError(f"read {len(rows)} of the {count} records of {SIDE_INPUT}")
    return spark.createDataFrame(sorted(rows.items()), "key BIGINT, value STRING")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    status = Status(args.status)
    if args.query not in QUERIES:
        log(f"spark-sql has no {args.query}")
        return 2
    views, mode, sql = QUERIES[args.query]
    from pyspark.sql import functions as F

    from streamtable.kafka.broker import development_source_options
    from streamtable.runtime.spark.kafka_source import register
    from streamtable.runtime.spark.process.session import spark_session

    t0 = time.time()
    conf = {"spark.sql.shuffle.partitions": args.settings.get("shuffle.partitions", "2"),
            "spark.sql.session.timeZone": "UTC"}
    # the JVM does this contender's work: it keeps the JVM's default compilers
    spark = spark_session(None, f"spark-sql-{args.run_id}", conf=conf, quick_jit=False)
    register(spark)
    from bench.nexmark.contenders.spark_progress import InputProgress

    spark.streams.addListener(InputProgress(status, args.input_counts))
    status.event("engine_ready", seconds=time.time() - t0)
    status.event("started")
    for view in views:
        topic, schema = VIEWS[view]
        reader = (spark.readStream.format("streamtable-kafka")
                  .option("bootstrap.servers", args.bootstrap).option("topics", topic)
                  .option("max.records.per.batch",
                          args.settings.get("max.records.per.batch", "500000")))
        for k, v in development_source_options().items():
            reader = reader.option(k, v)
        parsed = (reader.load()
                  .select(F.from_json(F.col("value").cast("string"), schema).alias("e"))
                  .select("e.*")
                  .withColumn("ts", F.timestamp_millis(F.col("dateTime"))))
        parsed.createOrReplaceTempView(view)
    if args.query == "q13":
        _side_input(spark, args.bootstrap,
                    args.input_counts[SIDE_INPUT]).createOrReplaceTempView("side_input")
    result = spark.sql(sql)
    bootstrap, out = args.bootstrap, args.output
    batches = [0]
    written: set[str] = set()

    def write(batch_df: Any, batch_id: int) -> None:
        batches[0] += 1
        if mode != "complete":
            batch_df.foreachPartition(lambda rows: _produce_partition(bootstrap, out, rows))
            return
        # the whole result table: a session merged into another is gone from it; delete it
        rows = batch_df.collect()
        now = {r.k for r in rows}

        class Gone:
            def __init__(self, k: str) -> None:
                self.k, self.v = k, None

        _produce_partition(bootstrap, out, [*rows, *(Gone(k) for k in written - now)])
        written.clear()
        written.update(now)

    stream = (result.writeStream.outputMode(mode)
              .option("checkpointLocation", os.path.join(args.state_dir, "checkpoint"))
              .foreachBatch(write))
    if args.live:  # the latency mode: the next batch as soon as one ends, until stopped
        stream.start().awaitTermination()
        return 0
    query = stream.trigger(availableNow=True).start()
    query.awaitTermination()
    status.event("caught_up", batches=batches[0])
    log(f"spark-sql {args.query}: caught up after {batches[0]} batches")
    linger()
    spark.stop()
    return 0


CONTENDER = PeerContender("spark-sql", None, "bench.nexmark.contenders.spark_sql",
                          frozenset(QUERIES))

if __name__ == "__main__":
    sys.exit(main())
