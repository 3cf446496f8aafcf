"""Where a run's CPU went: the process tree's CPU seconds by process, and a Spark JVM's by
thread (bench/harness.py), as the Nexmark report prints them (bench/nexmark/report.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from bench.harness import TreeSampler, jvm_thread_group, thread_cpu_seconds
from bench.nexmark.report import cpu_line


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_each_thread_of_a_process_is_named_with_its_cpu_seconds():
    native: list[int] = []

    def busy() -> None:
        native.append(threading.get_native_id())
        end = time.thread_time() + 0.3
        while time.thread_time() < end:
            pass

    t = threading.Thread(target=busy)
    t.start()
    t.join()
    threads = thread_cpu_seconds(os.getpid())
    assert os.getpid() in threads  # the main thread's id is the process's
    # the busy thread has ended: its entry is gone, as a JVM's ended threads are
    assert native[0] not in threads
    _spin(0.3)
    assert thread_cpu_seconds(os.getpid())[os.getpid()][1] >= 0.2


def test_a_jvm_s_threads_are_grouped_by_what_they_do():
    assert jvm_thread_group("Executor task l") == "tasks"
    assert jvm_thread_group("C2 CompilerThre") == "JIT compiler"
    assert jvm_thread_group("VM Thread") == "GC"
    assert jvm_thread_group("GC Thread#0") == "GC"
    assert jvm_thread_group("serve-Arrow") == "other"


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a Java runtime")
def test_the_sampler_adds_up_a_spark_jvm_s_threads(tmp_path: Path):
    """A JVM whose command line names SparkSubmit counts as Spark's: its threads' CPU seconds
    are kept by group; each group's total is what its threads used."""
    source = tmp_path / "Busy.java"
    source.write_text(
        "public class Busy { public static void main(String[] a) {"
        " long end = System.nanoTime() + 1_500_000_000L, n = 0;"
        " while (System.nanoTime() < end) { n += a.length; }"
        " System.out.println(n); } }")
    proc = subprocess.Popen(["java", str(source), "SparkSubmit"], stdout=subprocess.DEVNULL)
    sampler = TreeSampler(proc.pid)
    try:
        while proc.poll() is None:
            sampler.sample()
            time.sleep(0.1)
    finally:
        proc.wait(30)
    groups = sampler.cpu_by_jvm_thread()
    assert set(groups) <= {"tasks", "JIT compiler", "GC", "other"}
    assert groups.get("other", 0) >= 0.5  # the main thread's loop (and compiling Busy.java)
    # the threads' seconds as read, not the groups' sums rounded to 0.1 s (three groups can
    # round up by 0.15 s); a thread is read just after its process, so it may be a tick ahead
    threads = sum(secs for _, secs in sampler.jvm_threads.values())
    assert threads <= sampler.cpu_seconds() + 0.05


def test_the_report_line_names_the_processes_then_the_jvm_s_threads():
    row = SimpleNamespace(query="q18", contender="streamtable",
                          cpu_by_process={"daemon": 24.7, "java (Spark JVM)": 16.0},
                          cpu_by_jvm_thread={"tasks": 8.0, "other": 3.7, "JIT compiler": 2.5})
    assert cpu_line(row) == ("- q18, streamtable: daemon 24.7, java (Spark JVM) 16.0; "
                             "JVM threads: tasks 8.0, other 3.7, JIT compiler 2.5")
    row = SimpleNamespace(query="q0", contender="pathway", cpu_by_process={"python": 9.0},
                          cpu_by_jvm_thread={})
    assert cpu_line(row) == "- q0, pathway: python 9.0"
