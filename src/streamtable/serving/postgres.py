"""A serving store in PostgreSQL: the queryable stores of several applications in one database.

The Spark runtime applies each batch's changes here in one transaction together with the batch
id, exactly as :mod:`streamtable.serving.sqlite` does, so a replayed batch changes nothing twice.
Any number of stateless query processes (``streamtable serve --serving-url postgresql://...``)
can answer from the same database while the streams application restarts or moves.

Each application has two tables of its own, created if missing, named after its application id:
``streamtable_<application id>_kv`` (one row per store and key: the key and the ``(value,
timestamp)`` pair in the encoding of :mod:`streamtable.serving.codec`, and the task holding the
key) and ``streamtable_<application id>_applied`` (the last applied batch id). Needs psycopg 3:
``pip install 'streamtable[postgres]'``.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from streamtable.serving.base import StoreChange
from streamtable.serving.view import StoreView, VersionedStoreView, split_changes, store_view

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresServingStore", "table_names"]

log = logging.getLogger(__name__)

_PREFIX = "streamtable_"
# PostgreSQL cuts identifiers at 63 bytes; the longest suffix is "_applied" (or "_kv_task")
_MAX_APP_BYTES = 63 - len(_PREFIX) - len("_applied")
# one lock for creating tables: concurrent CREATE TABLE IF NOT EXISTS can fail otherwise
_SCHEMA_LOCK = 0x5354_5345_5256


def _import_psycopg() -> ModuleType:
    try:
        import psycopg
    except ImportError as e:
        raise ImportError(
            "PostgresServingStore needs psycopg 3, which is not installed: install streamtable's "
            "'postgres' extra (pip install 'streamtable[postgres]')"
        ) from e
    return psycopg


def table_names(application_id: str) -> tuple[str, str]:
    """The ``(rows, applied batch)`` tables of an application. An application id too long for a
    PostgreSQL identifier is cut and completed by a hash of the whole id.

    >>> table_names("word-count")
    ('streamtable_word-count_kv', 'streamtable_word-count_applied')
    >>> len(table_names("x" * 100)[1].encode())
    63
    """
    if not application_id:
        raise ValueError("the application id of a serving store must not be empty")
    app = application_id
    if len(app.encode()) > _MAX_APP_BYTES:
        digest = hashlib.sha1(application_id.encode()).hexdigest()[:8]
        app = app.encode()[:_MAX_APP_BYTES - 9].decode(errors="ignore") + "~" + digest
    return f"{_PREFIX}{app}_kv", f"{_PREFIX}{app}_applied"


class PostgresServingStore:
    """All queryable stores of one application in a PostgreSQL database (a
    :class:`~streamtable.serving.base.ServingStore`).

    ``url`` is a libpq connection string or URL (``postgresql://user:pw@host:5432/db``). Each
    thread uses a connection of its own (the HTTP server queries from several threads); reads
    run in autocommit, so each query sees whole batches. ``close()`` closes every connection.

    >>> from streamtable.serving.codec import encode_key, encode_value
    >>> s = PostgresServingStore("postgresql://localhost/streams", "word-count")  # doctest: +SKIP
    >>> s.apply(0, [("counts", encode_key("a"), encode_value((3, 100)), 0)])  # doctest: +SKIP
    True
    >>> s.view("counts").get("a")                                             # doctest: +SKIP
    3
    """

    def __init__(self, url: str, application_id: str) -> None:
        self._psycopg = _import_psycopg()
        from psycopg import sql

        self.url = url
        self.application_id = application_id
        self.tables = table_names(application_id)
        kv, applied = (sql.Identifier(t) for t in self.tables)
        index = sql.Identifier(self.tables[0] + "_task")

        def q(text: str) -> Any:
            return sql.SQL(text).format(kv=kv, applied=applied, index=index)

        self._create = [
            q("CREATE TABLE IF NOT EXISTS {kv} (store TEXT NOT NULL, key BYTEA NOT NULL, "
              "value BYTEA NOT NULL, task INTEGER NOT NULL, PRIMARY KEY (store, key))"),
            q("CREATE INDEX IF NOT EXISTS {index} ON {kv} (store, task)"),
            q("CREATE TABLE IF NOT EXISTS {applied} "
              "(id INTEGER PRIMARY KEY CHECK (id = 0), batch BIGINT)"),
            # the row writers lock (NULL: no batch applied yet)
            q("INSERT INTO {applied} (id, batch) VALUES (0, NULL) ON CONFLICT (id) DO NOTHING"),
        ]
        self._last = q("SELECT batch FROM {applied} WHERE id = 0")
        self._lock_last = q("SELECT batch FROM {applied} WHERE id = 0 FOR UPDATE")
        self._set_last = q("INSERT INTO {applied} (id, batch) VALUES (0, %s) "
                           "ON CONFLICT (id) DO UPDATE SET batch = excluded.batch")
        self._delete = q("DELETE FROM {kv} WHERE store = %s AND key = %s")
        self._upsert = q("INSERT INTO {kv} (store, key, value, task) VALUES (%s, %s, %s, %s) "
                         "ON CONFLICT (store, key) DO UPDATE SET value = excluded.value, "
                         "task = excluded.task")
        self._value = q("SELECT value FROM {kv} WHERE store = %s AND key = %s")
        self._rows = q("SELECT key, value FROM {kv} WHERE store = %s")
        self._task_keys = q("SELECT key FROM {kv} WHERE store = %s AND task = %s")
        self._count = q("SELECT COUNT(*) FROM {kv} WHERE store = %s")
        self._key_range = q("SELECT key, value FROM {kv} WHERE store = %s AND key >= %s "
                            "AND key <= %s ORDER BY key")
        self._stores = q("SELECT DISTINCT store FROM {kv}")
        self._clear_store = q("DELETE FROM {kv} WHERE store = %s")
        self._clear = [q("DELETE FROM {kv}"), q("UPDATE {applied} SET batch = NULL")]

        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: list[psycopg.Connection[Any]] = []
        conn = self._conn()
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in self._create:
                conn.execute(statement)
        log.info("serving store of %s: tables %s, %s in database %s on %s:%s",
                 application_id, *self.tables, conn.info.dbname, conn.info.host, conn.info.port)

    def _conn(self) -> psycopg.Connection[Any]:
        """This thread's connection (a new one when there is none or it was lost)."""
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = self._psycopg.connect(  # the name shows in pg_stat_activity
                self.url, autocommit=True,
                application_name=f"streamtable:{self.application_id}"[:63])
            with self._lock:
                self._conns = [c for c in self._conns if not c.closed]
                self._conns.append(conn)
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close the connections of every thread (a later call opens new ones)."""
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()

    def __enter__(self) -> PostgresServingStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def last_batch(self) -> int:
        row = self._conn().execute(self._last).fetchone()
        return -1 if row is None or row[0] is None else int(row[0])

    def apply(self, batch_id: int, changes: Iterable[StoreChange]) -> bool:
        """Apply ``(store, key, value or None, task)`` changes of ``batch_id`` in one transaction
        with the batch id; returns False (and changes nothing) when a batch id ≥ ``batch_id``
        was applied before."""
        conn = self._conn()
        with conn.transaction():
            # the applied row is the writers' lock: a concurrent apply waits, then sees our id
            row = conn.execute(self._lock_last).fetchone()
            if row is not None and row[0] is not None and row[0] >= batch_id:
                return False
            deletes, upserts = split_changes(changes)
            with conn.cursor() as cur:
                cur.executemany(self._delete, deletes)
                cur.executemany(self._upsert, upserts)
                cur.execute(self._set_last, (batch_id,))
        log.debug("%s: applied batch %d (%d upserts, %d deletions)",
                  self.application_id, batch_id, len(upserts), len(deletes))
        return True

    def view(self, store: str, kind: str = "key-value") -> StoreView | VersionedStoreView:
        """The query view of ``store``, a ``key-value``, ``window``, ``session`` or
        ``versioned`` store."""
        return store_view(self, store, kind)

    def stores(self) -> list[str]:
        return sorted(r[0] for r in self._conn().execute(self._stores))

    def replace_stores(self, stores: Iterable[str], changes: Iterable[StoreChange]) -> None:
        """Empty ``stores`` and put ``changes`` in, in one transaction (the batch id applied
        stays)."""
        conn = self._conn()
        with conn.transaction():
            conn.execute(self._lock_last)  # the writers' lock, as apply takes it
            _, upserts = split_changes(changes)
            with conn.cursor() as cur:
                cur.executemany(self._clear_store, [(s,) for s in stores])
                cur.executemany(self._upsert, upserts)

    def reset(self) -> None:
        """Forget every row and the last applied batch of this application."""
        conn = self._conn()
        with conn.transaction():
            for statement in self._clear:
                conn.execute(statement)

    # the reads of StoreRows, for StoreView

    def read_value(self, store: str, key: bytes) -> bytes | None:
        row = self._conn().execute(self._value, (store, key)).fetchone()
        return None if row is None else row[0]

    def read_rows(self, store: str) -> list[tuple[bytes, bytes]]:
        return self._conn().execute(self._rows, (store,)).fetchall()

    def read_task_keys(self, store: str, task: int) -> list[bytes]:
        return [r[0] for r in self._conn().execute(self._task_keys, (store, task))]

    def read_key_range(self, store: str, low: bytes, high: bytes) -> list[tuple[bytes, bytes]]:
        return self._conn().execute(self._key_range, (store, low, high)).fetchall()

    def count_rows(self, store: str) -> int:
        row = self._conn().execute(self._count, (store,)).fetchone()
        return 0 if row is None else int(row[0])
