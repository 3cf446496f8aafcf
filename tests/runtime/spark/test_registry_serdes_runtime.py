"""Schema Registry serdes on Spark's executors: a topology reading Avro, JSON Schema and Protobuf
records that other producers wrote through confluent-kafka's serializers, transforming them, and
writing registry-encoded output, checked by decoding it with confluent-kafka's deserializers.
The serdes reach the Python workers pickled (registry URL and schema) and make their client
there."""

from __future__ import annotations

import sys
from collections import defaultdict

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark import cloudpickle
from tests.runtime.spark.kafka_util import new_topics, produce, read_all
from tests.serde.registry_messages import PageSummary, PageView
from tests.serde.test_registry_serdes import (
    SUMMARY_AVRO,
    SUMMARY_JSON_SCHEMA,
    VIEW_AVRO,
    VIEW_JSON_SCHEMA,
    VIEWS,
)

from streamtable import StreamsBuilder
from streamtable.serde import AvroSerde, JsonSchemaSerde, ProtobufSerde

pytestmark = pytest.mark.spark
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Spark's workers cannot import it

KEY_AVRO = '"string"'


def _topology(url: str, topics: dict[str, str]):
    b = StreamsBuilder()
    # Avro: page views per user, through a repartition (keys: the default serde, Avro strings)
    (b.stream(topics["avro_in"], value_serde=AvroSerde(VIEW_AVRO, url))
        .group_by(lambda k, v: v["user"])
        .count()
        .to_stream()
        .map_values(lambda k, n: {"user": k, "pages": n})
        .to(topics["avro_out"], value_serde=AvroSerde(SUMMARY_AVRO, url)))
    # JSON Schema: validated on the way in and out
    (b.stream(topics["json_in"], value_serde=JsonSchemaSerde(VIEW_JSON_SCHEMA, url))
        .map_values(lambda v: {"user": v["user"], "pages": len(v["url"])})
        .to(topics["json_out"], value_serde=JsonSchemaSerde(SUMMARY_JSON_SCHEMA, url)))
    # Protobuf: messages in (their class rebuilt on the workers), dicts out
    (b.stream(topics["pb_in"], value_serde=ProtobufSerde(PageView, url))
        .filter(lambda k, v: v.referrer.host == "example.com")
        .map_values(lambda v: {"user": v.user.upper(), "pages": v.seconds})
        .to(topics["pb_out"], value_serde=ProtobufSerde(PageSummary, url)))
    return b.build()


def test_avro_json_schema_and_protobuf_through_spark_executors(spark, bootstrap, registry,
                                                              tmp_path) -> None:
    from streamtable.runtime.spark import StreamsApp

    names = ("avro_in", "avro_out", "json_in", "json_out", "pb_in", "pb_out")
    topics = dict(zip(names, new_topics(bootstrap, 2, *names), strict=True))
    client = SchemaRegistryClient({"url": registry.url})

    def ctx(topic: str, key: bool = False) -> SerializationContext:
        return SerializationContext(topic, MessageField.KEY if key else MessageField.VALUE)

    key_writer = AvroSerializer(client, KEY_AVRO)
    avro, json_writer = AvroSerializer(client, VIEW_AVRO), JSONSerializer(VIEW_JSON_SCHEMA, client)
    pb = ProtobufSerializer(PageView, client)
    produce(bootstrap, topics["avro_in"], [
        (key_writer(u, ctx(topics["avro_in"], True)),
         avro({"user": u, "url": url, "seconds": s}, ctx(topics["avro_in"])))
        for u, url, s in VIEWS])
    produce(bootstrap, topics["json_in"], [
        (key_writer(u, ctx(topics["json_in"], True)),
         json_writer({"user": u, "url": url * 2}, ctx(topics["json_in"])))
        for u, url, _ in VIEWS])
    produce(bootstrap, topics["pb_in"], [
        (key_writer(u, ctx(topics["pb_in"], True)),
         pb(PageView(user=u, url=url, seconds=s,
                     referrer={"host": "example.com" if u == "alice" else "elsewhere"}),
            ctx(topics["pb_in"])))
        for u, url, s in VIEWS])

    config = {"bootstrap.servers": bootstrap, "application.id": f"registry-{topics['avro_in']}",
              "default.key.serde": AvroSerde(KEY_AVRO, registry.url)}
    app = StreamsApp(_topology(registry.url, topics), config=config, state_dir=tmp_path,
                     spark=spark, development_broker=True)
    app.run_until_caught_up(timeout=180)

    reader = SchemaRegistryClient({"url": registry.url})
    keys = AvroDeserializer(reader)

    def decoded(topic: str, values) -> list[tuple[str, object]]:
        return [(keys(m.key(), ctx(topic, True)), values(m.value(), ctx(topic)))
                for m in read_all(bootstrap, topic)]

    counts: dict[str, list[int]] = defaultdict(list)
    for user, summary in decoded(topics["avro_out"], AvroDeserializer(reader)):
        assert summary["user"] == user
        counts[user].append(summary["pages"])
    assert {u: seq[-1] for u, seq in counts.items()} == {"alice": 2, "bob": 1}

    json_out = decoded(topics["json_out"], JSONDeserializer(None, schema_registry_client=reader))
    assert sorted(json_out) == sorted(
        (u, {"user": u, "pages": 2 * len(url)}) for u, url, _ in VIEWS)

    pb_reader = ProtobufDeserializer(PageSummary, {}, schema_registry_client=reader)
    pb_out = [(k, (v.user, v.pages)) for k, v in decoded(topics["pb_out"], pb_reader)]
    assert sorted(pb_out) == [("alice", ("ALICE", 3)), ("alice", ("ALICE", 7))]

    # the executors registered the output schemas under the topics' subjects
    subjects = set(reader.get_subjects())
    for topic in ("avro_out", "json_out", "pb_out"):
        assert {f"{topics[topic]}-key", f"{topics[topic]}-value"} <= subjects
    assert reader.get_latest_version(f"{topics['pb_out']}-value").schema.schema_type == \
        "PROTOBUF"
