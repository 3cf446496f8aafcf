"""Records as they sit in topics: the types every floor shares (the Kafka readers, the engine, the
batch hosts and the test driver), below all of them.

A :class:`RawRecord` is one serialized record and its position; a :class:`RecordRun` is many
consecutive records of one topic partition, as columns. Processors see deserialized records
(:class:`streamtable.Record`), never these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Headers = tuple[tuple[str, bytes | None], ...]
"""A record's headers: ``(name, value)`` pairs, in order; a value may be None."""

HeadersLike = (Headers | Iterable[tuple[str, bytes | str | None]]
               | Mapping[str, bytes | str | None] | None)
"""What :func:`to_headers` accepts: ``(name, value)`` pairs or a mapping, values as bytes,
text (written as UTF-8) or None; ``None`` for no headers."""


def to_headers(headers: HeadersLike) -> Headers:
    """``headers`` as a record holds them: a tuple of ``(name, bytes or None)`` pairs.

    >>> to_headers({"trace-id": "abc", "tenant": b"t1"})
    (('trace-id', b'abc'), ('tenant', b't1'))
    >>> to_headers(None), to_headers([("k", None)])
    ((), (('k', None),))
    """
    if not headers:
        return ()
    items = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for item in items:
        try:
            name, value = item
        except (TypeError, ValueError):
            raise TypeError(f"a header is a (name, value) pair, not {item!r}") from None
        if not isinstance(name, str):
            raise TypeError(f"a header's name is text, not {type(name).__name__} ({name!r})")
        if isinstance(value, str):
            value = value.encode("utf-8")
        elif isinstance(value, (bytearray, memoryview)):
            value = bytes(value)
        elif value is not None and not isinstance(value, bytes):
            raise TypeError(f"header {name!r}: a value is bytes, text or None, not "
                            f"{type(value).__name__}")
        out.append((name, value))
    return tuple(out)


Origin = tuple[str, int, int]
"""The position (topic, partition, offset) of the input record behind a record of a
repartition topic; ``("", -1, -1)`` when no input record caused it (a punctuation)."""

NO_ORIGIN: Origin = ("", -1, -1)


class RawRecord:
    """A record as it sits in a topic: serialized key and value plus its position.

    ``origin`` is None; a record of a repartition topic may be a :class:`RoutedRecord`, which
    carries the position of the input record it came from.
    """

    __slots__ = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")

    origin: Origin | None = None

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers = (),
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers

    def __repr__(self) -> str:
        return (
            f"RawRecord(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
            f"timestamp={self.timestamp}, key={self.key!r}, value={self.value!r})"
        )


class RoutedRecord(RawRecord):
    """A record of a repartition topic with its ``origin``: the position of the input record it
    came from, so that an error downstream names a record users can find (a repartition topic
    exists only inside a Spark batch). Records of other topics are plain :class:`RawRecord`,
    made without it.

    >>> RoutedRecord("app-r", 0, 3, 5, None, None, (), ("clicks", 1, 7)).origin
    ('clicks', 1, 7)
    """

    __slots__ = ("origin",)

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int,
                 key: bytes | None, value: bytes | None, headers: Headers,
                 origin: Origin) -> None:
        super().__init__(topic, partition, offset, timestamp, key, value, headers)
        self.origin = origin


class RecordRun:
    """Consecutive records of one topic partition, in offset order, as columns: how a batch
    host hands a task many records without making a :class:`RawRecord` of each.

    >>> run = RecordRun("in", 0, [5, 6], [10, 11], [b"a", b"b"], [b"1", None], [(), ()])
    >>> len(run), run.record(1)
    (2, RawRecord(topic='in', partition=0, offset=6, timestamp=11, key=b'b', value=None))
    """

    __slots__ = ("topic", "partition", "offsets", "timestamps", "keys", "values", "headers")

    def __init__(self, topic: str, partition: int, offsets: list[int],
                 timestamps: list[int | None], keys: list[bytes | None],
                 values: list[bytes | None], headers: list[Headers]) -> None:
        self.topic = topic
        self.partition = partition
        self.offsets = offsets
        self.timestamps = timestamps  # None: the record has no timestamp (its source fails it)
        self.keys = keys
        self.values = values
        self.headers = headers

    @classmethod
    def of(cls, records: list[RawRecord]) -> RecordRun:
        """The run of ``records`` (of one topic partition, in offset order)."""
        first = records[0]
        return cls(first.topic, first.partition, [r.offset for r in records],
                   [r.timestamp for r in records], [r.key for r in records],
                   [r.value for r in records], [r.headers for r in records])

    def __len__(self) -> int:
        return len(self.offsets)

    def record(self, i: int) -> RawRecord:
        return RawRecord(self.topic, self.partition, self.offsets[i],
                         self.timestamps[i], self.keys[i], self.values[i],  # type: ignore[arg-type]
                         self.headers[i])

    def records(self) -> list[RawRecord]:
        topic, partition = self.topic, self.partition
        return [RawRecord(topic, partition, o, t, k, v, h)  # type: ignore[arg-type]
                for o, t, k, v, h in zip(self.offsets, self.timestamps, self.keys,
                                         self.values, self.headers, strict=True)]


#: a record for an external topic, as a task hands it to an output writer: ``(topic, key,
#: value, timestamp, headers, partition)``, ``partition`` None for the key's default partition
#: (a plain tuple: a task makes one per output record)
OutputRecord = tuple[str, bytes | None, bytes | None, int, list[tuple[str, bytes | None]],
                     int | None]
