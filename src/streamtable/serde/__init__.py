"""Key and value serdes.

A serde turns Python objects into bytes for a topic and back. ``None`` is always ``None`` on both
sides: it is a tombstone, never encoded.

>>> from streamtable.serde import JSON, STRING
>>> JSON.deserialize("t", JSON.serialize("t", {"a": 1}))
{'a': 1}
>>> STRING.serialize("t", "hé")
b'h\\xc3\\xa9'

Schema Registry serdes (Confluent's wire format, through confluent-kafka's own serializers;
the ``registry`` extra): :class:`AvroSerde`, :class:`JsonSchemaSerde`, :class:`ProtobufSerde`
in :mod:`streamtable.serde.registry`.
"""

from streamtable.serde.registry import AvroSerde, JsonSchemaSerde, ProtobufSerde, RegistrySerde
from streamtable.serde.serdes import (
    BYTES,
    DOUBLE,
    INTEGER,
    INTERNAL,
    JSON,
    LONG,
    PICKLE,
    STRING,
    BytesSerde,
    DoubleSerde,
    IntegerSerde,
    JsonSerde,
    LongSerde,
    PickleSerde,
    Serde,
    StringSerde,
    serde_from,
)

__all__ = [
    "AvroSerde",
    "JsonSchemaSerde",
    "ProtobufSerde",
    "RegistrySerde",
    "BYTES",
    "DOUBLE",
    "INTEGER",
    "INTERNAL",
    "JSON",
    "LONG",
    "PICKLE",
    "STRING",
    "BytesSerde",
    "DoubleSerde",
    "IntegerSerde",
    "JsonSerde",
    "LongSerde",
    "PickleSerde",
    "Serde",
    "StringSerde",
    "serde_from",
]
