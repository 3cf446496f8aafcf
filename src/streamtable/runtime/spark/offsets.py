"""A micro-batch's offset ranges, known on the driver without a Spark job.

Spark writes a batch's end offsets to the query's offset log (``<checkpoint>/offsets/<batch>``)
before it runs the batch, and a batch starts where the one before it ended. Reading the two
files gives the ranges the Kafka source would hand the stages, so the driver hands them to the
tasks in the batch context (see ``stage.py``) instead of running a Spark job of the source's
Python reader only to produce one row per partition. A replayed batch reads the same two files,
so it reads exactly the records its first attempt read.

>>> import json, pathlib, tempfile
>>> log = pathlib.Path(tempfile.mkdtemp())
>>> for batch, ends in [(3, {"t": {"0": 5, "1": 2}}), (4, {"t": {"0": 9, "1": 2}})]:
...     _ = (log / str(batch)).write_text("v1\\n{}\\n" + json.dumps(ends))
>>> batch_ranges(log, 4)
[('t', 0, 5, 9)]
>>> batch_ranges(log, 3) is None   # the first batch: its start is not in the log
True

A new query's first batch starts where the source says it started (``initial.offsets.file``):

>>> _ = (log / "0").write_text("v1\\n{}\\n" + json.dumps({"t": {"0": 5, "1": 2}}))
>>> _ = (log / "start.json").write_text(json.dumps({"t": {"0": 1, "1": 0}}))
>>> batch_ranges(log, 0, initial=log / "start.json")
[('t', 0, 1, 5), ('t', 1, 0, 2)]
"""

from __future__ import annotations

import json
from pathlib import Path

from streamtable.kafka.ranges import OffsetRange, offset_ranges


def _end_offsets(offset_log: Path, batch_id: int) -> dict[str, dict[str, int]] | None:
    """The source's end offsets of ``batch_id`` (the query has one source), or None."""
    try:
        lines = (offset_log / str(batch_id)).read_text().splitlines()
    except OSError:
        return None
    # "v1", the batch's metadata, then one line per source ("-" when it had no offset)
    if len(lines) != 3 or not lines[0].startswith("v") or lines[2].strip() == "-":
        return None
    offsets: dict[str, dict[str, int]] = json.loads(lines[2])
    return offsets


def _initial_offsets(path: Path | None) -> dict[str, dict[str, int]] | None:
    if path is None:
        return None
    try:
        offsets: dict[str, dict[str, int]] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return offsets


def batch_ranges(offset_log: Path, batch_id: int,
                 initial: Path | None = None) -> list[OffsetRange] | None:
    """The offset ranges of ``batch_id`` from the query's offset log, or None when the log
    cannot tell (no log, or the first batch without ``initial``: the file where the source wrote
    the offsets the query started from)."""
    end = _end_offsets(offset_log, batch_id)
    start = (_end_offsets(offset_log, batch_id - 1) if batch_id > 0
             else _initial_offsets(initial))
    if end is None or start is None:
        return None
    return offset_ranges(start, end)
