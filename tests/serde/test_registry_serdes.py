"""Schema Registry serdes on the test driver, end to end through confluent-kafka's own client
and the development registry: Avro, JSON Schema and Protobuf in Confluent's wire format, as
per-topic and default serdes, keys and values, and copies made for other processes."""

from __future__ import annotations

import json
import pickle
import struct
import uuid

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import json_format
from tests.serde.registry_messages import PageSummary, PageView

from streamtable import StreamsBuilder, TopologyTestDriver
from streamtable.errors import DeserializationError, ProcessingError
from streamtable.serde import BYTES, STRING, AvroSerde, JsonSchemaSerde, ProtobufSerde

VIEW_AVRO = json.dumps({"type": "record", "name": "PageView", "namespace": "shop", "fields": [
    {"name": "user", "type": "string"}, {"name": "url", "type": "string"},
    {"name": "seconds", "type": "long"}]})
SUMMARY_AVRO = json.dumps({"type": "record", "name": "PageSummary", "namespace": "shop",
                           "fields": [{"name": "user", "type": "string"},
                                      {"name": "pages", "type": "long"}]})
SUMMARY_JSON_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "PageSummary",
    "type": "object", "properties": {"user": {"type": "string"}, "pages": {"type": "integer"}},
    "required": ["user", "pages"], "additionalProperties": False})
VIEW_JSON_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "PageView", "type": "object",
    "properties": {"user": {"type": "string"}, "url": {"type": "string"}},
    "required": ["user", "url"]})
VIEWS = [("alice", "/a", 3), ("bob", "/b", 5), ("alice", "/c", 7)]


def _topics(*names: str) -> list[str]:
    suffix = uuid.uuid4().hex[:6]
    return [f"{n}-{suffix}" for n in names]


