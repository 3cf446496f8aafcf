"""Between two tasks a Python worker collects the young generations only: what the task left
unreachable goes, the objects it keeps across tasks (the task states) are not walked again."""

from __future__ import annotations

import gc
import weakref

import pytest

from streamtable.runtime.spark.daemon import YoungGenerationGc


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it


def test_collect_frees_a_young_cycle_without_a_full_collection():
    generations: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            generations.append(info["generation"])

    node = _Node()
    gone = weakref.ref(node)
    del node
    gc.callbacks.append(seen)
    try:
        YoungGenerationGc().collect()
    finally:
        gc.callbacks.remove(seen)
    assert gone() is None
    assert generations == [1]
    # the rest of the gc module is the real one
    assert YoungGenerationGc().isenabled() == gc.isenabled()


@pytest.mark.spark
def test_the_workers_daemon_collects_young_generations_between_tasks(spark):
    def gc_seen_by_the_daemon(_: object) -> str:
        import pyspark.daemon

        return type(pyspark.daemon.gc).__name__

    names = spark.sparkContext.parallelize(range(2), 2).map(gc_seen_by_the_daemon).collect()
    assert names == ["YoungGenerationGc"] * 2
