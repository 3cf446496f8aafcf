"""The built-in serdes, wire-compatible with Kafka's own where Kafka has one."""

from __future__ import annotations

import json
import marshal
import pickle
import struct
from typing import Any

import orjson


class Serde:
    """Serializer and deserializer for one kind of key or value.

    Subclasses implement :meth:`encode` and :meth:`decode`; ``None`` (a tombstone) never reaches
    them.

    Example:
        >>> class Upper(Serde):
        ...     def encode(self, obj): return obj.upper().encode()
        ...     def decode(self, data): return data.decode()
        >>> Upper().serialize("topic", "abc")
        b'ABC'
    """

    name = "serde"

    def serialize(self, topic: str, obj: Any) -> bytes | None:
        """The bytes of ``obj`` for ``topic``; ``None`` (a tombstone) stays ``None``.

        >>> LONG.serialize("counts", 3), LONG.serialize("counts", None)
        (b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x03', None)
        """
        return None if obj is None else self.encode(obj)

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        """The object ``data`` holds; ``None`` stays ``None``.

        >>> JSON.deserialize("t", b'{"a": [1, 2]}'), JSON.deserialize("t", None)
        ({'a': [1, 2]}, None)
        """
        return None if data is None else self.decode(data)

    def deserialize_many(self, topic: str, data: list[bytes | None]) -> list[Any]:
        """:meth:`deserialize` of each item of ``data``, in one call.

        >>> STRING.deserialize_many("topic", [b"a", None])
        ['a', None]
        """
        deserialize = self.deserialize
        return [deserialize(topic, item) for item in data]

    def encode(self, obj: Any) -> bytes:
        """The bytes of ``obj`` (never ``None``): what a subclass implements.

        >>> STRING.encode("hé")
        b'h\\xc3\\xa9'
        """
        raise NotImplementedError

    def decode(self, data: bytes) -> Any:
        """The object of ``data`` (never ``None``): what a subclass implements.

        >>> DOUBLE.decode(DOUBLE.encode(0.5))
        0.5
        """
        raise NotImplementedError

    def for_key(self) -> Serde:
        """This serde where it encodes keys: itself, unless keys and values differ (a Schema
        Registry serde writes a key under the subject ``<topic>-key``). Kafka Streams' serdes
        learn it from ``configure(configs, isKey)``.

        >>> STRING.for_key() is STRING
        True
        """
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset)):
        try:
            return sorted(obj)
        except TypeError:
            return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


class JsonSerde(Serde):
    """UTF-8 JSON (with orjson). Sets and frozensets are written as sorted lists (and read back
    as lists); dict keys that are not strings are written as strings, as ``json`` does.

    >>> JsonSerde().serialize("t", {"ids": {3, 1}, 7: "x"})
    b'{"ids":[1,3],"7":"x"}'
    """

    name = "json"

    def encode(self, obj: Any) -> bytes:
        try:
            # orjson's result keeps the capacity of its write buffer (~4 KB however short the
            # JSON): encoded keys and values are kept (record caches, outputs, the sink's key
            # hashes), so they are copied to their own size (0.2 us; 100k short keys held:
            # 410 -> 6 MB)
            return memoryview(orjson.dumps(obj, default=_json_default,
                                           option=orjson.OPT_NON_STR_KEYS)).tobytes()
        except TypeError:
            # what orjson refuses (integers beyond 64 bits, ...) the standard library may take
            return json.dumps(obj, separators=(",", ":"), default=_json_default).encode()

    def serialize(self, topic: str, obj: Any) -> bytes | None:
        return None if obj is None else self.encode(obj)

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        return None if data is None else orjson.loads(data)

    def deserialize_many(self, topic: str, data: list[bytes | None]) -> list[Any]:
        loads = orjson.loads
        return [None if item is None else loads(item) for item in data]

    def decode(self, data: bytes) -> Any:
        return orjson.loads(data)


class StringSerde(Serde):
    """UTF-8 strings, like Kafka's ``Serdes.String()`` (the name ``"string"``).

    >>> StringSerde().deserialize("t", b"abc")
    'abc'
    """

    name = "string"

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, str):
            raise TypeError(f"string serde expects str, got {type(obj).__name__}")
        return obj.encode("utf-8")

    def decode(self, data: bytes) -> str:
        return data.decode("utf-8")


class _StructSerde(Serde):
    fmt = ">q"

    def encode(self, obj: Any) -> bytes:
        return struct.pack(self.fmt, obj)

    def decode(self, data: bytes) -> Any:
        size = struct.calcsize(self.fmt)
        if len(data) != size:
            raise ValueError(f"{self.name} serde expects {size} bytes, got {len(data)}")
        return struct.unpack(self.fmt, data)[0]


class IntegerSerde(_StructSerde):
    """32-bit big-endian signed integers, like Kafka's ``Serdes.Integer()`` (``"int"``).

    >>> IntegerSerde().serialize("t", 258)
    b'\\x00\\x00\\x01\\x02'
    """

    name = "int"
    fmt = ">i"


class LongSerde(_StructSerde):
    """64-bit big-endian signed integers, like Kafka's ``Serdes.Long()`` (``"long"``).

    >>> LongSerde().deserialize("t", bytes([0, 0, 0, 0, 0, 0, 1, 0]))
    256
    """

    name = "long"
    fmt = ">q"


