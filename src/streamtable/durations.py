"""Sizes and durations of the public API: milliseconds as an ``int``, or a
``datetime.timedelta`` (Kafka Streams takes a ``java.time.Duration`` in the same places).

>>> from datetime import timedelta
>>> to_ms(timedelta(minutes=1), "size_ms"), to_ms(500, "grace_ms")
(60000, 500)

A float is refused rather than rounded: ``1.5`` could mean seconds or milliseconds.

>>> to_ms(1.5, "grace_ms")
Traceback (most recent call last):
...
TypeError: grace_ms must be whole milliseconds (an int) or a datetime.timedelta, got float 1.5
"""

from __future__ import annotations

import numbers
from datetime import timedelta
from typing import TypeAlias

Duration: TypeAlias = int | timedelta
"""A duration of the public API: whole milliseconds, or a ``datetime.timedelta``."""

_MS = timedelta(milliseconds=1)


def to_ms(value: Duration, name: str) -> int:
    """``value`` in whole milliseconds; ``name`` is the argument's name, for the error.

    A ``timedelta``'s fraction of a millisecond is dropped, as Kafka Streams'
    ``Duration.toMillis`` does. Floats and booleans raise ``TypeError``.

    >>> to_ms(timedelta(seconds=1, microseconds=1500), "interval_ms")
    1001
    >>> to_ms(True, "size_ms")
    Traceback (most recent call last):
    ...
    TypeError: size_ms must be whole milliseconds (an int) or a datetime.timedelta, got bool True
    """
    if isinstance(value, timedelta):
        return value // _MS
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    raise TypeError(f"{name} must be whole milliseconds (an int) or a datetime.timedelta, "
                    f"got {type(value).__name__} {value!r}")
