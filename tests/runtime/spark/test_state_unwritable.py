"""Task state that cannot be written during a commit: the batch fails with an error naming the
path and the OS error; once fixed, a restart replays the batch and the result is exact."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from tests.runtime.spark.harness import (
    SOURCE_SCHEMA,
    MemoryOutput,
    per_key,
    run_driver,
    source_rows,
)

from streamtable import StreamsBuilder
from streamtable.errors import ApplicationFailedError
from streamtable.runtime.spark import StreamsApp

pytestmark = pytest.mark.spark


def _topology():
    b = StreamsBuilder()
    (b.stream("in").group_by_key()
     .aggregate(lambda: 0, lambda k, v, total: total + v, materialized="totals")
     .to_stream().to("out"))
    return b.build()


def test_unwritable_state_fails_the_batch_naming_the_path_then_a_restart_recovers(spark,
                                                                                   tmp_path):
    records = [(f"k{i % 5}", i) for i in range(30)]
    driver, expected = run_driver(_topology(), records, ["out"], cache=False)
    frames = [spark.createDataFrame(source_rows(records[i:i + 10], 2, start=i), SOURCE_SCHEMA)
              for i in (0, 10, 20)]
    output = MemoryOutput()

    def app() -> StreamsApp:  # a start of the application (the same state directory)
        a = StreamsApp(_topology(), "unwritable", state_dir=str(tmp_path), spark=spark,
                       output=output, config={"cache.max.bytes.buffering": 0})
        a.prepare({"in": 2})
        return a

    first = app()
    first.process_batch(frames[0], 0)
    tasks = first.task_state.location  # type: ignore[attr-defined]
    # the state directory becomes read-only (a read-only bind mount: root ignores chmod), or,
    # where mounting is not allowed, a file takes its place
    mounted = subprocess.run(["mount", "--bind", "-o", "ro", tasks, tasks],
                             capture_output=True).returncode == 0
    if not mounted:
        shutil.move(tasks, tasks + ".aside")
        with open(tasks, "w") as f:
            f.write("in the way")
    try:
        with pytest.raises(Exception) as info:  # noqa: PT011 - Spark wraps the task's error
            first.process_batch(frames[1], 1)
    finally:  # the fix
        if mounted:
            subprocess.run(["umount", tasks], check=True)
        else:
            os.remove(tasks)
            shutil.move(tasks + ".aside", tasks)
    reason = ApplicationFailedError("app", str(info.value)).cause
    if mounted:
        assert reason.startswith(f"StorageError: cannot write {tasks}/"), reason
        assert "Read-only file system" in reason, reason
    else:
        assert reason.startswith(f"StorageError: cannot list {tasks}/"), reason
        assert "Not a directory" in reason, reason
    second = app()  # Spark replays the failed batch with the same id and input
    second.process_batch(frames[1], 1)
    second.process_batch(frames[2], 2)
    assert second.store("totals").to_dict() == driver.get_key_value_store("totals").to_dict()
    assert per_key(output.topic("out")) == per_key(expected["out"])
