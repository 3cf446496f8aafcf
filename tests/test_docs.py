"""The documentation site builds with no warning (a broken reference fails), and its
configuration page is the generated one (see test_config)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mkdocs_build_is_strict_and_clean(tmp_path: Path) -> None:
    pytest.importorskip("mkdocstrings", reason="the docs extra (make test installs it)")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    for documented in ("map_values", "StreamsApp", "TopologyTestDriver", "ApplicationFailedError"):
        assert documented in api, documented
    assert "state.location" in (tmp_path / "site" / "configuration" / "index.html").read_text()
