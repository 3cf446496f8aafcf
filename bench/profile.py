"""Summaries of py-spy profiles (``--profile``): where the streamtable runtime spends its time.

py-spy's raw format is one collapsed stack per line ("frame;frame;frame count"), frames like
``function (file.py:line)`` and, with ``--subprocesses``, a leading ``process <pid>:"cmd"``
frame. The summary lists, per process kind, the top frames by self and by total samples.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def _short(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    file = m.group("file")
    for marker in ("site-packages/", "/src/", "/lib/python3"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    return f"{m.group('func')} ({file})"


def _process_kind(frame: str) -> str:
    """``process 123:"/path/python -m pyspark.daemon pyspark.worker"`` -> a short kind."""
    cmd = frame.split(":", 1)[-1].strip().strip('"')
    if "pyspark.daemon pyspark.worker" in cmd:
        return "spark python worker (mapInArrow: streamtable tasks)"
    if "-m " in cmd:
        return "python -m " + cmd.split("-m ", 1)[1][:70]
    if "streamtable_app.py" in cmd:
        return "driver (streamtable_app.py)"
    return cmd[:80]


def summarize(path: Path, fmt: str = "raw", top: int = 25) -> str | None:
    if fmt != "raw":
        return None
    self_by: dict[str, Counter[str]] = defaultdict(Counter)
    total_by: dict[str, Counter[str]] = defaultdict(Counter)
    samples: Counter[str] = Counter()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        kind = "all"
        procs = [f for f in frames if f.startswith("process ")]
        if procs:
            kind = _process_kind(procs[-1])
            frames = [f for f in frames if not f.startswith("process ")]
        samples[kind] += n
        if not frames:
            continue
        self_by[kind][_short(frames[-1])] += n
        for f in set(_short(x) for x in frames):
            total_by[kind][f] += n
    out = []
    for kind, n in samples.most_common():
        out.append(f"== {kind}: {n} samples ==")
        out.append("  top self:")
        for f, c in self_by[kind].most_common(top):
            out.append(f"    {100 * c / n:5.1f}%  {f}")
        out.append("  top total (inclusive):")
        for f, c in total_by[kind].most_common(top):
            out.append(f"    {100 * c / n:5.1f}%  {f}")
    text = "\n".join(out)
    path.with_suffix(".summary.txt").write_text(text + "\n")
    return text
