"""Where a failure happened, read from its traceback: the user's frames, the operator that
called them and the record that operator held.

Nothing here runs on the record path: a task reads the traceback only once something failed,
so processing pays nothing for errors that do not happen. The result is text for one readable
paragraph, the same on the test driver and on a Spark worker (where it crosses to the driver
inside Spark's error).

>>> def parse(value):
...     return int(value)
>>> try:
...     parse("x")
... except ValueError as e:
...     frames = user_frames(e)
>>> [(f.function, f.code) for f in frames]
[('<module>', 'parse("x")'), ('parse', 'return int(value)')]
"""

from __future__ import annotations

import linecache
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from streamtable.processors.api import Processor, Record
from streamtable.topology.graph import Topology

_PACKAGE = str(Path(__file__).resolve().parents[1]) + os.sep
_LIBRARIES = tuple(
    str(Path(p).resolve()) + os.sep
    for p in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
)
MAX_FRAMES = 3  # the innermost user frames shown
MAX_SHOWN = 120  # characters of a key, a value or a line of code


@dataclass(frozen=True)
class Frame:
    """One frame of a traceback: ``file``, ``line``, ``function`` and the line's ``code``."""

    file: str
    line: int
    function: str
    code: str = ""

    def __str__(self) -> str:
        return f"{show_path(self.file)}, line {self.line}, in {self.function}"


def show_path(file: str) -> str:
    """``file`` relative to the current directory when it is inside it, else as it is.

    >>> show_path(os.path.join(os.getcwd(), "app.py"))
    'app.py'
    """
    try:
        return os.path.relpath(file) if Path(file).resolve().is_relative_to(Path.cwd()) else file
    except (OSError, ValueError):
        return file


def _ours(file: str) -> bool:
    return os.path.abspath(file).startswith(_PACKAGE)


def _library(file: str) -> bool:
    return os.path.abspath(file).startswith(_LIBRARIES) or file.startswith("<frozen ")


def _tracebacks(error: BaseException) -> list[TracebackType]:
    out = []
    tb = error.__traceback__
    while tb is not None:
        out.append(tb)
        tb = tb.tb_next
    return out


def user_frames(error: BaseException) -> list[Frame]:
    """The frames of ``error``'s traceback in the user's code (not streamtable's, not the
    standard library's or an installed package's), innermost last, at most ``MAX_FRAMES``.
    Only frames below the innermost operator count: those above it are the engine's host."""
    tbs = _tracebacks(error)
    start = 0
    for i, tb in enumerate(tbs):
        if isinstance(tb.tb_frame.f_locals.get("self"), Processor):
            start = i
    outside = [tb for tb in tbs[start:] if not _ours(tb.tb_frame.f_code.co_filename)]
    # an application installed as a package is a library too: then its frames are the user's
    users = [tb for tb in outside if not _library(tb.tb_frame.f_code.co_filename)] or outside
    frames = []
    for tb in users[-MAX_FRAMES:]:
        code = tb.tb_frame.f_code
        text = linecache.getline(code.co_filename, tb.tb_lineno).strip()
        frames.append(Frame(code.co_filename, tb.tb_lineno, code.co_name, shorten(text)))
    return frames


def failing_record(error: BaseException) -> tuple[Any, Any] | None:
    """``(key, value)`` of the record the innermost operator on ``error``'s traceback was
    handling (as its serdes decoded it), or None when that frame holds none."""
    found = None
    for tb in _tracebacks(error):
        local = tb.tb_frame.f_locals
        if not isinstance(local.get("self"), Processor):
            continue
        record = local.get("record")
        if isinstance(record, Record):
            found = (record.key, record.value)
        elif "key" in local and "value" in local:
            found = (local["key"], local["value"])
    return found


def shorten(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` cut to ``limit`` characters, marked with an ellipsis when cut.

    >>> shorten("x" * 200, 10)
    'xxxxxxxxx…'
    """
    return text if len(text) <= limit else text[:limit - 1] + "…"


def show(obj: Any) -> str:
    """A key or a value for a message: its ``repr``, shortened."""
    try:
        return shorten(repr(obj))
    except Exception:  # a user's __repr__ may fail too
        return f"<{type(obj).__name__}>"


def operator(topology: Topology, node: str) -> str:
    """The operator the user wrote for ``node``: its DSL method and the node's name, e.g.
    ``map_values (KSTREAM-MAPVALUES-0000000003)``, or ``filter 'adults'`` when the user named
    it, with the line that declared it."""
    spec = topology.nodes.get(node)
    options = spec.options if spec is not None else {}
    method = options.get("operator")
    generated = node.startswith(("KSTREAM-", "KTABLE-"))
    name = f"({node})" if generated else repr(node)
    return f"{method} {name}" if method else f"operator {name}"


def declared_at(topology: Topology, node: str) -> tuple[str, int] | None:
    """Where the user's code declared ``node`` (file, line), when known."""
    spec = topology.nodes.get(node)
    where = spec.options.get("declared_at") if spec is not None else None
    return None if where is None else (str(where[0]), int(where[1]))


def describe(error: BaseException, topology: Topology, node: str | None) -> str:
    """What to add to the reason of ``error`` raised in operator ``node``: the operator, the
    user's frames and the record the operator held, e.g. ``in map_values
    (KSTREAM-MAPVALUES-0000000003), at app.py, line 12, in <lambda>: `lambda v: 1 / v`; the
    record there: key 'alice', value 0``."""
    text = "" if node is None else f"in {operator(topology, node)}"
    frames = user_frames(error)
    declared = declared_at(topology, node) if node is not None else None
    if declared is not None and all((f.file, f.line) != declared for f in frames):
        text += f" (declared at {show_path(declared[0])}, line {declared[1]})"
    if frames:
        code = frames[-1].code
        text += ", at " + " → ".join(str(f) for f in frames) + (f": `{code}`" if code else "")
    record = failing_record(error)
    if record is not None:
        text += f"; the record there: key {show(record[0])}, value {show(record[1])}"
    return text.lstrip(", ")
