"""``streamtable produce | consume`` with Schema Registry serdes (``--key-serde avro:...``,
``--value-serde json-schema:...``, ``protobuf:FILE_pb2.py:Message``, ``--schema-registry``),
against the embedded broker and the development registry; the bytes written are checked with
confluent-kafka's own deserializers."""

from __future__ import annotations

import importlib.util
import io
import json
import struct
import uuid

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from tests.runtime.spark.kafka_util import read_all
from tests.serde.registry_messages import generated_module
from tests.serde.test_registry_serdes import SUMMARY_JSON_SCHEMA, VIEW_AVRO

from streamtable.cli import main
from streamtable.kafka.admin import ensure_topics

KEY_AVRO = '"string"'


def _cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *argv: str,
         stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _topic(bootstrap: str, base: str) -> str:
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    ensure_topics(bootstrap, {name: 1})
    return name


def _ctx(topic: str, key: bool = False) -> SerializationContext:
    return SerializationContext(topic, MessageField.KEY if key else MessageField.VALUE)


def test_produce_and_consume_avro_keys_and_values(bootstrap, registry, tmp_path, capsys,
                                                  monkeypatch) -> None:
    topic = _topic(bootstrap, "cli-avro")
    (tmp_path / "view.avsc").write_text(VIEW_AVRO)
    (tmp_path / "key.avsc").write_text(KEY_AVRO)
    lines = ('alice\t{"user": "alice", "url": "/a", "seconds": 3}\n'
             'bob\t{"user": "bob", "url": "/b", "seconds": 5}\n')
    code, _, err = _cli(capsys, monkeypatch, "produce", topic, "--bootstrap-servers", bootstrap,
                        "--schema-registry", registry.url,
                        "--key-serde", f"avro:{tmp_path / 'key.avsc'}",
                        "--value-serde", f"avro:{tmp_path / 'view.avsc'}", stdin=lines)
    assert code == 0, err
    client = SchemaRegistryClient({"url": registry.url})
    key_id = client.get_latest_version(f"{topic}-key").schema_id
    value_id = client.get_latest_version(f"{topic}-value").schema_id
    records = read_all(bootstrap, topic)
    assert [(m.key()[0], struct.unpack(">I", m.key()[1:5])[0]) for m in records] == [
        (0, key_id), (0, key_id)]
    reader = AvroDeserializer(client)
    assert [(reader(m.key(), _ctx(topic, True)), reader(m.value(), _ctx(topic)))
            for m in records] == [
        ("alice", {"user": "alice", "url": "/a", "seconds": 3}),
        ("bob", {"user": "bob", "url": "/b", "seconds": 5})] and value_id != key_id

    # read back with the writer's schema (no file), by the registry of the environment
    monkeypatch.setenv("STREAMTABLE_SCHEMA_REGISTRY", registry.url)
    code, out, err = _cli(capsys, monkeypatch, "consume", topic, "--bootstrap-servers",
                          bootstrap, "--from-beginning", "--key-serde", "avro",
                          "--value-serde", "avro")
    assert code == 0, err
    assert out.splitlines() == [
        'alice\t{"user": "alice", "url": "/a", "seconds": 3}',
        'bob\t{"user": "bob", "url": "/b", "seconds": 5}']

    # without a schema file, produce writes with the subject's latest schema
    code, _, err = _cli(capsys, monkeypatch, "produce", topic, "--bootstrap-servers", bootstrap,
                        "--key-serde", "avro", "--value-serde", "avro",
                        stdin='carol\t{"user": "carol", "url": "/c", "seconds": 1}\n')
    assert code == 0, err
    last = read_all(bootstrap, topic)[-1]
    assert struct.unpack(">I", last.value()[1:5])[0] == value_id
    assert reader(last.value(), _ctx(topic))["user"] == "carol"


def test_json_schema_values_are_validated_when_produced(bootstrap, registry, tmp_path, capsys,
                                                        monkeypatch) -> None:
    topic = _topic(bootstrap, "cli-json-schema")
    schema = tmp_path / "summary.json"
    schema.write_text(SUMMARY_JSON_SCHEMA)
    common = ("--bootstrap-servers", bootstrap, "--schema-registry", registry.url,
              "--key-serde", "string", "--value-serde", f"json-schema:{schema}")
    code, _, err = _cli(capsys, monkeypatch, "produce", topic, *common,
                        stdin='alice\t{"user": "alice", "pages": 2}\n')
    assert code == 0, err
    code, _, err = _cli(capsys, monkeypatch, "produce", topic, *common,
                        stdin='bob\t{"user": "bob", "pages": "two"}\n')
    assert code == 1
    assert "<stdin>, record 1: cannot encode it with" in err and "'two' is not of type" in err
    code, out, err = _cli(capsys, monkeypatch, "consume", topic, *common, "--from-beginning",
                          "--format", "json")
    assert code == 0, err
    [record] = [json.loads(line) for line in out.splitlines()]
    assert (record["key"], record["value"]) == ("alice", {"user": "alice", "pages": 2})
    reader = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient(
        {"url": registry.url}))
    assert reader(read_all(bootstrap, topic)[0].value(), _ctx(topic)) == {
        "user": "alice", "pages": 2}