def _value(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def _frame(data: bytes) -> tuple[int, int]:
    """(magic byte, schema id) of Confluent's wire format."""
    return data[0], struct.unpack(">I", data[1:5])[0]


def _summaries(builder: StreamsBuilder, source: str, value_serde, out: str, out_serde,
               user=lambda v: v["user"]) -> None:
    """Page views per user, as {"user", "pages"} summaries on ``out``."""
    (builder.stream(source, key_serde=STRING, value_serde=value_serde)
        .group_by(lambda k, v: user(v), key_serde=STRING)
        .count()
        .to_stream()
        .map_values(lambda k, n: {"user": k, "pages": n})
        .to(out, key_serde=STRING, value_serde=out_serde))


def test_avro_values_round_trip_through_the_registry(registry) -> None:
    src, out = _topics("views", "summaries")
    builder = StreamsBuilder()
    _summaries(builder, src, AvroSerde(VIEW_AVRO, registry.url), out,
               AvroSerde(SUMMARY_AVRO, registry.url))
    client = SchemaRegistryClient({"url": registry.url})
    writer = AvroSerializer(client, VIEW_AVRO)   # a producer of another application
    with TopologyTestDriver(builder.build()) as driver:
        views = driver.create_input_topic(src, key_serde=STRING, value_serde=BYTES)
        for user, url, seconds in VIEWS:
            views.pipe_input(user, writer({"user": user, "url": url, "seconds": seconds},
                                          _value(src)))
        raw = driver.create_output_topic(out, key_serde=STRING, value_serde=BYTES)
        records = raw.read_key_values()

    reader = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    assert [(k, reader(v, _value(out))) for k, v in records] == [
        ("alice", {"user": "alice", "pages": 1}), ("bob", {"user": "bob", "pages": 1}),
        ("alice", {"user": "alice", "pages": 2})]
    registered = client.get_latest_version(f"{out}-value")
    assert {_frame(v) for _, v in records} == {(0, registered.schema_id)}
    assert json.loads(registered.schema.schema_str)["name"] == "PageSummary"
    assert {s for s in client.get_subjects() if s.startswith((src, out))} == {
        f"{src}-value", f"{out}-value"}


def test_default_serdes_register_keys_under_the_key_subject(registry) -> None:
    src, out = _topics("users", "active")
    key_schema = '"string"'
    config = {"default.key.serde": AvroSerde(key_schema, registry.url),
              "default.value.serde": AvroSerde(VIEW_AVRO, registry.url)}
    builder = StreamsBuilder()
    builder.stream(src).filter(lambda k, v: v["seconds"] > 4).to(out)
    with TopologyTestDriver(builder.build(), config=config) as driver:
        views = driver.create_input_topic(src)   # the application's default serdes
        for user, url, seconds in VIEWS:
            views.pipe_input(user, {"user": user, "url": url, "seconds": seconds})
        raw = driver.create_output_topic(out, key_serde=BYTES, value_serde=BYTES)
        records = raw.read_key_values()
        decoded = driver.create_output_topic(out).read_key_values()

    assert decoded == [("bob", {"user": "bob", "url": "/b", "seconds": 5}),
                       ("alice", {"user": "alice", "url": "/c", "seconds": 7})]
    client = SchemaRegistryClient({"url": registry.url})
    key_id = client.get_latest_version(f"{out}-key").schema_id
    value_id = client.get_latest_version(f"{out}-value").schema_id
    # one schema, one id, in every subject that uses it
    assert client.get_latest_version(f"{src}-key").schema_id == key_id != value_id
    assert {(_frame(k), _frame(v)) for k, v in records} == {((0, key_id), (0, value_id))}
    key_reader = AvroDeserializer(client)
    assert key_reader(records[0][0], SerializationContext(out, MessageField.KEY)) == "bob"


def test_json_schema_values_round_trip_and_are_validated(registry) -> None:
    src, out = _topics("json-views", "json-summaries")
    builder = StreamsBuilder()
    _summaries(builder, src, JsonSchemaSerde(VIEW_JSON_SCHEMA, registry.url), out,
               JsonSchemaSerde(SUMMARY_JSON_SCHEMA, registry.url))
    with TopologyTestDriver(builder.build()) as driver:
        views = driver.create_input_topic(src, key_serde=STRING,
                                          value_serde=JsonSchemaSerde(VIEW_JSON_SCHEMA,
                                                                      registry.url))
        for user, url, _ in VIEWS:
            views.pipe_input(user, {"user": user, "url": url})
        records = driver.create_output_topic(out, key_serde=STRING,
                                             value_serde=BYTES).read_key_values()
        with pytest.raises(Exception, match="'url' is a required property"):
            views.pipe_input("carol", {"user": "carol"})   # the input topic's serde checks it

    reader = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient(
        {"url": registry.url}))
    assert [reader(v, _value(out)) for _, v in records] == [
        {"user": "alice", "pages": 1}, {"user": "bob", "pages": 1},
        {"user": "alice", "pages": 2}]
    client = SchemaRegistryClient({"url": registry.url})
    assert client.get_latest_version(f"{out}-value").schema.schema_type == "JSON"
    assert {_frame(v)[0] for _, v in records} == {0}


def test_a_value_the_output_schema_refuses_names_the_sink(registry) -> None:
    src, out = _topics("loose", "strict")
    builder = StreamsBuilder()
    (builder.stream(src, key_serde=STRING)
        .to(out, key_serde=STRING, value_serde=JsonSchemaSerde(SUMMARY_JSON_SCHEMA,
                                                               registry.url)))
    with TopologyTestDriver(builder.build()) as driver:
        topic = driver.create_input_topic(src, key_serde=STRING)
        with pytest.raises(ProcessingError, match=f"cannot encode record for topic '{out}'"):
            topic.pipe_input("alice", {"user": "alice", "pages": "many"})


def test_protobuf_values_round_trip_with_their_message_indexes(registry) -> None:
    src, out = _topics("pb-views", "pb-summaries")
    builder = StreamsBuilder()
    _summaries(builder, src, ProtobufSerde(PageView, registry.url), out,
               ProtobufSerde(PageSummary, registry.url), user=lambda v: v.user)
    with TopologyTestDriver(builder.build()) as driver:
        views = driver.create_input_topic(src, key_serde=STRING,
                                          value_serde=ProtobufSerde(PageView, registry.url))
        for user, url, seconds in VIEWS:
            views.pipe_input(user, PageView(user=user, url=url, seconds=seconds,
                                            referrer={"host": "example.com"}))
        records = driver.create_output_topic(out, key_serde=STRING,
                                             value_serde=BYTES).read_key_values()
        typed = driver.create_output_topic(out, key_serde=STRING,
                                           value_serde=ProtobufSerde(PageSummary, registry.url))
        assert [v.pages for v in typed.read_values()] == [1, 1, 2]

    reader = ProtobufDeserializer(PageSummary, {}, schema_registry_client=SchemaRegistryClient(
        {"url": registry.url}))
    assert [json_format.MessageToDict(reader(v, _value(out))) for _, v in records] == [
        {"user": "alice", "pages": "1"}, {"user": "bob", "pages": "1"},
        {"user": "alice", "pages": "2"}]
    # PageSummary is the file's third message: the index array [2], as zigzag varints
    assert {v[5:7] for _, v in records} == {b"\x02\x04"}
    serde = ProtobufSerde(PageView, registry.url)
    data = serde.serialize(src, PageView(user="x"))
    assert data is not None and data[5:7] == b"\x02\x02"   # PageView: [1]
    assert serde.deserialize(src, data) == PageView(user="x")


