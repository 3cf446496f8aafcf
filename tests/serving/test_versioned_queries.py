"""Versioned stores in a serving store, SQLite and PostgreSQL alike: the rows a task's versioned
store committed, as the Spark runtime hands them over, answer every as-of read as the task's
own store does (its history retention judged by the stream time of the task holding the key);
over HTTP (``/keys/{key}?as_of=``, ``/versions/{key}``) and ``streamtable query --as-of`` too."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamtable.serving import PostgresServingStore, serving_store
from streamtable.serving.base import ServingStore
from streamtable.serving.codec import encode_key, encode_value
from streamtable.state.stores import InMemoryKeyValueStore
from streamtable.state.versioned import (
    VERSIONED_META_STORE,
    ReadOnlyVersionedKeyValueStore,
    StoreVersionRows,
    VersionedKeyValueStore,
    VersionedRecord,
)


@pytest.fixture(params=["sqlite", "postgres"])
def serving(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServingStore]:
    app = f"app-{uuid.uuid4().hex[:10]}"
    location = (request.getfixturevalue("postgres_url") if request.param == "postgres"
                else str(tmp_path / "serving.db"))
    s = serving_store(location, app)
    yield s
    if isinstance(s, PostgresServingStore):
        s.close()


class Task:
    """One task's versioned store, committing its changes to a serving store as batches."""

    def __init__(self, task: int, retention: int) -> None:
        self.task = task
        self.rows = InMemoryKeyValueStore("rates", track_changes=True)
        self.store = VersionedKeyValueStore(self.rows, InMemoryKeyValueStore(VERSIONED_META_STORE),
                                            history_retention=retention, segment_interval=7,
                                            task=task)

    def changes(self) -> list[Any]:
        return [("rates", encode_key(k), None if v is None else encode_value(v), self.task)
                for k, v in self.rows.drain_changes().items()]


def test_serving_answers_as_the_tasks_store(serving: ServingStore) -> None:
    """Two tasks, each with keys of its own and a stream time of its own; random puts in and
    out of order, committed in batches: every read of the serving view equals the task's."""
    rng = random.Random(7)
    tasks = [Task(0, 20), Task(1, 20)]
    keys = {0: ["a", "b", 1], 1: ["c", ("t", 2)]}
    batch = 0
    for _ in range(12):
        for task in tasks:
            observed = max(task.store.observed_stream_time, 0)
            for _ in range(rng.randint(1, 6)):
                ts = max(0, observed + rng.randint(-25, 8))
                value = None if rng.random() < 0.2 else rng.randint(0, 99)
                task.store.put(rng.choice(keys[task.task]), value, ts)
        assert serving.apply(batch, [c for t in tasks for c in t.changes()])
        batch += 1
        view: Any = serving.view("rates", "versioned")
        for task in tasks:
            local = ReadOnlyVersionedKeyValueStore(StoreVersionRows(task.rows), "rates")
            for key in keys[task.task]:
                assert view.get_with_timestamp(key) == local.get_with_timestamp(key)
                assert view.versions(key) == local.versions(key), key
                for as_of in range(-1, task.store.observed_stream_time + 3):
                    assert view.get_record(key, as_of) == local.get_record(key, as_of), (
                        key, as_of)
                    assert view.get(key, as_of=as_of) == local.get(key, as_of=as_of)
            assert sorted(view.keys_of_task(task.task), key=str) == sorted(
                (k for k in keys[task.task] if local.get(k) is not None), key=str)
        latest = {k: v for t in tasks for k, v in
                  ReadOnlyVersionedKeyValueStore(StoreVersionRows(t.rows), "rates").all()}
        assert view.to_dict() == latest and len(view) == len(latest)


