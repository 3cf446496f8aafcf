"""The guides' examples run and print what the pages say: docs/windows.md and docs/joins.md
are doctests, each page's examples run in order in one namespace."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.parametrize("page", ["windows.md", "joins.md"])
def test_guide_examples_run_as_shown(page: str, capsys: pytest.CaptureFixture[str]) -> None:
    result = doctest.testfile(str(DOCS / page), module_relative=False,
                              optionflags=doctest.ELLIPSIS)
    report = capsys.readouterr().out
    assert result.attempted >= 40, f"{page}: only {result.attempted} examples found"
    assert result.failed == 0, report
