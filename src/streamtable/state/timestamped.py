"""A value with the timestamp of the record that wrote it (Kafka Streams' ``ValueAndTimestamp``).

Every store the DSL creates holds ``(value, timestamp)`` pairs; a processor reading such a store
(or a store built with ``Stores.timestamped_key_value_store_builder``) gets them as
:class:`ValueAndTimestamp`, as Kafka Streams' ``TimestampedKeyValueStore`` gives them.
"""

from __future__ import annotations

from typing import Any, NamedTuple


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
