"""Schema Registry serdes: Avro, JSON Schema and Protobuf in Confluent's wire format, through
confluent-kafka's own ``confluent_kafka.schema_registry`` serializers and deserializers.

A record is the magic byte ``0``, the schema id (4 bytes, big-endian), then the payload
(Protobuf: first the message-index array, as varints); the serializer registers the schema
under the subject ``<topic>-key`` or ``<topic>-value`` (Confluent's ``TopicNameStrategy``) and
the deserializer reads the writer's schema by its id. Any Confluent client (Java, Go, ...)
reads and writes the same bytes.

>>> from streamtable.serde.registry import AvroSerde
>>> PAGE_VIEW = '''{"type": "record", "name": "PageView", "fields": [
...     {"name": "user", "type": "string"}, {"name": "url", "type": "string"}]}'''
>>> serde = AvroSerde(PAGE_VIEW, "http://localhost:8081")
>>> serde
AvroSerde(schema_registry='http://localhost:8081', subject=<topic>-value)
>>> serde.for_key()
AvroSerde(schema_registry='http://localhost:8081', subject=<topic>-key)

A serde is a key serde where it is given as one (``key_serde=``, ``default.key.serde``,
``Materialized.with_key_serde``, ``--key-serde``); ``is_key=True`` or ``False`` fixes it. It is
picklable: a copy holds the registry's configuration and the schema, and makes its
``SchemaRegistryClient`` when it first encodes or decodes, once per process (one client per
registry configuration), so it runs unchanged in Spark's Python workers.

Values: Avro and JSON Schema give and take dicts (and what the schema says: lists, strings,
numbers...); Protobuf gives instances of the message class and takes them or dicts (converted
with ``google.protobuf.json_format``).
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamtable.serde.serdes import Serde

__all__ = ["AvroSerde", "JsonSchemaSerde", "ProtobufSerde", "RegistrySerde",
           "RegistryUnreachableError",
           "REGISTRY_FORMATS", "registry_serde"]

_clients: dict[tuple[int, str], Any] = {}
_clients_lock = threading.Lock()


def registry_client(config: Mapping[str, Any]) -> Any:
    """This process's ``SchemaRegistryClient`` for ``config`` (made once per process: a forked
    worker makes its own)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    key = (os.getpid(), json.dumps(dict(config), sort_keys=True, default=str))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = SchemaRegistryClient(dict(config))
        return client


def _schema_text(schema: str | Mapping[str, Any] | Path | None) -> str | None:
    if schema is None or isinstance(schema, str):
        return schema
    if isinstance(schema, Path):
        return schema.read_text(encoding="utf-8")
    return json.dumps(schema)


class RegistryUnreachableError(ConnectionError):
    """The Schema Registry did not answer (after the client's retries): names its URL."""


