"""The embedded serving store: SQLite in the application's state directory.

The Spark runtime applies each batch's changes of the queryable stores here in one transaction
together with the batch id, so a replayed batch changes nothing twice. Any process on the machine
can read it while the application runs.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

from streamtable.serving.base import StoreChange
from streamtable.serving.codec import encode_key, encode_value
from streamtable.serving.view import StoreView, VersionedStoreView, split_changes, store_view

__all__ = ["SqliteServingStore", "StoreView", "encode_key", "encode_value"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    store TEXT NOT NULL,
    key BLOB NOT NULL,
    value BLOB NOT NULL,
    task INTEGER NOT NULL,
    PRIMARY KEY (store, key)
);
CREATE TABLE IF NOT EXISTS applied (id INTEGER PRIMARY KEY CHECK (id = 0), batch INTEGER NOT NULL);
"""


class SqliteServingStore:
    """All queryable stores of one application (the embedded
    :class:`~streamtable.serving.base.ServingStore`).

    >>> import tempfile, os
    >>> s = SqliteServingStore(os.path.join(tempfile.mkdtemp(), "serving.db"))
    >>> s.apply(0, [("counts", encode_key("a"), encode_value((3, 100)), 0)])
    True
    >>> s.view("counts").get("a")
    3
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._conn() as c:
            c.executescript(_SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def last_batch(self) -> int:
        row = self._conn().execute("SELECT batch FROM applied WHERE id = 0").fetchone()
        return -1 if row is None else int(row[0])

    def apply(self, batch_id: int, changes: Iterable[StoreChange]) -> bool:
        """Apply ``(store, key, value or None, task)`` changes of ``batch_id`` once; returns False
        when the batch was applied before."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute("SELECT batch FROM applied WHERE id = 0").fetchone()
            if row is not None and row[0] >= batch_id:
                conn.execute("ROLLBACK")
                return False
            deletes, upserts = split_changes(changes)
            conn.executemany("DELETE FROM kv WHERE store = ? AND key = ?", deletes)
            conn.executemany(
                "INSERT INTO kv (store, key, value, task) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (store, key) DO UPDATE SET value = excluded.value, "
                "task = excluded.task",
                upserts,
            )
            conn.execute(
                "INSERT INTO applied (id, batch) VALUES (0, ?) "
                "ON CONFLICT (id) DO UPDATE SET batch = excluded.batch",
                (batch_id,),
            )
            conn.execute("COMMIT")
            return True
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def view(self, store: str, kind: str = "key-value") -> StoreView | VersionedStoreView:
        """The query view of ``store``, a ``key-value``, ``window``, ``session`` or
        ``versioned`` store."""
        return store_view(self, store, kind)

    def stores(self) -> list[str]:
        return [r[0] for r in self._conn().execute("SELECT DISTINCT store FROM kv ORDER BY 1")]

    def replace_stores(self, stores: Iterable[str], changes: Iterable[StoreChange]) -> None:
        """Empty ``stores`` and put ``changes`` in, in one transaction (the batch id applied
        stays)."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("DELETE FROM kv WHERE store = ?", [(s,) for s in stores])
            _, upserts = split_changes(changes)
            conn.executemany(
                "INSERT INTO kv (store, key, value, task) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (store, key) DO UPDATE SET value = excluded.value, "
                "task = excluded.task", upserts)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def reset(self) -> None:
        conn = self._conn()
        conn.execute("DELETE FROM kv")
        conn.execute("DELETE FROM applied")

    # the reads of StoreRows, for StoreView

    def read_value(self, store: str, key: bytes) -> bytes | None:
        row = self._conn().execute(
            "SELECT value FROM kv WHERE store = ? AND key = ?", (store, key)).fetchone()
        return None if row is None else row[0]

    def read_rows(self, store: str) -> list[tuple[bytes, bytes]]:
        return self._conn().execute(
            "SELECT key, value FROM kv WHERE store = ?", (store,)).fetchall()

    def read_task_keys(self, store: str, task: int) -> list[bytes]:
        rows = self._conn().execute(
            "SELECT key FROM kv WHERE store = ? AND task = ?", (store, task)).fetchall()
        return [r[0] for r in rows]

    def read_key_range(self, store: str, low: bytes, high: bytes) -> list[tuple[bytes, bytes]]:
        return self._conn().execute(
            "SELECT key, value FROM kv WHERE store = ? AND key >= ? AND key <= ? ORDER BY key",
            (store, low, high)).fetchall()

    def count_rows(self, store: str) -> int:
        return int(self._conn().execute(
            "SELECT COUNT(*) FROM kv WHERE store = ?", (store,)).fetchone()[0])
