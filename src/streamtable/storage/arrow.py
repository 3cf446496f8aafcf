"""Durable storage on any filesystem ``pyarrow.fs`` reaches: ``s3://``, ``gs://``,
``hdfs://``, ``abfs://``.

Why a filesystem and not Kafka changelog topics: a task's state is a chain of per-batch deltas
and occasional snapshots (see ``state/persistence.py``), which maps one to one onto objects. A
replayed batch overwrites its own object, so exactly-once needs no transactions; restoring a
task reads one snapshot and the deltas after it instead of replaying a topic; and an executor
needs no Kafka consumer to restore. Object stores write an object whole or not at all, so a
write is one request; on other filesystems it is a temporary file and a rename.

Options go in the URL's query string, as ``pyarrow.fs.FileSystem.from_uri`` reads them
(``s3://bucket/app?endpoint_override=127.0.0.1:9000&scheme=http``); credentials come from the
usual environment variables (``AWS_ACCESS_KEY_ID`` ...), which executors need too
(``spark.executorEnv.*``).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterable
from typing import Any

from streamtable.errors import StorageError
from streamtable.storage import write_parts

_FILESYSTEMS: dict[str, tuple[Any, str]] = {}
_LOCK = threading.Lock()

# object stores: an object appears whole when its upload completes
_ATOMIC_PUT = {"s3", "gcs", "abfs"}


def _filesystem(location: str) -> tuple[Any, str]:
    """The filesystem and root path of ``location``, made once per process."""
    with _LOCK:
        entry = _FILESYSTEMS.get(location)
        if entry is None:
            from pyarrow import fs

            entry = _FILESYSTEMS[location] = fs.FileSystem.from_uri(location)
        return entry



class ArrowStorage:
    """Objects under a ``pyarrow.fs`` URL. Picklable: it carries the URL, and each process
    connects on first use.

    >>> s = ArrowStorage("s3://state/app?endpoint_override=127.0.0.1:9000")  # doctest: +SKIP
    >>> s.write("tasks/0/1/000000000007-ab.delta", b"...")                  # doctest: +SKIP
    """

    def __init__(self, location: str) -> None:
        self.location = location

    def _fs(self) -> tuple[Any, str]:
        return _filesystem(self.location)

    def _path(self, name: str) -> tuple[Any, str]:
        fs, root = self._fs()
        return fs, f"{root.rstrip('/')}/{name}"

    def read(self, name: str) -> bytes:
        fs, path = self._path(name)
        with fs.open_input_stream(path) as f:
            return bytes(f.read())

    def write(self, name: str, data: bytes | Iterable[bytes]) -> None:
        fs, path = self._path(name)
        try:
            if fs.type_name in _ATOMIC_PUT:
                with fs.open_output_stream(path) as f:
                    write_parts(f, data)
                return
            fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
            tmp = f"{path}.tmp-{secrets.token_hex(4)}"
            with fs.open_output_stream(tmp) as f:
                write_parts(f, data)
            fs.move(tmp, path)
        except OSError as e:  # pyarrow's I/O errors are OSErrors: say where
            raise StorageError("write", f"{self.location.split('?')[0]}/{name}", e) from e

    def delete(self, name: str) -> None:
        fs, path = self._path(name)
        try:
            fs.delete_file(path)
        except FileNotFoundError:
            pass

    def exists(self, name: str) -> bool:
        from pyarrow import fs as pafs

        fs, path = self._path(name)
        return bool(fs.get_file_info(path).type == pafs.FileType.File)

    def list(self, directory: str) -> list[str]:
        from pyarrow import fs as pafs

        fs, path = self._path(directory)
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        return sorted(i.base_name for i in infos
                      if i.type == pafs.FileType.File and ".tmp-" not in i.base_name)

    def clear(self) -> None:
        fs, root = self._fs()
        try:
            fs.delete_dir(root)
        except FileNotFoundError:
            pass
