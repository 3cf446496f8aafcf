"""The serving stores against real databases: every behaviour of the ``ServingStore`` port on both
SQLite and PostgreSQL (``postgres_url``: a server started for the session), then what only the
PostgreSQL store has (several applications in one database, connections per thread)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from streamtable.serving import (
    PostgresServingStore,
    SqliteServingStore,
    is_postgres_url,
    serving_store,
)
from streamtable.serving.base import ServingStore, StoreChange
from streamtable.serving.codec import encode_key, encode_value
from streamtable.serving.postgres import table_names


def put(store: str, key: Any, value: Any, timestamp: int = 0, task: int = 0) -> StoreChange:
    return (store, encode_key(key), encode_value((value, timestamp)), task)


def delete(store: str, key: Any, task: int = 0) -> StoreChange:
    return (store, encode_key(key), None, task)


class Backend:
    """Opens serving stores of one kind: ``location(app)`` is what ``serving_store`` is given."""

    def __init__(self, kind: str, base: str) -> None:
        self.kind = kind
        self.base = base
        self._opened: list[ServingStore] = []

    def location(self, app: str) -> str:
        return self.base if self.kind == "postgres" else str(Path(self.base) / app / "serving.db")

    def open(self, app: str) -> ServingStore:
        store = serving_store(self.location(app), app)
        self._opened.append(store)
        return store

    def close(self) -> None:
        for store in self._opened:
            if isinstance(store, PostgresServingStore):
                store.close()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    base = (request.getfixturevalue("postgres_url") if request.param == "postgres"
            else str(tmp_path))
    b = Backend(request.param, base)
    yield b
    b.close()


@pytest.fixture
def app() -> str:
    """A fresh application id: tests share the PostgreSQL database, not their tables."""
    return f"app-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def store(backend: Backend, app: str) -> ServingStore:
    return backend.open(app)


def test_serving_store_picks_the_store_by_location(backend: Backend, app: str) -> None:
    expected = PostgresServingStore if backend.kind == "postgres" else SqliteServingStore
    assert isinstance(backend.open(app), expected)
    assert is_postgres_url(backend.location(app)) == (backend.kind == "postgres")


def test_apply_then_read_everything(store: ServingStore) -> None:
    assert store.last_batch() == -1
    assert store.apply(0, [
        put("counts", "b", 2, 20, task=1), put("counts", "a", 1, 10, task=0),
        put("counts", "ab", 12, 30, task=1), put("counts", 10, "ten", task=2),
        put("counts", 2, "two", task=2), put("counts", b"bytes", "b", task=0),
        put("counts", ("t", 1), {1, 2}, task=0), put("other", "a", "other-a"),
    ])
    assert store.last_batch() == 0
    assert store.stores() == ["counts", "other"]
    view = store.view("counts")
    assert view.name == "counts"
    assert view.get("a") == 1 and view.get("missing") is None
    assert view.get(("t", 1)) == {1, 2}
    assert view.get_with_timestamp("b") == (2, 20) and view.get_with_timestamp("x") is None
    # key order: numbers numerically, then strings, bytes, tuples
    assert [k for k, _ in view.all()] == [2, 10, "a", "ab", "b", b"bytes", ("t", 1)]
    assert list(view.range("a", "ab")) == [("a", 1), ("ab", 12)]
    assert list(view.range(None, 5)) == [(2, "two")]
    assert [k for k, _ in view.range("b")] == ["b", b"bytes", ("t", 1)]
    assert list(view.prefix_scan("a")) == [("a", 1), ("ab", 12)]
    assert list(view.prefix_scan(b"by")) == [(b"bytes", "b")]
    assert view.keys_of_task(0) == ["a", b"bytes", ("t", 1)]
    assert view.keys_of_task(2) == [2, 10] and view.keys_of_task(7) == []
    assert len(view) == view.approximate_num_entries() == 7
    assert view.to_dict()["ab"] == 12
    assert store.view("other").to_dict() == {"a": "other-a"}
    assert store.view("nothing").to_dict() == {} and len(store.view("nothing")) == 0


def test_later_batches_update_move_and_delete(store: ServingStore) -> None:
    assert store.apply(0, [put("s", "a", 1, task=0), put("s", "b", 2), put("gone", "x", 0)])
    assert store.apply(3, [put("s", "a", 10, 99, task=1), delete("s", "b"),
                           delete("s", "never-there"), delete("gone", "x")])
    view = store.view("s")
    assert view.to_dict() == {"a": 10}
    assert view.get_with_timestamp("a") == (10, 99)
    assert view.keys_of_task(0) == [] and view.keys_of_task(1) == ["a"]
    assert store.stores() == ["s"]
    assert store.last_batch() == 3


def test_a_replayed_batch_changes_nothing(store: ServingStore) -> None:
    assert store.apply(0, [put("s", "a", 1)])
    assert store.apply(1, [put("s", "a", 2), put("s", "b", 2)])
    assert not store.apply(1, [put("s", "a", 3), delete("s", "b")])   # the same id again
    assert not store.apply(0, [put("s", "c", 0)])                      # an older one
    assert store.view("s").to_dict() == {"a": 2, "b": 2}
    assert store.last_batch() == 1
    assert store.apply(2, [delete("s", "b")])
    assert store.view("s").to_dict() == {"a": 2}


def _changes_then_raise() -> Iterator[StoreChange]:
    yield delete("s", "a")
    yield put("s", "new", 1)
    raise RuntimeError("the batch failed while its changes were read")


def _changes_the_database_refuses() -> list[StoreChange]:
    # a key the NOT NULL column refuses, after a deletion and an upsert that went through
    refused: Any = ("s", None, encode_value((1, 0)), 0)
    return [delete("s", "a"), put("s", "new", 1), refused]


@pytest.mark.parametrize("changes", [_changes_then_raise, _changes_the_database_refuses],
                         ids=["changes-raise", "database-refuses"])
def test_an_apply_that_fails_midway_applies_nothing(
        store: ServingStore, changes: Callable[[], Any]) -> None:
    assert store.apply(0, [put("s", "a", 1), put("s", "b", 2)])
    with pytest.raises(Exception) as failure:
        store.apply(1, changes())
    assert not isinstance(failure.value, AssertionError)
    assert store.view("s").to_dict() == {"a": 1, "b": 2}
    assert store.last_batch() == 0
    # the connection is usable again, and the batch applies when retried
    assert store.apply(1, [delete("s", "a"), put("s", "new", 1)])
    assert store.view("s").to_dict() == {"b": 2, "new": 1}


def test_reset_forgets_rows_and_batch(store: ServingStore) -> None:
    assert store.apply(4, [put("s", "a", 1)])
    store.reset()
    assert store.last_batch() == -1 and store.stores() == [] and store.view("s").to_dict() == {}
    assert store.apply(0, [put("s", "b", 2)])
    assert store.view("s").to_dict() == {"b": 2}


def test_a_store_opened_again_continues(backend: Backend, app: str) -> None:
    """What a restarted (or moved) application, or a query process, sees."""
    first = backend.open(app)
    assert first.apply(0, [put("s", "a", 1)])
    again = backend.open(app)
    assert again.last_batch() == 0 and again.view("s").to_dict() == {"a": 1}
    assert not again.apply(0, [put("s", "a", 2)])
    assert again.apply(1, [put("s", "a", 3)])
    assert first.view("s").get("a") == 3


_READER = textwrap.dedent("""
    import json, sys, time
    from streamtable.serving import serving_store

    location, app, wanted = sys.argv[1], sys.argv[2], int(sys.argv[3])
    view = serving_store(location, app).view("s")
    snapshots, deadline = [], time.monotonic() + 20
    while time.monotonic() < deadline:
        rows = view.to_dict()
        if rows:
            snapshots.append(sorted(set(rows.values())))
            if len({tuple(s) for s in snapshots}) >= wanted:
                break
        time.sleep(0.005)
    print(json.dumps(snapshots))
