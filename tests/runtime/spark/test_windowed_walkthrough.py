"""docs/walkthrough-windowed.md, run as written: its files are saved where the page says, its
commands run in bash in order (a fresh directory standing for the clone, ``streamtable`` and
``python`` being this checkout's), each output block must be what the command before it
printed, and what the page's application computes on Spark must be what the test driver
computes from the same views. The installation block (``make install``) is the one block not
run: the test runs in the environment it made."""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.runtime.spark.test_readme_walkthroughs import ROOT, Walkthrough

from streamtable.cli import app_topology, load_app
from streamtable.cli.records import parse_records
from streamtable.kafka.broker import free_port
from streamtable.serde import JSON
from streamtable.testing import TopologyTestDriver

pytestmark = pytest.mark.spark

PAGE = ROOT / "docs" / "walkthrough-windowed.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
HTTP_PORT = "8080"  # the page's; the test serves on a free port instead


def page_blocks() -> list[tuple[str, str]]:
    """The fenced blocks of the page, in order: ``(language, text)``."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(PAGE.read_text())]


def commands(block: str) -> list[str]:
    """A bash block's commands, as typed: one a line, a heredoc with its lines."""
    out: list[str] = []
    lines = iter(block.splitlines())
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        heredoc = re.search(r"<<\s*'?(\w+)'?", line)
        if heredoc:
            body = [line]
            for more in lines:
                body.append(more)
                if more.strip() == heredoc.group(1):
                    break
            line = "\n".join(body)
        out.append(line)
    return out


class PageWalkthrough(Walkthrough):
    """Runs the page's commands; a command put in the background waits for its port (the
    broker's, or the query server's on a free port standing for the page's 8080)."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        self.http_port = free_port()
        self.prelude += f"python() {{ {shlex.quote(sys.executable)} \"$@\"; }}\n"

    def command(self, line: str) -> str:
        """Run one command as typed; its standard output."""
        line = line.replace(f"localhost:{HTTP_PORT}", f"localhost:{self.http_port}") \
            .replace(f"--http-port {HTTP_PORT}", f"--http-port {self.http_port}")
        code = line.split(" #")[0].rstrip() if "<<" not in line else line
        if code.endswith("&"):
            self.background.append(subprocess.Popen(
                ["bash", "-c", self.prelude + code[:-1]], cwd=self.dir, env=self.env,
                start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            self._wait_for(self.http_port if "--http-port" in code else self.port)
            return ""
        done = subprocess.run(["bash", "-c", self.prelude + code], cwd=self.dir, env=self.env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        self.outputs.append((line, done.stdout))
        return done.stdout

    def _wait_for(self, port: int) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.2)
        raise AssertionError(f"nothing listens on port {port}")


@pytest.fixture
def walkthrough(tmp_path: Path) -> Any:
    w = PageWalkthrough(tmp_path)
    yield w
    w.close()


def test_the_windowed_walkthrough_runs_as_written(walkthrough: PageWalkthrough) -> None:
    blocks = page_blocks()
    assert blocks[0][0] == "bash" and "make install" in blocks[0][1]
    files, shown, last_output = [], 0, None
    for lang, text in blocks[1:]:
        if lang == "python":
            path = text.splitlines()[0].removeprefix("# ").strip()
            assert path.endswith(".py"), f"a file block starts with its path, not {path!r}"
            (walkthrough.dir / path).write_text(text)
            files.append(path)
        elif lang == "bash":
            for line in commands(text):
                last_output = walkthrough.command(line)
        elif lang == "text":
            assert last_output is not None, "an output block before any command"
            assert last_output.rstrip("\n") == text.rstrip("\n"), (
                f"the page shows\n{text}\nthe command printed\n{last_output}")
            shown += 1
        else:
            raise AssertionError(f"a block of {lang!r}: the test runs bash and python blocks")
    assert files == ["pageviews/app.py", "pageviews/test_app.py"]
    assert shown == 3
    assert "2 passed" in walkthrough.output("python -m pytest")

    # the application on Spark computed what the test driver computes from the same views
    module = load_app(str(walkthrough.dir / "pageviews" / "app.py"))
    driver = TopologyTestDriver(app_topology(module), module.config)
    views = driver.create_input_topic("page-views")
    with (walkthrough.dir / "pageviews" / "views.jsonl").open() as f:
        for r in parse_records(f, JSON, JSON, "json"):
            views.pipe_input(r.key, r.value, r.timestamp)
    finals = driver.create_output_topic("views-per-minute-final").read_key_values()
    consumed = walkthrough.output("streamtable consume views-per-minute-final").splitlines()
    assert len(consumed) == len(finals) == 4
    for line, (window, count) in zip(consumed, finals, strict=True):
        assert line.startswith(f"{window['key']}@[") and line.endswith(f"\t{count}")
    store = driver.get_window_store("views-per-minute")

    def windows_of(user: str) -> list[Any]:
        return [[{"key": user, "start": w.start, "end": w.end}, n]
                for w, n in store.fetch_all(0, 2**62) if w.key == user]

    queried = walkthrough.output("streamtable query pageviews/app.py views-per-minute bob")
    assert [json.loads(line) for line in queried.splitlines()] == windows_of("bob")
    served = json.loads(walkthrough.output("curl"))
    assert [[{"key": w["key"], "start": w["start"], "end": w["end"]}, w["value"]]
            for w in served] == windows_of("alice")