def test_an_as_of_read_older_than_the_retention_sees_only_an_old_enough_latest(
        serving: ServingStore) -> None:
    task = Task(0, 100)
    task.store.put("k", "v1", 10)
    task.store.put("k", "v2", 300)
    task.store.put("old", "o", 5)  # refused: older than 300 - 100
    task.store.put("other", "x", 250)
    assert serving.apply(0, task.changes())
    view: Any = serving.view("rates", "versioned")
    assert view.get("k", as_of=150) is None  # v1 was valid then, but 150 < 300 - 100
    assert view.get("k", as_of=200) == "v1"
    assert view.get_record("other", as_of=10_000) == VersionedRecord("x", 250)
    assert view.get("old") is None


def test_versions_over_http_and_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    import httpx

    from streamtable.cli import main
    from streamtable.config import StreamsConfig
    from streamtable.kafka.broker import free_port
    from streamtable.serving import configured_serving_store
    from streamtable.serving.http import QueryServer, create_query_api

    state = tmp_path / "state"
    serving = configured_serving_store(StreamsConfig({"application.id": "fx",
                                                      "state.dir": str(state)}))
    task = Task(0, 60_000)
    task.store.put("EUR", 1.10, 1_000)
    task.store.put("EUR", 1.12, 5_000)
    task.store.put("EUR", 1.11, 3_000)
    task.store.put("USD", 0.9, 2_000)
    assert serving.apply(0, task.changes())
    plain = serving_store(str(tmp_path / "plain.db"), "plain")
    plain.apply(0, [("counts", encode_key("a"), encode_value((3, 0)), 0)])
    views = {"rates": serving.view("rates", "versioned"), "counts": plain.view("counts")}
    server = QueryServer(create_query_api(views), port=free_port()).start()  # type: ignore[arg-type]
    try:
        with httpx.Client(base_url=server.url, timeout=5) as client:
            assert client.get("/stores/rates/keys/EUR").json() == {
                "key": "EUR", "value": 1.12, "timestamp": 5_000, "valid_to": None}
            assert client.get("/stores/rates/keys/EUR", params={"as_of": 4_000}).json() == {
                "key": "EUR", "value": 1.11, "timestamp": 3_000, "valid_to": 5_000}
            missing = client.get("/stores/rates/keys/EUR", params={"as_of": 999})
            assert missing.status_code == 404
            assert missing.json()["detail"] == "no key 'EUR' in store 'rates' as of 999"
            assert client.get("/stores/rates/versions/EUR", params={"from": 2_000}).json() == [
                {"value": 1.10, "timestamp": 1_000, "valid_to": 3_000},
                {"value": 1.11, "timestamp": 3_000, "valid_to": 5_000},
                {"value": 1.12, "timestamp": 5_000, "valid_to": None}]
            assert client.get("/stores/rates").json() == [{"key": "EUR", "value": 1.12},
                                                          {"key": "USD", "value": 0.9}]
            assert client.get("/stores/counts/keys/a", params={"as_of": 1}).status_code == 400
            assert client.get("/stores/counts/versions/a").status_code == 400
            assert client.get("/stores/counts/keys/a").json() == {"key": "a", "value": 3}
    finally:
        server.stop()

    app = tmp_path / "fx.py"
    app.write_text(
        "from streamtable import Materialized, Stores, StreamsBuilder\n"
        "config = {'application.id': 'fx'}\n"
        "def build_topology():\n"
        "    b = StreamsBuilder()\n"
        "    b.table('rates', Materialized.as_(\n"
        "        Stores.persistent_versioned_key_value_store('rates', 60_000)))\n"
        "    return b.build()\n")
    args = ["query", str(app), "rates", "EUR", "--state-dir", str(state)]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out) == 1.12
    assert main([*args, "--as-of", "3500"]) == 0
    assert json.loads(capsys.readouterr().out) == 1.11
    assert main([*args, "--as-of", "10"]) == 1
    assert "no key 'EUR' in store 'rates' of fx as of 10" in capsys.readouterr().err
    assert main(["query", str(app), "rates", "--state-dir", str(state)]) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == [
        ["EUR", 1.12], ["USD", 0.9]]