class RegistrySerde(Serde):
    """What the three formats share: the registry's configuration (``schema_registry``: its URL,
    or a ``SchemaRegistryClient`` configuration dict with ``url`` and, say,
    ``basic.auth.user.info``), the role (key or value), the serializer's configuration
    (``conf``: confluent-kafka's, e.g. ``{"auto.register.schemas": False}``) and the
    per-process serializer and deserializer, made on first use (so making one needs no
    registry).

    >>> serde = JsonSchemaSerde(None, {"url": "http://localhost:8081"},
    ...                         conf={"auto.register.schemas": False})
    >>> isinstance(serde, RegistrySerde), serde.registry_config["url"], serde.is_key
    (True, 'http://localhost:8081', None)
    """

    name = "registry"
    _lazy: tuple[str, ...] = ("_serializer", "_deserializer", "_key_variant")

    def __init__(self, schema_registry: str | Mapping[str, Any], *, is_key: bool | None = None,
                 conf: Mapping[str, Any] | None = None) -> None:
        if isinstance(schema_registry, str):
            self.registry_config: dict[str, Any] = {"url": schema_registry}
        else:
            self.registry_config = dict(schema_registry)
        if not self.registry_config.get("url"):
            raise ValueError("a Schema Registry serde needs the registry's URL "
                             "(schema_registry='http://host:8081')")
        self.is_key = is_key
        self.conf = dict(conf or {})
        self._serializer: Any = None
        self._deserializer: Any = None
        self._key_variant: RegistrySerde | None = None

    # -- the role -------------------------------------------------------------------------
    def for_key(self) -> Serde:
        if self.is_key is not None:
            return self
        if self._key_variant is None:
            variant = copy.copy(self)
            for attr in RegistrySerde._lazy:
                setattr(variant, attr, None)
            variant.is_key = True
            self._key_variant = variant
        return self._key_variant

    def _context(self, topic: str) -> Any:
        from confluent_kafka.serialization import MessageField, SerializationContext

        return SerializationContext(topic, MessageField.KEY if self.is_key else MessageField.VALUE)

    # -- per process ------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for attr in self._lazy:
            state[attr] = None
        return state

    @property
    def client(self) -> Any:
        """This process's ``SchemaRegistryClient`` for the serde's registry."""
        return registry_client(self.registry_config)

    def _make_serializer(self) -> Any:
        raise NotImplementedError

    def _make_deserializer(self) -> Any:
        raise NotImplementedError

    def _to_wire(self, obj: Any) -> Any:
        return obj

    def serialize(self, topic: str, obj: Any) -> bytes | None:
        if obj is None:
            return None
        serializer = self._serializer
        if serializer is None:
            serializer = self._serializer = self._make_serializer()
        try:
            return serializer(self._to_wire(obj), self._context(topic))  # type: ignore[no-any-return]
        except Exception as e:
            unreachable = self._unreachable(e)
            if unreachable is None:
                raise
            raise unreachable from e

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        deserializer = self._deserializer
        if deserializer is None:
            deserializer = self._deserializer = self._make_deserializer()
        try:
            return deserializer(bytes(data), self._context(topic))
        except Exception as e:
            unreachable = self._unreachable(e)
            if unreachable is None:
                raise
            raise unreachable from e

    def _unreachable(self, error: Exception) -> RegistryUnreachableError | None:
        """The error said with the registry's URL when it is the HTTP client's (the registry
        did not answer), else None."""
        if not type(error).__module__.startswith(("httpx", "httpcore")):
            return None
        return RegistryUnreachableError(
            f"the Schema Registry at {self.registry_config['url']} did not answer "
            f"({type(error).__name__}: {error}) after the client's retries")

    def encode(self, obj: Any) -> bytes:
        raise TypeError(f"{type(self).__name__} encodes for a topic: call serialize(topic, obj)")

    def decode(self, data: bytes) -> Any:
        raise TypeError(f"{type(self).__name__} decodes for a topic: "
                        "call deserialize(topic, data)")

    def _deserializer_conf(self) -> dict[str, Any]:
        return {k: v for k, v in self.conf.items() if k == "subject.name.strategy"}

    def __repr__(self) -> str:
        role = "key" if self.is_key else "value"
        return (f"{type(self).__name__}(schema_registry={self.registry_config['url']!r}, "
                f"subject=<topic>-{role})")


class _SchemaSerde(RegistrySerde):
    """A serde given its schema as text (Avro, JSON Schema): text, a dict, or a ``Path``;
    without one, records are written with the subject's latest registered schema and read
    with the writer's."""

    def __init__(self, schema: str | Mapping[str, Any] | Path | None,
                 schema_registry: str | Mapping[str, Any], *, is_key: bool | None = None,
                 conf: Mapping[str, Any] | None = None) -> None:
        super().__init__(schema_registry, is_key=is_key, conf=conf)
        self.schema = _schema_text(schema)
        if self.schema is not None:
            json.loads(self.schema)  # an error now names the schema, not a record

    def _serializer_conf(self) -> dict[str, Any]:
        """The serializer's settings: without a schema, the subject's latest, registering
        nothing."""
        conf = dict(self.conf)
        if self.schema is None:
            conf.setdefault("auto.register.schemas", False)
            conf.setdefault("use.latest.version", True)
        return conf