def test_produce_and_consume_protobuf_with_a_generated_module(bootstrap, registry, tmp_path,
                                                              capsys, monkeypatch) -> None:
    topic = _topic(bootstrap, "cli-protobuf")
    module = tmp_path / "cli_pageviews_pb2.py"
    module.write_text(generated_module("cli_pageviews"))
    serde = f"protobuf:{module}:PageView"
    common = ("--bootstrap-servers", bootstrap, "--schema-registry", registry.url,
              "--key-serde", "string", "--value-serde", serde)
    lines = ('{"key": "alice", "value": {"user": "alice", "url": "/a", "seconds": 3, '
             '"referrer": {"host": "example.com"}}}\n')
    code, _, err = _cli(capsys, monkeypatch, "produce", topic, *common, stdin=lines)
    assert code == 0, err
    code, out, err = _cli(capsys, monkeypatch, "consume", topic, *common, "--from-beginning")
    assert code == 0, err
    key, value = out.rstrip("\n").split("\t")
    # the message in Protobuf's JSON form (64-bit integers as strings)
    assert (key, json.loads(value)) == ("alice", {"user": "alice", "url": "/a", "seconds": "3",
                                                  "referrer": {"host": "example.com"}})

    spec = importlib.util.spec_from_file_location("cli_pageviews_check", module)
    assert spec and spec.loader
    generated = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generated)
    raw = read_all(bootstrap, topic)[0].value()
    assert raw[0] == 0 and raw[5:7] == b"\x02\x02"     # PageView: message index [1]
    reader = ProtobufDeserializer(generated.PageView, {},
                                  schema_registry_client=SchemaRegistryClient(
                                      {"url": registry.url}))
    message = reader(raw, _ctx(topic))
    assert (message.user, message.seconds, message.referrer.host) == ("alice", 3, "example.com")


def test_registry_serdes_need_a_registry_and_a_message(bootstrap, registry, capsys,
                                                       monkeypatch) -> None:
    monkeypatch.delenv("STREAMTABLE_SCHEMA_REGISTRY", raising=False)
    topic = _topic(bootstrap, "cli-no-registry")
    with pytest.raises(SystemExit, match="needs a Schema Registry: give its URL "
                                         r"\(--schema-registry"):
        _cli(capsys, monkeypatch, "consume", topic, "--bootstrap-servers", bootstrap,
             "--value-serde", "avro")
    with pytest.raises(SystemExit, match="expected protobuf:FILE_pb2.py:Message"):
        _cli(capsys, monkeypatch, "consume", topic, "--bootstrap-servers", bootstrap,
             "--schema-registry", registry.url, "--value-serde", "protobuf")
    with pytest.raises(SystemExit, match="no such schema file: missing.avsc"):
        _cli(capsys, monkeypatch, "consume", topic, "--bootstrap-servers", bootstrap,
             "--schema-registry", registry.url, "--value-serde", "avro:missing.avsc")


def test_an_application_files_registry_serdes_are_used(bootstrap, registry, tmp_path, capsys,
                                                       monkeypatch) -> None:
    topic, out = _topic(bootstrap, "cli-app-in"), _topic(bootstrap, "cli-app-out")
    app = tmp_path / "registry_app.py"
    app.write_text(
        "from streamtable import StreamsBuilder\n"
        "from streamtable.serde import AvroSerde\n"
        f"VIEW = {VIEW_AVRO!r}\n"
        f"config = {{'default.key.serde': 'string',\n"
        f"          'default.value.serde': AvroSerde(VIEW, {registry.url!r})}}\n"
        "def build_topology():\n"
        "    b = StreamsBuilder()\n"
        f"    b.stream({topic!r}).to({out!r})\n"
        "    return b.build()\n")
    code, _, err = _cli(capsys, monkeypatch, "produce", topic, str(app), "--bootstrap-servers",
                        bootstrap, stdin='alice\t{"user": "alice", "url": "/a", "seconds": 3}\n')
    assert code == 0, err
    reader = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    assert reader(read_all(bootstrap, topic)[0].value(), _ctx(topic)) == {
        "user": "alice", "url": "/a", "seconds": 3}
    code, out_text, err = _cli(capsys, monkeypatch, "consume", topic, str(app),
                               "--bootstrap-servers", bootstrap, "--from-beginning")
    assert code == 0, err
    assert out_text == 'alice\t{"user": "alice", "url": "/a", "seconds": 3}\n'
