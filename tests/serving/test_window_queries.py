"""Window and session queries of serving stores, SQLite and PostgreSQL alike: windows of a key by
start-time range (one scan of encoded keys), of every key, sessions of a key; over HTTP too."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamtable import Windowed
from streamtable.serving import PostgresServingStore, serving_store
from streamtable.serving.base import ServingStore, StoreChange
from streamtable.serving.codec import encode_key, encode_value


def put(store: str, key: Any, value: Any, timestamp: int = 0, task: int = 0) -> StoreChange:
    return (store, encode_key(key), encode_value((value, timestamp)), task)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServingStore]:
    app = f"app-{uuid.uuid4().hex[:10]}"
    location = (request.getfixturevalue("postgres_url") if request.param == "postgres"
                else str(tmp_path / "serving.db"))
    s = serving_store(location, app)
    yield s
    if isinstance(s, PostgresServingStore):
        s.close()


# starts around byte boundaries (255/256), single digits against two, a negative one; keys whose
# encodings share a prefix ("a" / "ab") and of other types
WINDOWS = [("a", -5), ("a", 9), ("a", 10), ("a", 255), ("a", 256), ("ab", 9), (1, 10),
           (("t", 1), 10)]


def test_window_queries(store: ServingStore) -> None:
    assert store.apply(0, [put("w", Windowed(k, s, s + 10), f"{k}@{s}", s + 1, task=s % 2)
                           for k, s in WINDOWS])
    view: Any = store.view("w", "window")
    assert view.fetch("a", 0, 255) == [(9, "a@9"), (10, "a@10"), (255, "a@255")]
    assert view.fetch("a") == [(-5, "a@-5"), (9, "a@9"), (10, "a@10"), (255, "a@255"),
                               (256, "a@256")]
    assert view.fetch("ab", 0, 100) == [(9, "ab@9")]
    assert view.fetch(("t", 1), 10, 10) == [(10, "('t', 1)@10")]
    assert view.fetch("b", 0, 100) == []
    assert view.fetch_windows("a", 256, 300) == [(Windowed("a", 256, 266), "a@256")]
    assert view.fetch_all(9, 10) == [
        (Windowed(1, 10, 20), "1@10"), (Windowed("a", 9, 19), "a@9"),
        (Windowed("a", 10, 20), "a@10"), (Windowed("ab", 9, 19), "ab@9"),
        (Windowed(("t", 1), 10, 20), "('t', 1)@10")]
    assert view.get(Windowed("a", 10, 20)) == "a@10"
    assert view.get_with_timestamp(Windowed("a", 10, 20)) == ("a@10", 11)
    assert len(view) == len(WINDOWS)
    # expired windows leave the serving store as deletions of the batch
    assert store.apply(1, [("w", encode_key(Windowed("a", -5, 5)), None, 1),
                           ("w", encode_key(Windowed("a", 9, 19)), None, 1)])
    assert view.fetch("a", -100, 10) == [(10, "a@10")]


def test_session_queries(store: ServingStore) -> None:
    assert store.apply(0, [put("s", Windowed("u", 0, 4), 2), put("s", Windowed("u", 20, 20), 1),
                           put("s", Windowed("v", 3, 9), 5)])
    view: Any = store.view("s", "session")
    assert view.fetch("u") == [(Windowed("u", 0, 4), 2), (Windowed("u", 20, 20), 1)]
    assert view.find_sessions("u", 5, 30) == [(Windowed("u", 20, 20), 1)]
    assert view.find_sessions("u", 0, 19) == [(Windowed("u", 0, 4), 2)]
    assert view.fetch_all() == [(Windowed("u", 0, 4), 2), (Windowed("u", 20, 20), 1),
                                (Windowed("v", 3, 9), 5)]


def test_window_and_session_queries_over_http(tmp_path: Path) -> None:
    import httpx

    from streamtable.kafka.broker import free_port
    from streamtable.serving.http import QueryServer, create_query_api

    serving = serving_store(str(tmp_path / "serving.db"), "app")
    assert serving.apply(0, [put("w", Windowed(k, s, s + 10), s, task=0) for k, s in WINDOWS]
                         + [put("s", Windowed("u", 0, 4), 2), put("s", Windowed("u", 20, 20), 1)])
    views = {"w": serving.view("w", "window"), "s": serving.view("s", "session"),
             "kv": serving.view("w")}
    server = QueryServer(create_query_api(views), port=free_port()).start()  # type: ignore[arg-type]
    try:
        with httpx.Client(base_url=server.url, timeout=5) as client:
            assert client.get("/stores/w/windows/a", params={"from": 0, "to": 10}).json() == [
                {"key": "a", "start": 9, "end": 19, "value": 9},
                {"key": "a", "start": 10, "end": 20, "value": 10}]
            assert client.get('/stores/w/windows/"ab"').json() == [
                {"key": "ab", "start": 9, "end": 19, "value": 9}]
            assert [w["key"] for w in client.get(
                "/stores/w/windows", params={"from": 10, "to": 10}).json()] == [1, "a", ["t", 1]]
            assert client.get("/stores/s/sessions/u").json() == [
                {"key": "u", "start": 0, "end": 4, "value": 2},
                {"key": "u", "start": 20, "end": 20, "value": 1}]
            assert client.get("/stores/s/sessions/u", params={"earliest_end": 5}).json() == [
                {"key": "u", "start": 20, "end": 20, "value": 1}]
            assert client.get("/stores/kv/windows/a").status_code == 400
            assert client.get("/stores/w/sessions/a").status_code == 400
            assert client.get("/stores/nope/windows/a").status_code == 404
            # a plain key is no key of a window store: 404, pointing to the key's windows
            found = client.get("/stores/w/keys/a")
            assert found.status_code == 404
            assert found.json()["detail"] == (
                "no key 'a' in store 'w' (a window store: its keys are windows; the windows of "
                "'a' are at /stores/w/windows/a)")
            assert client.get(found.json()["detail"].rsplit(" ", 1)[1][:-1]).status_code == 200
            absent = client.get("/stores/w/keys/zz")
            assert absent.status_code == 404
            assert absent.json()["detail"] == (
                "no key 'zz' in store 'w' (a window store: no windows of it either)")
            assert client.get("/stores/s/keys/u").json()["detail"].endswith(
                "the sessions of 'u' are at /stores/s/sessions/u)")
            assert client.get("/stores/kv/keys/zz").json()["detail"] == "no key 'zz' in store 'kv'"
    finally:
        server.stop()
