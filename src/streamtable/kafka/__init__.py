"""Kafka-protocol I/O for the Spark runtime.

* :mod:`streamtable.kafka.broker` — :class:`EmbeddedBroker`, an in-memory development broker.
* :mod:`streamtable.kafka.admin` — :func:`ensure_topics`, :func:`partition_counts`,
  :func:`delete_topics`.
* :mod:`streamtable.kafka.ranges` — offset ranges and reading them (:class:`KafkaSourceError`).
* :mod:`streamtable.kafka.sink` — :func:`produce_rows`, exactly-once-per-batch producing.
* :mod:`streamtable.kafka.batch_cut` — where a micro-batch of a backlog ends on each partition:
  at one timestamp (:func:`~streamtable.kafka.batch_cut.cut_at_timestamp`), with
  :mod:`streamtable.kafka.timestamps` finding where each partition reaches it.

None of it imports PySpark: the ``streamtable-kafka`` Spark streaming source that reads Kafka
is part of the Spark runtime (:mod:`streamtable.runtime.spark.kafka_source`). Names are
imported lazily.

>>> from streamtable.kafka import EmbeddedBroker, ensure_topics, produce_rows   # doctest: +SKIP
>>> with EmbeddedBroker() as broker:                                            # doctest: +SKIP
...     ensure_topics(broker.bootstrap_servers, {"in": 2, "out": 2})
"""

from __future__ import annotations

from streamtable._lazy import lazy_exports

_EXPORTS = {
    # broker
    "EmbeddedBroker": "broker",
    "BrokerStartError": "broker",
    "tansu_binary": "broker",
    "free_port": "broker",
    "run_broker_forever": "broker",
    "DEVELOPMENT_BROKER_PROFILE_OPTION": "broker",
    "development_producer_config": "broker",
    "development_source_options": "broker",
    # admin
    "ensure_topics": "admin",
    "partition_counts": "admin",
    "delete_topics": "admin",
    "list_topic_names": "admin",
    "KafkaAdminError": "admin",
    "TopicNotFoundError": "admin",
    # ranges
    "KafkaSourceError": "ranges",
    # sink
    "produce_rows": "sink",
    "kafka_batch_writer": "sink",
    "SinkRecord": "sink",
    "ProduceResult": "sink",
    "KafkaSinkError": "sink",
    "KafkaDeliveryError": "sink",
    "default_partition": "sink",
    "murmur2": "sink",
    "close_producers": "sink",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(
    globals(), {name: f"{__name__}.{module}" for name, module in _EXPORTS.items()})
