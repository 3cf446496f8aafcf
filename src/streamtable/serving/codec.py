"""How queryable-store changes cross processes: the encoding of keys and ``(value, timestamp)``
pairs that a Spark stage writes on an executor and every serving store reads.

Writers and readers must agree on these bytes: a key is looked up by its encoding.

>>> decode_key(encode_key(("client1", 3)))
('client1', 3)
>>> decode_value(encode_value(({1, 3}, 1000)))
({1, 3}, 1000)

A windowed key is encoded so that a serving store's byte order sorts the windows of one key by
start time: the windows of a key with starts in a range are one range of encoded keys
(:func:`window_key_range`), which every database can scan.

>>> from streamtable.state.windowed import Windowed
>>> decode_key(encode_key(Windowed("a", 10, 20)))
Windowed(key='a', start=10, end=20)
>>> lo, hi = window_key_range("a", 0, 10)
>>> lo <= encode_key(Windowed("a", 10, 20)) <= hi < encode_key(Windowed("a", 11, 21))
True
"""

from __future__ import annotations

import pickle
from typing import Any

from streamtable.state.windowed import (
    Windowed,
    decode_windowed,
    encode_windowed,
    encoded_window_range,
)

# pickles start with b"\x80" (protocol 2 and later): a windowed key's first byte tells it apart
_WINDOWED = b"W"


def encode_key(key: Any) -> bytes:
    """The bytes a key is stored under: ``Windowed`` keys as the key, then start, then end."""
    if isinstance(key, Windowed):
        return _WINDOWED + encode_windowed(key)
    return pickle.dumps(key, protocol=5)


def is_windowed(data: bytes) -> bool:
    """Whether an encoded key is a windowed key's.

    >>> is_windowed(encode_key(Windowed("a", 0, 1))), is_windowed(encode_key("W"))
    (True, False)
    """
    return data[:1] == _WINDOWED


def decode_key(data: bytes) -> Any:
    if data[:1] == _WINDOWED:
        return decode_windowed(data[1:])
    return pickle.loads(data)


def window_key_range(key: Any, time_from: int, time_to: int) -> tuple[bytes, bytes]:
    """The encoded keys, lowest and highest, of ``key``'s windows starting in
    ``[time_from, time_to]``."""
    low, high = encoded_window_range(key, time_from, time_to)
    return _WINDOWED + low, _WINDOWED + high


def all_windows_range() -> tuple[bytes, bytes]:
    """The encoded keys, lowest and highest, of every windowed key."""
    return _WINDOWED, _WINDOWED + b"\xff" * 8


def encode_value(value_and_timestamp: tuple[Any, int]) -> bytes:
    return pickle.dumps(value_and_timestamp, protocol=5)


def decode_value(data: bytes) -> tuple[Any, int]:
    return pickle.loads(data)  # type: ignore[no-any-return]