def test_copies_for_other_processes_hold_no_client_and_rebuild_what_they_cannot_import(
        registry) -> None:
    topic = _topics("copies")[0]
    avro = AvroSerde(VIEW_AVRO, registry.url)
    view = {"user": "alice", "url": "/a", "seconds": 1}
    data = avro.serialize(topic, view)
    copy = pickle.loads(pickle.dumps(avro))
    assert copy._serializer is None and copy.deserialize(topic, data) == view
    assert copy.serialize(topic, view) == data

    from google.protobuf import timestamp_pb2

    importable = ProtobufSerde(timestamp_pb2.Timestamp, registry.url)
    assert pickle.loads(pickle.dumps(importable)).message_type is timestamp_pb2.Timestamp
    proto = ProtobufSerde(PageView, registry.url)
    proto.message_module = ("no_such_module_pb2", "PageView")   # as on a Spark worker
    elsewhere = pickle.loads(pickle.dumps(proto))
    rebuilt = elsewhere.message_type
    assert rebuilt is not PageView and rebuilt.DESCRIPTOR.full_name == "streamtable.tests.PageView"
    message = PageView(user="bob", url="/b", seconds=2, referrer={"host": "h"})
    wire = elsewhere.serialize(topic, message)                  # the original class is accepted
    assert wire == ProtobufSerde(PageView, registry.url).serialize(topic, message)
    assert json_format.MessageToDict(elsewhere.deserialize(topic, wire)) == \
        json_format.MessageToDict(message)
    assert elsewhere.serialize(topic, {"user": "bob", "url": "/b", "seconds": 2,
                                       "referrer": {"host": "h"}}) == wire


def test_the_role_comes_from_where_the_serde_is_used_unless_fixed(registry) -> None:
    serde = AvroSerde('"string"', registry.url)
    assert serde.for_key() is serde.for_key() and serde.for_key().is_key
    fixed = AvroSerde('"string"', registry.url, is_key=False)
    assert fixed.for_key() is fixed
    topic = _topics("roles")[0]
    fixed.for_key().serialize(topic, "a")
    serde.for_key().serialize(topic, "a")
    subjects = SchemaRegistryClient({"url": registry.url}).get_subjects()
    assert f"{topic}-value" in subjects and f"{topic}-key" in subjects


def test_records_not_in_the_wire_format_are_deserialization_errors(registry) -> None:
    src, out = _topics("plain", "copy")
    builder = StreamsBuilder()
    builder.stream(src, key_serde=STRING, value_serde=AvroSerde(VIEW_AVRO, registry.url)).to(
        out, key_serde=STRING, value_serde=AvroSerde(VIEW_AVRO, registry.url))
    with TopologyTestDriver(builder.build()) as driver:
        topic = driver.create_input_topic(src, key_serde=STRING, value_serde=STRING)
        with pytest.raises(DeserializationError,
                           match=f"magic byte.*topic='{src}' partition=0 offset=0"):
            topic.pipe_input("alice", '{"user": "alice"}')


def test_an_unreachable_registry_is_said_with_its_url() -> None:
    from streamtable.kafka.broker import free_port
    from streamtable.serde.registry import RegistryUnreachableError

    url = f"http://127.0.0.1:{free_port()}"   # nothing listens there
    serde = AvroSerde('"string"', {"url": url, "max.retries": 0})
    with pytest.raises(RegistryUnreachableError, match=f"Schema Registry at {url} did not "
                                                       "answer"):
        serde.serialize("t", "alice")
    with pytest.raises(RegistryUnreachableError, match=url):
        serde.deserialize("t", b"\x00\x00\x00\x00\x01\x0aalice")