class DoubleSerde(_StructSerde):
    """64-bit IEEE 754 big-endian floats, like Kafka's ``Serdes.Double()`` (``"double"``).

    >>> DoubleSerde().deserialize("t", DoubleSerde().serialize("t", 2.5))
    2.5
    """

    name = "double"
    fmt = ">d"


class BytesSerde(Serde):
    """Raw bytes, passed through (``"bytes"``).

    >>> BytesSerde().serialize("t", bytearray(b"ab"))
    b'ab'
    """

    name = "bytes"

    def encode(self, obj: Any) -> bytes:
        return bytes(obj)

    def decode(self, data: bytes) -> bytes:
        return bytes(data)


class PickleSerde(Serde):
    """Python pickles: the default for internal (repartition and changelog) topics.

    Only the application itself reads its internal topics, so any Python value (sets, tuples,
    dataclasses) travels unchanged.

    >>> PickleSerde().deserialize("t", PickleSerde().serialize("t", {1, 2}))
    {1, 2}
    """

    name = "pickle"

    def encode(self, obj: Any) -> bytes:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)

    def decode(self, data: bytes) -> Any:
        return pickle.loads(data)


class InternalSerde(Serde):
    """The serde of internal (repartition) topics: ``marshal`` for the plain Python values it
    covers (fast), ``pickle`` for the rest, told apart by a leading tag byte.

    Only the running application reads these records, with the same Python; nothing in this
    format is kept across versions (state files use pickle). A record goes to the task its key's
    bytes hash to, so equal keys must give equal bytes: marshal's format 2, which writes every
    string the same way and never refers back to an object written before (format 3 and later
    mark objects Python holds elsewhere and strings it interned, so an equal key made another
    way would go to another task).

    >>> INTERNAL.decode(INTERNAL.encode((frozenset({1}), None)))
    (frozenset({1}), None)
    >>> n = int("1001")
    >>> INTERNAL.encode(("y", int("1001"))) == INTERNAL.encode(("y", n))
    True
    """

    name = "internal"
    #: marshal's format for internal records (see the class docstring)
    MARSHAL_VERSION = 2

    def encode(self, obj: Any) -> bytes:
        try:
            return b"M" + marshal.dumps(obj, self.MARSHAL_VERSION)
        except ValueError:  # an object marshal does not know
            return b"P" + pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)

    def serialize(self, topic: str, obj: Any) -> bytes | None:
        return None if obj is None else self.encode(obj)

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        return None if data is None else self.decode(data)

    def decode(self, data: bytes) -> Any:
        if data[:1] == b"M":
            return marshal.loads(memoryview(data)[1:])
        return pickle.loads(memoryview(data)[1:])


JSON = JsonSerde()
"""The JSON serde (``"json"``), the default of keys and values.

>>> JSON.serialize("t", {"n": 1})
b'{"n":1}'
"""
STRING = StringSerde()
"""The string serde (``"string"``).

>>> STRING.deserialize("t", STRING.serialize("t", "a"))
'a'
"""
INTEGER = IntegerSerde()
"""The 32-bit integer serde (``"int"``).

>>> INTEGER.deserialize("t", INTEGER.serialize("t", -1))
-1
"""
LONG = LongSerde()
"""The 64-bit integer serde (``"long"``), for counts read by Java applications.

>>> LONG.deserialize("t", LONG.serialize("t", 2**40))
1099511627776
"""
DOUBLE = DoubleSerde()
"""The double serde (``"double"``).

>>> DOUBLE.deserialize("t", DOUBLE.serialize("t", 0.25))
0.25
"""
BYTES = BytesSerde()
"""The bytes serde (``"bytes"``): the record's bytes as they are.

>>> BYTES.deserialize("t", b"\\x00\\x01")
b'\\x00\\x01'
"""
PICKLE = PickleSerde()
"""The pickle serde (``"pickle"``).

>>> PICKLE.deserialize("t", PICKLE.serialize("t", (1, "a")))
(1, 'a')
"""
INTERNAL = InternalSerde()
"""The serde of internal (repartition) topics.

>>> INTERNAL.deserialize("t", INTERNAL.serialize("t", {"a": {1}}))
{'a': {1}}
"""

_BY_NAME: dict[str, Serde] = {
    s.name: s for s in (JSON, STRING, INTEGER, LONG, DOUBLE, BYTES, PICKLE)
}
_BY_NAME["integer"] = INTEGER
_BY_NAME["str"] = STRING


def serde_from(spec: Serde | str | None, default: Serde | None = None,
               key: bool = False) -> Serde:
    """Resolve a serde given as an instance, a name (``"json"``, ``"string"``, ``"int"``,
    ``"long"``, ``"double"``, ``"bytes"``, ``"pickle"``) or ``None`` (the default); ``key``:
    as a key serde (:meth:`Serde.for_key`).

    >>> serde_from("string")
    StringSerde()
    """
    if spec is None:
        return (default or JSON).for_key() if key else default or JSON
    if isinstance(spec, Serde):
        return spec.for_key() if key else spec
    try:
        return _BY_NAME[spec.lower()]
    except KeyError:
        raise ValueError(
            f"unknown serde {spec!r}; expected one of {sorted(_BY_NAME)} or a Serde instance"
        ) from None
