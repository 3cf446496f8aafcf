"""The guides' examples run and print what the pages say: docs/windows.md, docs/joins.md and
docs/headers.md are doctests, each page's examples run in order in one namespace."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.parametrize(("page", "examples"),
                         [("windows.md", 40), ("joins.md", 40), ("headers.md", 40)])
def test_guide_examples_run_as_shown(page: str, examples: int,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    result = doctest.testfile(str(DOCS / page), module_relative=False,
                              optionflags=doctest.ELLIPSIS)
    report = capsys.readouterr().out
    assert result.attempted >= examples, f"{page}: only {result.attempted} examples found"
    assert result.failed == 0, report
