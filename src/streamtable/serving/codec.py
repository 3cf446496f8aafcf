"""How queryable-store changes cross processes: the encoding of keys and ``(value, timestamp)``
pairs that a Spark stage writes on an executor and every serving store reads.

Writers and readers must agree on these bytes: a key is looked up by its encoding.

>>> decode_key(encode_key(("client1", 3)))
('client1', 3)
>>> decode_value(encode_value(({1, 3}, 1000)))
({1, 3}, 1000)
"""

from __future__ import annotations

import pickle
from typing import Any


def encode_key(key: Any) -> bytes:
    """The bytes a key is stored under."""
    return pickle.dumps(key, protocol=5)


def decode_key(data: bytes) -> Any:
    return pickle.loads(data)


def encode_value(value_and_timestamp: tuple[Any, int]) -> bytes:
    return pickle.dumps(value_and_timestamp, protocol=5)


def decode_value(data: bytes) -> tuple[Any, int]:
    return pickle.loads(data)  # type: ignore[no-any-return]
