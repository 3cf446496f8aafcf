"""The Python workers Spark starts: they import pyspark from the installed package, with no Spark
jar on their import path; between two tasks they collect the young generations only (what the
task left unreachable goes, the objects kept across tasks, the task states, are not walked
again)."""

from __future__ import annotations

import gc
import weakref

import pytest

from streamtable.runtime.spark.process.daemon import YoungGenerationGc


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
    was_enabled = gc.isenabled()
    gc.disable()  # no automatic collection may run while the callback listens
    gc.callbacks.append(seen)
    try:
        YoungGenerationGc().collect()
    finally:
        gc.callbacks.remove(seen)
        if was_enabled:
            gc.enable()
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


@pytest.mark.spark
def test_workers_import_the_installed_pyspark_without_jars_on_their_path(spark):
    def import_path(_: object) -> tuple[str, list[str]]:
        import sys

        import pyspark

        return pyspark.__file__, sys.path

    [(module, path)] = spark.sparkContext.parallelize([0], 1).map(import_path).collect()
    import pyspark

    assert module == pyspark.__file__  # the driver's: not the copy in pyspark.zip
    assert not [p for p in path if p.endswith(".jar")], path
