"""Durable storage in this process's memory: the test driver's batch mode keeps task state
here, so the state path (checkout, commit, deltas, snapshots) runs without a disk or Spark.

Every :class:`MemoryStorage` of one location (``memory://<name>``) sees the same objects while
the process lives; nothing survives it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

_SPACES: dict[str, dict[str, bytes]] = {}
_LOCK = threading.Lock()


class MemoryStorage:
    """Objects in a dict shared by every instance of the same ``location``.

    >>> s = MemoryStorage("memory://doc")
    >>> s.write("t/0.delta", [b"ab", b"c"]); MemoryStorage("memory://doc").read("t/0.delta")
    b'abc'
    >>> s.list("t"), s.exists("t/1.delta")
    (['0.delta'], False)
    >>> s.clear(); s.list("t")
    []
    """

    def __init__(self, location: str) -> None:
        self.location = location

    @property
    def _objects(self) -> dict[str, bytes]:
        with _LOCK:
            return _SPACES.setdefault(self.location, {})

    def read(self, name: str) -> bytes:
        try:
            return self._objects[name]
        except KeyError:
            raise FileNotFoundError(f"{self.location}/{name}") from None

    def write(self, name: str, data: bytes | Iterable[bytes]) -> None:
        self._objects[name] = data if isinstance(data, bytes) else b"".join(data)

    def delete(self, name: str) -> None:
        self._objects.pop(name, None)

    def exists(self, name: str) -> bool:
        return name in self._objects

    def list(self, directory: str) -> list[str]:
        prefix = directory.rstrip("/") + "/"
        return sorted(n[len(prefix):] for n in list(self._objects)
                      if n.startswith(prefix) and "/" not in n[len(prefix):])

    def clear(self) -> None:
        with _LOCK:
            _SPACES.pop(self.location, None)