""")


def test_a_reader_in_another_process_sees_whole_batches_while_a_writer_applies(
        backend: Backend, app: str) -> None:
    writer = backend.open(app)
    keys = [f"k{i}" for i in range(20)]
    assert writer.apply(0, [put("s", k, 0, task=i % 3) for i, k in enumerate(keys)])
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        batch = 1
        try:
            while not stop.is_set():
                # every batch sets all keys to its id: a snapshot mixing ids saw half a batch
                assert writer.apply(batch, [put("s", k, batch, task=i % 3)
                                            for i, k in enumerate(keys)])
                batch += 1
                stop.wait(0.01)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    thread = threading.Thread(target=write)
    thread.start()
    try:
        reader = subprocess.run(
            [sys.executable, "-c", _READER, backend.location(app), app, "5"],
            capture_output=True, text=True, timeout=60)
    finally:
        stop.set()
        thread.join(30)
    assert not errors, errors
    assert reader.returncode == 0, reader.stderr
    snapshots = json.loads(reader.stdout)
    assert all(len(s) == 1 for s in snapshots), [s for s in snapshots if len(s) != 1]
    seen = [s[0] for s in snapshots]
    assert seen == sorted(seen), "the reader went back in time"
    assert len(set(seen)) >= 5, seen


def test_threads_query_one_store_while_it_applies(store: ServingStore) -> None:
    """The HTTP server answers from several threads through one store."""
    keys = [f"k{i}" for i in range(10)]
    assert store.apply(0, [put("s", k, 0) for k in keys])
    view = store.view("s")
    stop = threading.Event()
    problems: list[Any] = []

    def read() -> None:
        try:
            while not stop.is_set():
                values = set(view.to_dict().values())
                if len(values) != 1 or view.get("k0") is None or len(view) != 10:
                    problems.append(values)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            problems.append(e)

    readers = [threading.Thread(target=read) for _ in range(6)]
    for t in readers:
        t.start()
    try:
        for batch in range(1, 40):
            assert store.apply(batch, [put("s", k, batch) for k in keys])
    finally:
        stop.set()
        for t in readers:
            t.join(30)
    assert not problems, problems[:5]
    assert set(view.to_dict().values()) == {39}


# PostgreSQL only


def test_two_applications_in_one_database_are_separate(postgres_url: str, app: str) -> None:
    with PostgresServingStore(postgres_url, app + "-a") as a, \
            PostgresServingStore(postgres_url, app + "-b") as b:
        assert a.apply(5, [put("counts", "x", "from a"), put("only-a", "y", 1)])
        assert b.apply(0, [put("counts", "x", "from b")])     # batch ids are per application
        assert (a.last_batch(), b.last_batch()) == (5, 0)
        assert a.view("counts").to_dict() == {"x": "from a"}
        assert b.view("counts").to_dict() == {"x": "from b"}
        assert a.stores() == ["counts", "only-a"] and b.stores() == ["counts"]
        a.reset()
        assert a.stores() == [] and b.view("counts").get("x") == "from b"
        assert b.last_batch() == 0


def test_tables_are_named_after_the_application_and_created_once(
        postgres_url: str, app: str) -> None:
    import psycopg

    # several query processes starting at once against a fresh database
    opened: list[PostgresServingStore] = []
    errors: list[BaseException] = []

    def open_store() -> None:
        try:
            opened.append(PostgresServingStore(postgres_url, app))
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=open_store) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert opened[0].apply(0, [put("s", "a", 1)])
    assert all(s.view("s").get("a") == 1 for s in opened)
    for s in opened:
        s.close()
    with psycopg.connect(postgres_url) as conn:
        tables = {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE %s", (f"%{app}%",))}
    assert tables == {f"streamtable_{app}_kv", f"streamtable_{app}_applied"}


def test_a_long_application_id_gets_short_distinct_tables(postgres_url: str, app: str) -> None:
    long_a, long_b = app + "-" + "x" * 60 + "a", app + "-" + "x" * 60 + "b"
    assert table_names(long_a) != table_names(long_b)
    with PostgresServingStore(postgres_url, long_a) as a, \
            PostgresServingStore(postgres_url, long_b) as b:
        assert a.apply(0, [put("s", "k", "a")]) and b.apply(0, [put("s", "k", "b")])
        assert (a.view("s").get("k"), b.view("s").get("k")) == ("a", "b")


def test_the_store_reconnects_after_losing_its_connection(postgres_url: str, app: str) -> None:
    import psycopg

    with PostgresServingStore(postgres_url, app) as store:
        assert store.apply(0, [put("s", "a", 1)])
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            killed = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                   "WHERE application_name = %s", (f"streamtable:{app}",))
            assert killed.fetchall() == [(True,)]
        with pytest.raises(psycopg.OperationalError):
            store.view("s").get("a")
        assert store.view("s").get("a") == 1
        assert store.apply(1, [put("s", "a", 2)]) and store.view("s").get("a") == 2


def test_without_psycopg_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what an environment without it sees
    with pytest.raises(ImportError, match=r"streamtable\[postgres\]"):
        PostgresServingStore("postgresql://localhost/none", "app")


# the command line: query processes that hold no state, answering from one PostgreSQL

WORD_COUNT = Path(__file__).resolve().parents[2] / "examples" / "word_count" / "app.py"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamtable.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def test_query_and_serve_processes_answer_from_one_postgresql(
        postgres_url: str, app: str, tmp_path: Path) -> None:
    import httpx

    from streamtable.kafka.broker import free_port

    options = ["--application-id", app, "--serving-url", postgres_url,
               "--state-dir", str(tmp_path / "state")]
    with PostgresServingStore(postgres_url, app) as writer:   # as the streams application does
        assert writer.apply(0, [put("counts-store", "kafka", 3), put("counts-store", "streams", 1)])
        query = _cli("query", str(WORD_COUNT), "counts-store", "kafka", *options, cwd=tmp_path)
        assert (query.returncode, query.stdout.strip()) == (0, "3"), query.stderr
        wrong = _cli("query", str(WORD_COUNT), "nope", *options, cwd=tmp_path)
        assert wrong.returncode != 0 and "queryable stores: ['counts-store']" in wrong.stderr

        ports = [free_port(), free_port()]
        servers = [subprocess.Popen(
            [sys.executable, "-m", "streamtable.cli", "serve", str(WORD_COUNT), *options,
             "--http-port", str(port)], cwd=tmp_path, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True) for port in ports]
        try:
            clients = [httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5)
                       for port in ports]
            for client, server in zip(clients, servers, strict=True):
                _wait_until_serving(client, server)
                assert client.get("/stores").json() == ["counts-store"]
                assert client.get("/stores/counts-store/keys/kafka").json()["value"] == 3
            assert writer.apply(1, [put("counts-store", "kafka", 4),
                                    delete("counts-store", "streams")])
            for client in clients:
                assert client.get("/stores/counts-store").json() == [
                    {"key": "kafka", "value": 4}]
                assert client.get("/stores/counts-store/keys/streams").status_code == 404
                client.close()
        finally:
            for server in servers:
                server.terminate()
            outputs = [server.communicate(timeout=30)[0] for server in servers]
        assert [s.returncode for s in servers] == [0, 0], outputs

        reset = _cli("reset", str(WORD_COUNT), *options, cwd=tmp_path)
        assert reset.returncode == 0, reset.stderr
        assert writer.last_batch() == -1 and writer.stores() == []


def _wait_until_serving(client: Any, server: subprocess.Popen[str]) -> None:
    import time

    import httpx

    deadline = time.monotonic() + 30
    while True:
        try:
            client.get("/stores")
            return
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the query server did not start: "
                                     f"{server.communicate(timeout=5)[0]}") from None
            time.sleep(0.1)
