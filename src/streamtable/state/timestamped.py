"""A value with the timestamp of the record that wrote it (Kafka Streams' ``ValueAndTimestamp``).

Every store the DSL creates holds ``(value, timestamp)`` pairs; a processor reading such a store
(or a store built with ``Stores.timestamped_key_value_store_builder``) gets them as
:class:`ValueAndTimestamp`, as Kafka Streams' ``TimestampedKeyValueStore`` gives them. With
``dsl.store.format=headers`` the DSL's stores hold ``(value, timestamp, headers)`` and give
:class:`ValueTimestampHeaders` (KIP-1271/KIP-1285).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from streamtable.records import Headers


class ValueAndTimestamp(NamedTuple):
    """A stored value and its timestamp (milliseconds). It is the ``(value, timestamp)`` pair a
    store holds, so it compares equal to that tuple.

    >>> v = ValueAndTimestamp("Closed", 1_000)
    >>> v.value, v.timestamp, v == ("Closed", 1_000)
    ('Closed', 1000, True)
    """

    value: Any
    timestamp: int

    @staticmethod
    def make(value: Any, timestamp: int) -> ValueAndTimestamp | None:
        """``ValueAndTimestamp(value, timestamp)``, or ``None`` for a ``None`` value (Kafka's
        ``ValueAndTimestamp.make``: a deleted entry has no timestamp).

        >>> ValueAndTimestamp.make(None, 5) is None
        True
        """
        return None if value is None else ValueAndTimestamp(value, timestamp)

    @staticmethod
    def get_value_or_null(entry: ValueAndTimestamp | None) -> Any:
        """The value of ``entry``, ``None`` for ``None``."""
        return None if entry is None else entry.value


class ValueTimestampHeaders(NamedTuple):
    """A stored value, its timestamp (milliseconds) and the headers of the record that wrote
    it (Kafka Streams' ``ValueTimestampHeaders``, KIP-1271): what a processor reads from a DSL
    store with ``dsl.store.format=headers``, or from a store built with
    ``Stores.timestamped_key_value_store_with_headers_builder``. Headers are ``(name, value)``
    pairs; a value stored before the store kept headers reads with none.

    >>> v = ValueTimestampHeaders(3, 1_000, (("trace-id", b"t1"),))
    >>> v.value, v.timestamp, dict(v.headers)
    (3, 1000, {'trace-id': b't1'})
    """

    value: Any
    timestamp: int
    headers: Headers = ()

    @staticmethod
    def make(value: Any, timestamp: int, headers: Headers = ()) -> ValueTimestampHeaders | None:
        """``ValueTimestampHeaders(value, timestamp, headers)``, or ``None`` for a ``None``
        value (Kafka's ``ValueTimestampHeaders.make``).

        >>> ValueTimestampHeaders.make(None, 5) is None
        True
        """
        return None if value is None else ValueTimestampHeaders(value, timestamp, headers)

    @staticmethod
    def of_stored(stored: tuple[Any, ...]) -> ValueTimestampHeaders:
        """A store's ``(value, timestamp[, headers])`` entry as a ValueTimestampHeaders (an
        entry written without headers has none).

        >>> ValueTimestampHeaders.of_stored(("x", 7))
        ValueTimestampHeaders(value='x', timestamp=7, headers=())
        """
        return ValueTimestampHeaders(stored[0], stored[1], stored[2] if len(stored) > 2 else ())
