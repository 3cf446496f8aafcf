"""The class archive of Spark's JVM: made by a training run, then mapped by every session's
driver; a JVM without it (or told not to use it) starts as before."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from streamtable.runtime.spark.process import jvm_archive


def test_no_option_without_an_archive_or_when_disabled(tmp_path, monkeypatch):
    monkeypatch.setenv(jvm_archive.CACHE_ENV, str(tmp_path))
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    assert jvm_archive.java_option() == ""
    path = jvm_archive.archive_path()
    assert path is not None and path.parent == tmp_path
    path.write_bytes(b"archive")
    assert jvm_archive.java_option().split()[0] == f"-XX:SharedArchiveFile={path}"
    monkeypatch.setenv(jvm_archive.DISABLE_ENV, "0")
    assert jvm_archive.java_option() == ""


def test_the_archive_is_keyed_by_the_java_it_was_made_for(tmp_path, monkeypatch):
    monkeypatch.setenv(jvm_archive.CACHE_ENV, str(tmp_path))
    here = jvm_archive.archive_path()
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    assert jvm_archive.archive_path() != here


def test_no_archive_under_another_spark_conf_dir(tmp_path, monkeypatch):
    # Spark puts SPARK_CONF_DIR first on the driver's class path: Java maps no archive made
    # under another class path (and makes none with a directory of files on it)
    import pyspark

    monkeypatch.setenv(jvm_archive.CACHE_ENV, str(tmp_path))
    path = jvm_archive.archive_path()
    assert path is not None
    path.write_bytes(b"archive")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    assert jvm_archive.conf_dir_in_the_way() == str(tmp_path / "conf")
    assert jvm_archive.java_option() == ""
    monkeypatch.setenv("SPARK_CONF_DIR", os.path.join(os.path.dirname(pyspark.__file__), "conf"))
    assert jvm_archive.conf_dir_in_the_way() is None
    assert jvm_archive.java_option().startswith("-XX:SharedArchiveFile=")


@pytest.mark.slow  # ~1 min: a training run (make install runs one too)
@pytest.mark.spark
def test_a_session_maps_the_archive_the_training_run_made(tmp_path):
    env = {**os.environ, jvm_archive.CACHE_ENV: str(tmp_path)}
    made = subprocess.run([sys.executable, "-m", "streamtable.cli", "jvm-archive"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr
    archive = made.stdout.strip().splitlines()[-1]
    assert archive.startswith(str(tmp_path)) and os.path.getsize(archive) > 10_000_000
    # -Xshare:on: a JVM that cannot map the archive refuses to start instead of going on
    # without it, so a job that runs proves the driver used it
    script = (
        "from streamtable.runtime.spark.process.session import spark_session\n"
        "s = spark_session('local[1]', 'archive-check')\n"
        "args = s.sparkContext._jvm.java.lang.management.ManagementFactory"
        ".getRuntimeMXBean().getInputArguments()\n"
        "print([a for a in args if 'SharedArchiveFile' in a or 'Xshare' in a or 'GC' in a])\n"
        "print(s.range(3).mapInArrow(lambda batches: batches, 'id long').count())\n"
    )
    loaded = tmp_path / "classes.log"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, env={**env, "JAVA_TOOL_OPTIONS":
                                           f"-Xshare:on -Xlog:class+load=info:file={loaded}"})
    assert run.returncode == 0, run.stderr[-3000:]
    flags, count = run.stdout.strip().splitlines()[-2:]
    assert f"-XX:SharedArchiveFile={archive}" in flags and "-Xshare:on" in flags
    assert "-XX:+UseSerialGC" in flags  # the driver's collector, with the archive mapped
    assert count == "3"
    # the classes of a query's Python stages come from the archive, not from the jars: the
    # training run ran its jobs
    sources = {line.split()[1]: line for line in loaded.read_text().splitlines()
               if "source:" in line}
    for name in ("org.apache.spark.sql.execution.python.MapInArrowExec",
                 "org.apache.spark.api.python.PythonWorkerFactory"):
        assert "shared objects file" in sources[name], sources.get(name)
