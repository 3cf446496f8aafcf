"""Which partition a key goes to: Kafka's default partitioner (murmur2 of the serialized key,
as the Java client computes it), and the task a record of a repartition topic goes to in a batch
host (Spark SQL's ``pmod(hash(key), tasks)``, computed here without Spark so the test driver's
batch mode routes exactly as the Spark runtime does).

>>> default_partition(b"client1", 4) == default_partition(b"client1", 4)
True
>>> task_of(b"client1", None, 4) == task_of(b"client1", None, 4) < 4, task_of(b"x", 2, 4)
(True, 2)
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence

try:
    import numpy as _np
except ImportError:  # the sink runs with numpy (pyarrow's); the driver may not
    _np = None  # type: ignore[assignment]

# below this many keys of one length, hashing them one by one is cheaper than numpy's set-up
_COLUMN_MIN = 16

# the little-endian 32-bit words of a key of up to 64 words, read in one call
_WORDS = [struct.Struct(f"<{n}I").unpack_from for n in range(65)]


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: a signed 32-bit hash of ``data`` (Kafka's own test vectors).

    >>> murmur2(b"21"), murmur2(b"foobar"), murmur2(b"a-little-bit-longer-string"), murmur2(b"abc")
    (-973932308, -790332482, -1486304829, 479470107)
    >>> murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8")
    -58897971
    """
    length = len(data)
    m = 0x5BD1E995
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    n4 = length >> 2
    words = _WORDS[n4](data) if n4 <= 64 else struct.unpack_from(f"<{n4}I", data)
    for k in words:
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        h = ((h * m) & 0xFFFFFFFF) ^ ((k * m) & 0xFFFFFFFF)
    rest = length & 3
    if rest:
        base = length & ~3
        if rest == 3:
            h ^= data[base + 2] << 16
        if rest >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


@functools.lru_cache(maxsize=1 << 16)
def _positive_hash(key: bytes) -> int:
    # keys repeat from batch to batch (the same words, clients...): hashed once while recent
    return murmur2(key) & 0x7FFFFFFF


def default_partition(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner gives a keyed record."""
    if type(key) is bytes:
        return _positive_hash(key) % num_partitions
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def positive_hashes(keys: Sequence[bytes]) -> list[int]:
    """``murmur2(key) & 0x7FFFFFFF`` of many keys at once: Kafka's default partitioner before
    its modulo. With numpy, keys of one length are hashed together as columns of 32-bit words
    (a sink's keys are often of few lengths: ``"user@start-end"``, ids); keys of a rare length,
    and every key without numpy, go one by one.

    >>> keys = [b"21", b"foobar", b"abc", b"", b"client1", b"client2", b"client3"] * 10
    >>> positive_hashes(keys) == [murmur2(k) & 0x7FFFFFFF for k in keys]
    True
    """
    out = [0] * len(keys)
    by_length: dict[int, list[int]] = {}
    for i, key in enumerate(keys):
        at = by_length.get(len(key))
        if at is None:
            by_length[len(key)] = [i]
        else:
            at.append(i)
    for length, at in by_length.items():
        if _np is None or len(at) < _COLUMN_MIN:
            for i in at:
                out[i] = _positive_hash(keys[i])
            continue
        for i, h in zip(at, _column_hashes([keys[i] for i in at], length), strict=True):
            out[i] = h
    return out


def _column_hashes(keys: list[bytes], length: int) -> list[int]:
    """:func:`murmur2` of equal-length keys as numpy columns: the same steps, on uint32
    arrays (whose products wrap at 2**32 like the Java ints)."""
    np = _np
    rows = len(keys)
    data = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(rows, length)
    m = np.uint32(0x5BD1E995)
    h = np.full(rows, (0x9747B28C ^ length) & 0xFFFFFFFF, dtype=np.uint32)
    n4 = length >> 2
    if n4:
        words = np.ascontiguousarray(data[:, :4 * n4]).view("<u4")
        for j in range(n4):
            k = words[:, j] * m
            k ^= k >> 24
            k *= m
            h *= m
            h ^= k
    rest, base = length & 3, length & ~3
    if rest == 3:
        h ^= data[:, base + 2].astype(np.uint32) << 16
    if rest >= 2:
        h ^= data[:, base + 1].astype(np.uint32) << 8
    if rest:
        h ^= data[:, base].astype(np.uint32)
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    h &= 0x7FFFFFFF
    result: list[int] = h.tolist()
    return result


_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * 0xCC9E2D51) & _M32, 15) * 0x1B873593) & _M32


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & _M32


def spark_hash_long(value: int, seed: int = 42) -> int:
    """Spark SQL's ``hash()`` of a bigint (Murmur3 x86_32 ``hashLong``, seed 42), as a signed
    32-bit integer.

    >>> spark_hash_long(0), spark_hash_long(1)
    (-1670924195, -1712319331)
    """
    value &= 0xFFFFFFFFFFFFFFFF
    h1 = _mix_h1(seed & _M32, _mix_k1(value & _M32))
    h1 = _mix_h1(h1, _mix_k1(value >> 32))
    return _fmix(h1, 8)


def spark_hash_bytes(data: bytes, seed: int = 42) -> int:
    """Spark SQL's ``hash()`` of a binary value (``Murmur3_x86_32.hashUnsafeBytes``, seed 42,
    whose tail bytes are mixed one by one as signed bytes), as a signed 32-bit integer.

    >>> spark_hash_bytes(b""), spark_hash_bytes(b"abc")
    (142593372, 1322437556)
    """
    length = len(data)
    aligned = length - length % 4
    h1 = seed & _M32
    for i in range(0, aligned, 4):
        h1 = _mix_h1(h1, _mix_k1(int.from_bytes(data[i:i + 4], "little")))
    for i in range(aligned, length):
        byte = data[i]
        h1 = _mix_h1(h1, _mix_k1((byte - 256 if byte > 127 else byte) & _M32))
    return _fmix(h1, length)


def _fmix(h1: int, length: int) -> int:
    """Murmur3's finalization, as a signed 32-bit integer."""
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _M32
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _M32
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def task_of(key: bytes | None, route: int | None, tasks: int) -> int:
    """The task of a record written to a repartition topic: the partition its sink chose
    (``route``), else Spark SQL's ``pmod(hash(key), tasks)`` (a null key hashes to the seed,
    42)."""
    if route is not None:
        return route
    h = 42 if key is None else spark_hash_bytes(key)
    return h % tasks
