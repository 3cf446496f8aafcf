"""Durable storage the tasks of an application share: task state and the sink's batch markers.

:func:`storage_at` picks the implementation of
:class:`~streamtable.storage.base.DurableStorage` for a location: a plain path or ``file://``
URL is a local directory (:mod:`streamtable.storage.local`), any other URL scheme (``s3://``,
``gs://``, ``hdfs://``, ...) goes through ``pyarrow.fs`` (:mod:`streamtable.storage.arrow`), and
``memory://NAME`` is this process's memory (:mod:`streamtable.storage.memory`).

>>> import tempfile
>>> storage = storage_at(tempfile.mkdtemp())
>>> storage.write("a/b.bin", b"x")
>>> storage.list("a"), storage.read("a/b.bin")
(['b.bin'], b'x')
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlparse

from streamtable.storage.base import DurableStorage

__all__ = ["is_local", "join", "storage_at", "write_parts"]


def is_local(location: str) -> bool:
    """True for a plain path or a ``file://`` URL: storage only this machine may see, unless
    the path is a shared mount."""
    scheme = urlparse(location).scheme
    return scheme in ("", "file") or len(scheme) == 1  # "C:" on Windows


def join(location: str, *parts: str) -> str:
    """``location`` with ``parts`` appended as path segments (a URL's query string is kept)."""
    if is_local(location):
        return "/".join([location.rstrip("/"), *parts])
    base, sep, query = location.partition("?")
    return "/".join([base.rstrip("/"), *parts]) + sep + query


def write_parts(f: Any, data: bytes | Iterable[bytes]) -> None:
    """Write ``data`` (bytes, or parts of it) to the open binary file ``f``."""
    for part in ((data,) if isinstance(data, bytes) else data):
        f.write(part)


def storage_at(location: str) -> DurableStorage:
    """The durable storage rooted at ``location`` (a path or a URL)."""
    if location.startswith("memory://"):
        from streamtable.storage.memory import MemoryStorage

        return MemoryStorage(location)
    if is_local(location):
        from streamtable.storage.local import LocalStorage

        path = location[len("file://"):] if location.startswith("file://") else location
        return LocalStorage(path)
    from streamtable.storage.arrow import ArrowStorage

    return ArrowStorage(location)
