"""A micro-batch's records are counted and listed from its offsets (the stages are handed
offset ranges, not records)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from streamtable.kafka.ranges import offset_ranges
from streamtable.runtime.spark.offsets import batch_ranges
from streamtable.runtime.spark.progress import records_in


def _progress(start: dict | None, end: dict) -> SimpleNamespace:
    source = SimpleNamespace(startOffset=None if start is None else json.dumps(start),
                             endOffset=json.dumps(end))
    return SimpleNamespace(sources=[source])


def test_records_of_a_batch_are_the_offsets_it_advanced_over():
    progress = _progress({"a": {"0": 10, "1": 5}}, {"a": {"0": 15, "1": 5}, "b": {"0": 3}})
    assert records_in(progress) == 5 + 0 + 3


def test_first_batch_counts_from_offset_zero():
    assert records_in(_progress(None, {"a": {"0": 7, "1": 2}})) == 9
    first = SimpleNamespace(sources=[SimpleNamespace(startOffset="None",
                                                     endOffset='{"a": {"0": 4}}')])
    assert records_in(first) == 4


def _write_log(log: Path, batch: int, offsets: dict | None) -> None:
    source = "-" if offsets is None else json.dumps(offsets)
    (log / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{source}')


def test_batch_ranges_start_where_the_previous_batch_ended(tmp_path: Path):
    _write_log(tmp_path, 6, {"t": {"0": 100, "1": 40}})
    _write_log(tmp_path, 7, {"t": {"0": 130, "1": 40, "2": 5}})
    assert batch_ranges(tmp_path, 7) == [("t", 0, 100, 130), ("t", 2, 0, 5)]
    assert batch_ranges(tmp_path, 7) == offset_ranges({"t": {"0": 100, "1": 40}},
                                                      {"t": {"0": 130, "1": 40, "2": 5}})


def test_batch_ranges_unknown_without_the_previous_batch_or_a_source_offset(tmp_path: Path):
    _write_log(tmp_path, 0, {"t": {"0": 1}})
    assert batch_ranges(tmp_path, 0) is None
    assert batch_ranges(tmp_path, 5) is None
    _write_log(tmp_path, 1, None)
    assert batch_ranges(tmp_path, 1) is None
