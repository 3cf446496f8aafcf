"""A worker's private ``/tmp`` still shows what it runs from there: a clone (and its virtual
environment) under ``/tmp`` is bound back over the empty tmpfs, everything else is private."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from tests.cluster.cluster import code_paths, kept_under, private_tmp_script


def test_kept_under_takes_the_outermost_directories_strictly_under_tmp() -> None:
    assert kept_under("/tmp", ["/tmp/a/.venv", "/tmp/a/src", "/tmp/a", "/tmp/b/x", "/tmp",
                               "/tmpfoo/c", "/usr/lib/python3"]) == ["/tmp/a", "/tmp/b/x"]
    assert kept_under("/tmp", ["/work/clone/src", "/usr"]) == []


def test_the_code_a_worker_runs_includes_the_interpreter_and_this_clone() -> None:
    paths = [os.path.realpath(p) for p in code_paths()]
    assert os.path.realpath(sys.prefix) in paths
    src = os.path.realpath(Path(__file__).resolve().parents[2] / "src")
    assert any(src == p or src.startswith(p + os.sep) for p in paths), paths


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="mount namespaces need root and unshare")
def test_a_private_tmp_shows_the_clone_under_tmp_and_nothing_else() -> None:
    clone = Path(tempfile.mkdtemp(prefix="streamtable-clone-", dir="/tmp"))
    other = Path(tempfile.mkdtemp(prefix="streamtable-other-", dir="/tmp"))
    try:
        (clone / "src").mkdir()
        (clone / "src" / "code.py").write_text("seen")
        (other / "scratch").write_text("driver's")
        script = "set -e\n" + private_tmp_script("probe", [str(clone / "src"), str(clone)]) + (
            f"cat {clone}/src/code.py\n"
            f"test ! -e {other}/scratch && echo private\n"
            f"touch /tmp/worker-only\n")
        done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                               script], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "seenprivate\n"
        assert not Path("/tmp/worker-only").exists()  # written to the worker's own /tmp
    finally:
        shutil.rmtree(clone)
        shutil.rmtree(other)