class AvroSerde(_SchemaSerde):
    """Avro through ``AvroSerializer`` and ``AvroDeserializer``.

    ``schema`` (Avro JSON: text, a dict, or a ``Path`` to a ``.avsc`` file) is registered and
    written with, and read into (Avro schema resolution from the writer's schema); without
    one, records are written with the subject's latest registered schema (nothing is
    registered) and read with the writer's.

    >>> AvroSerde({"type": "string"}, "http://localhost:8081", is_key=True)
    AvroSerde(schema_registry='http://localhost:8081', subject=<topic>-key)
    """

    name = "avro"

    def _make_serializer(self) -> Any:
        from confluent_kafka.schema_registry.avro import AvroSerializer

        return AvroSerializer(self.client, self.schema, conf=self._serializer_conf())

    def _make_deserializer(self) -> Any:
        from confluent_kafka.schema_registry.avro import AvroDeserializer

        return AvroDeserializer(self.client, self.schema, conf=self._deserializer_conf())


class JsonSchemaSerde(_SchemaSerde):
    """JSON Schema through ``JSONSerializer`` and ``JSONDeserializer``: values are checked
    against the schema when written and when read.

    ``schema`` (text, a dict, or a ``Path``) is registered and validates what is written;
    without one, records are written with the subject's latest registered schema and read
    with the writer's.

    >>> JsonSchemaSerde({"type": "object"}, "http://localhost:8081").name
    'json-schema'
    """

    name = "json-schema"

    def _make_serializer(self) -> Any:
        from confluent_kafka.schema_registry.json_schema import JSONSerializer

        return JSONSerializer(self.schema, self.client, conf=self._serializer_conf())

    def _make_deserializer(self) -> Any:
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer

        return JSONDeserializer(self.schema, schema_registry_client=self.client,
                                conf=self._deserializer_conf())


class ProtobufSerde(RegistrySerde):
    """Protobuf through ``ProtobufSerializer`` and ``ProtobufDeserializer``, for one message
    class (generated by ``protoc --python_out``). Decoding gives instances of it; encoding takes
    them, or dicts in the message's JSON form.

    A copy sent to another process finds the class by its module, as pickle does; where that
    module cannot be imported (an application file's neighbour on a Spark worker), the class is
    rebuilt from the file descriptors the serde carries. A value of a rebuilt class does not
    cross a repartition topic (pickle needs the module): keep the generated module importable
    on the workers, or turn such values into dicts before re-keying.

    >>> from google.protobuf import timestamp_pb2
    >>> ProtobufSerde(timestamp_pb2.Timestamp, "http://localhost:8081").message_name
    'google.protobuf.Timestamp'
    """

    name = "protobuf"
    _lazy = (*RegistrySerde._lazy, "_message_type")

    def __init__(self, message_type: Any, schema_registry: str | Mapping[str, Any], *,
                 is_key: bool | None = None, conf: Mapping[str, Any] | None = None) -> None:
        super().__init__(schema_registry, is_key=is_key, conf=conf)
        descriptor = getattr(message_type, "DESCRIPTOR", None)
        if descriptor is None or not hasattr(descriptor, "full_name"):
            raise TypeError(f"ProtobufSerde expects a generated message class, got "
                            f"{message_type!r}")
        self._message_type: Any = message_type
        self.message_name: str = descriptor.full_name
        self.message_module = (message_type.__module__, message_type.__qualname__)
        self.files = _file_closure(descriptor.file)

    @property
    def message_type(self) -> Any:
        """The message class: the original, or (in a process that cannot import its module)
        one rebuilt from the descriptors."""
        if self._message_type is None:
            self._message_type = _import_message(*self.message_module, self.message_name) \
                or _rebuild_message(self.files, self.message_name)
        return self._message_type

    def _to_wire(self, obj: Any) -> Any:
        cls = self.message_type
        if isinstance(obj, cls):
            return obj
        if isinstance(obj, Mapping):
            from google.protobuf import json_format

            return json_format.ParseDict(obj, cls())
        descriptor = getattr(obj, "DESCRIPTOR", None)
        if getattr(descriptor, "full_name", None) == self.message_name:
            # the same message from another class (the original vs a rebuilt one)
            return cls.FromString(obj.SerializeToString())
        raise TypeError(f"{type(self).__name__} for {self.message_name} expects that message "
                        f"or a dict, got {type(obj).__name__}")

    def _make_serializer(self) -> Any:
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

        return ProtobufSerializer(self.message_type, self.client, conf=self.conf)

    def _make_deserializer(self) -> Any:
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

        return ProtobufDeserializer(self.message_type, conf=self._deserializer_conf(),
                                    schema_registry_client=self.client)

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", message={self.message_name})"


