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


def test_a_worker_s_arrow_conversions_import_no_pandas_and_pandas_still_works() -> None:
    """pyarrow imports pandas the first time it converts a Python list (~45 MB and ~0.2 s a
    worker): the daemon tells it once that pandas is not there. pyarrow's pandas functions
    still import it when asked, and convert as they do without the daemon."""
    code = ("import sys; import pyarrow as pa; "
            "from streamtable.runtime.spark.process.daemon import pyarrow_without_pandas, "
            "preload; pyarrow_without_pandas(); preload(); "
            "pa.array([b'k', None]); pa.table({'n': [1, 2]}); "
            "print('pandas' in sys.modules); "
            "df = pa.table({'n': [1, None]}).to_pandas(); "
            "ts = __import__('pandas').to_datetime(['2020-01-01']).tz_localize('UTC'); "
            "print(df['n'].isna().tolist(), pa.Array.from_pandas(ts).type, "
            "pa.array(__import__('pandas').Categorical(['a'])).type)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split("\n")
    assert out[0] == "False"
    assert out[1] == ("[False, True] timestamp[ns, tz=UTC] "
                      "dictionary<values=string, indices=int8, ordered=0>")


def _planner_log(options: dict[str, str], *lines: tuple[str, str, str]) -> str:
    """What a fresh process writes on stderr after making the source's reader with
    ``options`` (as Spark's planner process does) and logging ``lines`` (logger, level,
    message)."""
    code = ("import logging; "
            "from streamtable.runtime.spark.kafka_source import KafkaDataSource; "
            f"KafkaDataSource({{'bootstrap.servers': '127.0.0.1:1', 'topics': 't', "
            f"**{options!r}}}).streamReader(None); "
            + "; ".join(f"logging.getLogger({name!r}).{level}({message!r})"
                        for name, level, message in lines))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120).stderr


def test_the_source_planner_process_logs_warnings_with_a_time() -> None:
    """Spark plans the batches in a Python process of its own, where nothing configures
    logging: the source's reader does, so its warnings read like the application's lines."""
    source = "streamtable.runtime.spark.kafka_source"
    err = _planner_log({}, (source, "warning", "slow broker"), (source, "info", "not shown"))
    assert err.endswith(f" WARNING {source}: slow broker\n"), err
    assert err[:4].isdigit() and "not shown" not in err


def test_the_source_planner_process_logs_at_the_application_s_level() -> None:
    cut = "streamtable.kafka.batch_cut"
    err = _planner_log({"log.level": "INFO"}, (cut, "info", "cut at 12"),
                       (cut, "debug", "not shown"), ("other", "info", "nor this"))
    assert err.endswith(f" INFO {cut}: cut at 12\n"), err
    assert "not shown" not in err and "nor this" not in err
