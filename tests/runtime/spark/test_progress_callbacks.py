"""Each query's progress reports reach the callback its starter registered, and nothing else;
the session's listener goes once no query of it is active."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from streamtable.runtime.spark.progress import (
    _LISTENERS,
    ProgressListener,
    listen_to_progress,
    stop_listening,
)


class _Streams:
    def __init__(self) -> None:
        self.listeners: list[Any] = []
        self.active: list[str] = []

    def addListener(self, listener: Any) -> None:
        self.listeners.append(listener)

    def removeListener(self, listener: Any) -> None:
        self.listeners.remove(listener)


class _Session:
    """What the listener's registration uses of a SparkSession (no JVM: draining the listener
    bus fails, which the removal only logs)."""

    def __init__(self) -> None:
        self.streams = _Streams()
        self.sparkContext = None


def _event(name: str, end: int, latest: int) -> SimpleNamespace:
    source = SimpleNamespace(startOffset=json.dumps({"t": {"0": 0}}),
                             endOffset=json.dumps({"t": {"0": end}}),
                             latestOffset=json.dumps({"t": {"0": latest}}))
    return SimpleNamespace(progress=SimpleNamespace(
        name=name, batchId=0, batchDuration=1000, durationMs={}, sources=[source]))


@pytest.fixture
def spark():
    session = _Session()
    yield session
    _LISTENERS.pop(id(session), None)


def test_a_query_s_reports_reach_its_callback_and_its_lag_is_logged(spark, caplog):
    seen: dict[str, list[int]] = {"a": [], "b": []}

    def behind_by_7(p: Any) -> int:
        seen["a"].append(p.batchId)
        return 7

    def not_known(p: Any) -> None:
        seen["b"].append(p.batchId)

    listen_to_progress(spark, "a", behind_by_7)
    listen_to_progress(spark, "b", not_known)
    [listener] = spark.streams.listeners  # one per session
    assert isinstance(listener, ProgressListener)
    caplog.set_level(logging.INFO, logger="streamtable.progress")
    listener.onQueryProgress(_event("a", 5, 12))
    listener.onQueryProgress(_event("other", 5, 5))  # a query nobody registered: logged only
    assert seen == {"a": [0], "b": []}
    lines = [r.getMessage() for r in caplog.records if r.name == "streamtable.progress"]
    assert lines[0].startswith("a batch 0: 5 records in 1.00 s") and lines[0].endswith(
        ", 7 behind")
    assert lines[1].startswith("other batch 0: 5 records") and "behind" not in lines[1]


def test_stopping_removes_the_callback_and_then_the_idle_session_s_listener(spark):
    calls: list[str] = []

    def first(p: Any) -> None:
        calls.append("first")

    def second(p: Any) -> None:
        calls.append("second")

    listen_to_progress(spark, "a", first)
    listen_to_progress(spark, "a", second)  # another app of the same id took its place
    spark.streams.active = ["still running"]
    stop_listening(spark, "a", first)  # leaves the callback that is not its own
    [listener] = spark.streams.listeners
    listener.onQueryProgress(_event("a", 1, 1))
    assert calls == ["second"]
    stop_listening(spark, "a", second)
    assert listener.callbacks == {} and spark.streams.listeners == [listener]
    spark.streams.active = []
    stop_listening(spark, "b", second)
    assert spark.streams.listeners == [] and id(spark) not in _LISTENERS
