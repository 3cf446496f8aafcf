"""The Python workers' daemon imports what a task needs before it forks them: a worker forked
later (Spark forks new ones from time to time) does not import the DSL and the processors again
while a micro-batch waits for it."""

from __future__ import annotations

import subprocess
import sys

NEEDED = ("streamtable.runtime.spark.stage", "streamtable.runtime.spark.kafka_source",
          "streamtable.dsl", "streamtable.processors.table", "streamtable.processors.aggregate",
          "streamtable.serde", "pyarrow")


def test_the_daemon_preloads_the_stage_code_and_streamtable_s_public_names() -> None:
    code = ("import sys; before = set(sys.modules); "
            "from streamtable.runtime.spark.process.daemon import preload; preload(); "
            f"print(sorted(m for m in {NEEDED!r} if m not in before and m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert out.strip() == repr(sorted(NEEDED))
