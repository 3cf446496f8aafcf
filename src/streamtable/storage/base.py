"""The protocol of durable storage: named byte objects every task of an application can reach,
written atomically. A backend is one new file implementing :class:`DurableStorage` (a
directory: ``storage/local.py``; a ``pyarrow.fs`` URL: ``storage/arrow.py``; memory:
``storage/memory.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol


class DurableStorage(Protocol):
    """Byte objects under one location, named by ``/``-separated relative paths. ``write``
    is atomic (a reader sees the whole old object or the whole new one) and durable when it
    returns; ``list(directory)`` gives the names of the objects directly in it, sorted.
    Implementations must be picklable: executors use them."""

    location: str

    def read(self, name: str) -> bytes: ...

    def write(self, name: str, data: bytes | Iterable[bytes]) -> None:
        """Write the object whole (``data`` may come in parts)."""
        ...

    def delete(self, name: str) -> None: ...

    def exists(self, name: str) -> bool: ...

    def list(self, directory: str) -> list[str]: ...

    def clear(self) -> None:
        """Delete everything under the location."""
        ...
