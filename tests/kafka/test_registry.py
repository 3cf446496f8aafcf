"""The development Schema Registry's REST behaviour, for the endpoints confluent-kafka's
``SchemaRegistryClient`` and serializers use: over plain HTTP (status, Confluent's error codes,
content type) and through the client itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from streamtable.kafka.broker import free_port
from streamtable.kafka.registry import CONTENT_TYPE, DevelopmentRegistry

SRC = Path(__file__).resolve().parents[2] / "src"
USER = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}]})
USER_SPACED = json.dumps(json.loads(USER), indent=2)   # the same schema, written otherwise
USER_V2 = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": ["null", "int"],
                                         "default": None}]})


@pytest.fixture
def registry() -> Iterator[DevelopmentRegistry]:
    with DevelopmentRegistry() as r:   # a fresh one: ids and subjects from 1
        yield r


def call(registry: DevelopmentRegistry, method: str, path: str,
         body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(registry.url + path, data=data, method=method,
                                     headers={"Content-Type": CONTENT_TYPE})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Content-Type"] == CONTENT_TYPE
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        assert e.headers["Content-Type"] == CONTENT_TYPE
        return e.code, json.loads(e.read())


def test_registering_gives_one_id_per_schema_and_a_version_per_subject(registry) -> None:
    assert call(registry, "GET", "/subjects") == (200, [])
    assert call(registry, "POST", "/subjects/users-value/versions", {"schema": USER}) == (
        200, {"id": 1, "version": 1, "subject": "users-value"})
    # the same schema again, even written otherwise: the same id and version
    assert call(registry, "POST", "/subjects/users-value/versions",
                {"schema": USER_SPACED})[1]["id"] == 1
    assert call(registry, "POST", "/subjects/users-value/versions", {"schema": USER_V2}) == (
        200, {"id": 2, "version": 2, "subject": "users-value"})
    # the same schema in another subject keeps its id
    assert call(registry, "POST", "/subjects/admins-value/versions", {"schema": USER}) == (
        200, {"id": 1, "version": 1, "subject": "admins-value"})
    assert call(registry, "GET", "/subjects") == (200, ["admins-value", "users-value"])
    assert call(registry, "GET", "/subjects/users-value/versions") == (200, [1, 2])
    assert call(registry, "GET", "/subjects/users-value/versions/latest") == (
        200, {"subject": "users-value", "version": 2, "id": 2, "schema": USER_V2})
    assert call(registry, "GET", "/subjects/users-value/versions/1")[1]["id"] == 1
    assert call(registry, "GET", "/schemas/ids/2") == (200, {"schema": USER_V2})
    assert call(registry, "GET", "/schemas/ids/1/subjects") == (
        200, ["admins-value", "users-value"])
    assert call(registry, "GET", "/schemas/ids/1/versions") == (
        200, [{"subject": "admins-value", "version": 1}, {"subject": "users-value",
                                                          "version": 1}])
    assert call(registry, "GET", "/schemas/types") == (200, ["AVRO", "JSON", "PROTOBUF"])


def test_lookup_finds_a_registered_schema_in_its_subject(registry) -> None:
    call(registry, "POST", "/subjects/users-value/versions", {"schema": USER})
    assert call(registry, "POST", "/subjects/users-value", {"schema": USER_SPACED}) == (
        200, {"subject": "users-value", "version": 1, "id": 1, "schema": USER})
    assert call(registry, "POST", "/subjects/users-value", {"schema": USER_V2}) == (
        404, {"error_code": 40403, "message": "Schema not found"})
    assert call(registry, "POST", "/subjects/nobody-value", {"schema": USER}) == (
        404, {"error_code": 40401, "message": "Subject 'nobody-value' not found."})


def test_unknown_subjects_versions_and_schemas_are_confluents_errors(registry) -> None:
    call(registry, "POST", "/subjects/users-value/versions", {"schema": USER})
    assert call(registry, "GET", "/subjects/nobody/versions") == (
        404, {"error_code": 40401, "message": "Subject 'nobody' not found."})
    assert call(registry, "GET", "/subjects/nobody/versions/latest")[1]["error_code"] == 40401
    assert call(registry, "GET", "/subjects/users-value/versions/7") == (
        404, {"error_code": 40402, "message": "Version 7 not found."})
    status, body = call(registry, "GET", "/subjects/users-value/versions/first")
    assert (status, body["error_code"]) == (422, 42202)
    assert call(registry, "GET", "/schemas/ids/99") == (
        404, {"error_code": 40403, "message": "Schema 99 not found"})
    status, body = call(registry, "GET", "/no/such/endpoint")
    assert (status, body["error_code"]) == (404, 404)
    # no compatibility verdict it did not reach
    status, body = call(registry, "POST", "/compatibility/subjects/users-value/versions/latest",
                        {"schema": USER})
    assert (status, body["error_code"]) == (404, 404)


def test_invalid_schemas_are_refused(registry) -> None:
    for body in ({"schema": "{not json"},
                 {"schema": json.dumps({"type": "record", "name": "X", "fields": [
                     {"name": "a", "type": "no-such-type"}]})},
                 {"schema": USER, "schemaType": "XML"},
                 {"schema": USER, "references": [{"name": "x", "subject": "none",
                                                  "version": 1}]},
                 {"no": "schema"}):
        status, answer = call(registry, "POST", "/subjects/bad-value/versions", body)
        assert (status, answer["error_code"]) == (422, 42201), body
    assert call(registry, "GET", "/subjects") == (200, [])


def test_json_schemas_carry_their_type(registry) -> None:
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}})
    _, answer = call(registry, "POST", "/subjects/j-value/versions",
                     {"schema": schema, "schemaType": "JSON"})
    assert call(registry, "GET", f"/schemas/ids/{answer['id']}") == (
        200, {"schema": schema, "schemaType": "JSON"})


def test_deleting_is_soft_first_then_permanent(registry) -> None:
    call(registry, "POST", "/subjects/users-value/versions", {"schema": USER})
    call(registry, "POST", "/subjects/users-value/versions", {"schema": USER_V2})
    assert call(registry, "DELETE", "/subjects/users-value?permanent=true")[1]["error_code"] \
        == 40405
    assert call(registry, "DELETE", "/subjects/users-value/versions/2") == (200, 2)
    assert call(registry, "GET", "/subjects/users-value/versions/latest")[1]["version"] == 1
    assert call(registry, "DELETE", "/subjects/users-value") == (200, [1])
    assert call(registry, "GET", "/subjects") == (200, [])
    assert call(registry, "GET", "/subjects?deleted=true") == (200, ["users-value"])
    assert call(registry, "GET", "/schemas/ids/1") == (200, {"schema": USER})  # ids stay
    assert call(registry, "DELETE", "/subjects/users-value?permanent=true") == (200, [1, 2])
    assert call(registry, "GET", "/subjects?deleted=true") == (200, [])


def test_compatibility_levels_are_kept_globally_and_per_subject(registry) -> None:
    assert call(registry, "GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert call(registry, "PUT", "/config/users-value", {"compatibility": "full"}) == (
        200, {"compatibility": "FULL"})
    assert call(registry, "GET", "/config/users-value") == (200, {"compatibilityLevel": "FULL"})
    assert call(registry, "GET", "/config/others")[1]["error_code"] == 40408
    assert call(registry, "GET", "/config/others?defaultToGlobal=true") == (
        200, {"compatibilityLevel": "BACKWARD"})
    assert call(registry, "PUT", "/config", {"compatibility": "sometimes"})[1]["error_code"] \
        == 42203
    assert call(registry, "PUT", "/config", {"compatibility": "NONE"}) == (
        200, {"compatibility": "NONE"})
    assert call(registry, "DELETE", "/config/users-value") == (
        200, {"compatibilityLevel": "FULL"})
    assert call(registry, "GET", "/mode") == (200, {"mode": "READWRITE"})


def test_the_confluent_client_against_it(registry) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    subject = "odd/subject name-value"   # the client percent-encodes it
    schema_id = client.register_schema(subject, Schema(USER, "AVRO"))
    assert client.register_schema(subject, Schema(USER_SPACED, "AVRO")) == schema_id
    fresh = SchemaRegistryClient({"url": registry.url})   # nothing cached
    assert fresh.get_schema(schema_id).schema_str == USER
    assert fresh.lookup_schema(subject, Schema(USER, "AVRO")).version == 1
    assert fresh.get_latest_version(subject).schema_id == schema_id
    assert fresh.get_version(subject, 1).schema.schema_str == USER
    assert fresh.get_versions(subject) == [1]
    assert fresh.get_subjects() == [subject]
    fresh.set_compatibility(subject, "NONE")
    assert fresh.get_compatibility(subject) == "NONE"
    with pytest.raises(SchemaRegistryError) as unknown_subject:
        fresh.get_latest_version("nobody")
    assert (unknown_subject.value.http_status_code,
            unknown_subject.value.error_code) == (404, 40401)
    with pytest.raises(SchemaRegistryError) as unknown_schema:
        fresh.get_schema(4242)
    assert unknown_schema.value.error_code == 40403
    with pytest.raises(SchemaRegistryError) as not_in_subject:
        fresh.lookup_schema(subject, Schema(USER_V2, "AVRO"))
    assert not_in_subject.value.error_code == 40403
    assert fresh.delete_subject(subject) == [1]
    assert fresh.get_subjects() == []


def test_streamtable_registry_command_serves_until_interrupted() -> None:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get(
        "PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "streamtable.cli", "registry", "--port",
                             str(port)], env=env, stderr=subprocess.PIPE, text=True)
    try:
        client = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}"})
        deadline = time.monotonic() + 30
        while True:
            try:
                assert client.get_subjects() == []
                break
            except Exception:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
                time.sleep(0.1)
        assert client.register_schema("a-value", Schema(USER, "AVRO")) == 1
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert f"schema.registry.url=http://127.0.0.1:{port}" in err
