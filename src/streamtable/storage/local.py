"""Durable storage in a local directory (or a shared mount): atomic, fsynced writes."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterable

from streamtable.errors import StorageError
from streamtable.storage import write_parts


class LocalStorage:
    """Files under ``root``; a write goes to a temporary file, is fsynced and renamed into
    place, so a reader sees the whole old file or the whole new one.

    >>> import tempfile
    >>> s = LocalStorage(tempfile.mkdtemp())
    >>> s.write("t/0.delta", b"abc"); s.exists("t/0.delta"), s.list("t"), s.list("nothing")
    (True, ['0.delta'], [])
    """

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.location = self.root

    def _path(self, name: str) -> str:
        return os.path.join(self.root, name)

    def read(self, name: str) -> bytes:
        path = self._path(name)
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise
        except OSError as e:
            raise StorageError("read", path, e) from e

    def write(self, name: str, data: bytes | Iterable[bytes]) -> None:
        path = self._path(name)
        directory = os.path.dirname(path)
        tmp = f"{path}.tmp-{secrets.token_hex(4)}"
        try:
            os.makedirs(directory, exist_ok=True)
            with open(tmp, "wb") as f:
                write_parts(f, data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            # a full disk, a read-only mount, a path that is a file: say where and why
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise StorageError("write", path, e) from e

    def delete(self, name: str) -> None:
        try:
            os.remove(self._path(name))
        except FileNotFoundError:
            pass
        except OSError as e:
            raise StorageError("delete", self._path(name), e) from e

    def exists(self, name: str) -> bool:
        return os.path.isfile(self._path(name))

    def list(self, directory: str) -> list[str]:
        try:
            names = os.listdir(self._path(directory))
        except FileNotFoundError:
            return []
        except OSError as e:
            raise StorageError("list", self._path(directory), e) from e
        return sorted(n for n in names if ".tmp-" not in n)

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