def _file_closure(file: Any) -> list[bytes]:
    """The serialized file descriptors of ``file`` and everything it imports, imports first."""
    out: list[bytes] = []
    seen: set[str] = set()

    def visit(f: Any) -> None:
        if f.name in seen:
            return
        seen.add(f.name)
        for dep in f.dependencies:
            visit(dep)
        out.append(f.serialized_pb)

    visit(file)
    return out


def _import_message(module: str | None, qualname: str, full_name: str) -> Any:
    if not module:  # a class made at run time (message_factory) has no module
        return None
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    descriptor = getattr(obj, "DESCRIPTOR", None)
    return obj if getattr(descriptor, "full_name", None) == full_name else None


def _rebuild_message(files: list[bytes], full_name: str) -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    for data in files:
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(data))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


# -- from the command line ----------------------------------------------------------------
REGISTRY_FORMATS = ("avro", "json-schema", "protobuf")


def registry_serde(spec: str, schema_registry: str | None) -> RegistrySerde | None:
    """The Schema Registry serde a command-line spec names, or ``None`` when ``spec`` names
    none: ``avro[:FILE.avsc]``, ``json-schema[:FILE.json]`` (without a file: the subject's
    latest schema to write, the writer's to read), ``protobuf:FILE_pb2.py:Message`` (a module
    generated by ``protoc --python_out``, by path or importable name).

    >>> registry_serde("avro", "http://localhost:8081")
    AvroSerde(schema_registry='http://localhost:8081', subject=<topic>-value)
    >>> registry_serde("json", "http://localhost:8081") is None
    True
    """
    fmt, _, rest = spec.partition(":")
    fmt = fmt.strip().lower()
    if fmt not in REGISTRY_FORMATS:
        return None
    if not schema_registry:
        raise ValueError(f"the serde {spec!r} needs a Schema Registry: give its URL "
                         "(--schema-registry http://host:8081)")
    if fmt == "protobuf":
        module, sep, message = rest.rpartition(":")
        if not sep or not module or not message:
            raise ValueError(f"{spec!r}: expected protobuf:FILE_pb2.py:Message (a module "
                             "generated by protoc --python_out, and a message it defines)")
        return ProtobufSerde(_message_class(module, message), schema_registry)
    schema: Path | None = None
    if rest:
        schema = Path(rest)
        if not schema.is_file():
            raise ValueError(f"{spec!r}: no such schema file: {rest}")
    if fmt == "avro":
        return AvroSerde(schema, schema_registry)
    return JsonSchemaSerde(schema, schema_registry)


def _message_class(module: str, message: str) -> Any:
    if module.endswith(".py"):
        path = Path(module)
        if not path.is_file():
            raise ValueError(f"no such file: {module}")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec and spec.loader
        loaded = importlib.util.module_from_spec(spec)
        sys.modules.setdefault(path.stem, loaded)
        spec.loader.exec_module(loaded)
    else:
        loaded = importlib.import_module(module)
    cls: Any = loaded
    for part in message.split("."):
        cls = getattr(cls, part, None)
        if cls is None:
            raise ValueError(f"{module} defines no message {message!r}")
    return cls
