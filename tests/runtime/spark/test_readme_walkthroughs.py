"""The README's command-line walk-throughs, run as written: the quick start (word count) and the
inventory and share-holders examples, each in a fresh directory against its own broker. Every
command must succeed, and what `consume` and `query` print must be what the test driver computes
from the same sample input."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from streamtable.cli import app_topology, load_app
from streamtable.cli.records import jsonable, parse_records
from streamtable.config import StreamsConfig
from streamtable.engine.wiring import external_topic_serdes
from streamtable.kafka.broker import free_port
from streamtable.testing import TopologyTestDriver

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"


def readme_commands(heading: str) -> list[str]:
    """The command lines of the first ```bash block after ``heading`` (comments dropped)."""
    text = README.read_text()
    start = text.index(f"\n{heading}\n")
    block = text[start:].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.replace("\\\n", " ").splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


class Walkthrough:
    """Runs README commands in bash as written, ``streamtable`` being this checkout's CLI, in a
    fresh directory (its own ``.streamtable``) that sees the repository's ``examples``."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path / "clone"
        self.dir.mkdir()
        (self.dir / "examples").symlink_to(ROOT / "examples")
        self.port = free_port()
        self.env = dict(os.environ, STREAMTABLE_BOOTSTRAP_SERVERS=f"127.0.0.1:{self.port}",
                        STREAMTABLE_BROKER_PORT=str(self.port),
                        STREAMTABLE_SPARK_LOG_LEVEL="ERROR",
                        PYTHONPATH=str(ROOT / "src"))
        python = shlex.quote(sys.executable)
        self.prelude = f'streamtable() {{ {python} -m streamtable.cli "$@"; }}\n'
        self.background: list[subprocess.Popen[bytes]] = []
        self.outputs: list[tuple[str, str]] = []

    def run(self, lines: list[str]) -> None:
        for line in lines:
            code = line.split(" #")[0].rstrip()
            if code.endswith("&"):
                self.background.append(subprocess.Popen(
                    ["bash", "-c", self.prelude + code[:-1]], cwd=self.dir, env=self.env,
                    start_new_session=True, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL))
                self._wait_for_broker()
                continue
            done = subprocess.run(["bash", "-c", self.prelude + line], cwd=self.dir,
                                  env=self.env, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"{line}\n{done.stderr[-3000:]}"
            self.outputs.append((line, done.stdout))

    def _wait_for_broker(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.2)
        raise AssertionError(f"no broker on port {self.port}")

    def start_broker(self) -> None:
        """For walk-throughs that expect the broker of the quick start to be running."""
        self.run(["streamtable broker &"])

    def output(self, prefix: str) -> str:
        found = [out for line, out in self.outputs if line.startswith(prefix)]
        assert len(found) == 1, (prefix, [line for line, _ in self.outputs])
        return found[0]

    def close(self) -> None:
        for proc in self.background:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)


@pytest.fixture
def walkthrough(tmp_path: Path) -> Any:
    w = Walkthrough(tmp_path)
    yield w
    w.close()


def reference(app: str, lines: list[str]) -> TopologyTestDriver:
    """The test driver fed what the walk-through's ``produce`` commands sent, in their order."""
    module = load_app(str(ROOT / app))
    topology = app_topology(module)
    config = dict(getattr(module, "config", {}))
    driver = TopologyTestDriver(topology, config)
    serdes = external_topic_serdes(topology, StreamsConfig(config))
    for line in lines:
        words = shlex.split(line.split(" #")[0])
        if words[:2] != ["streamtable", "produce"]:
            continue
        topic, sample = words[2], words[words.index("--file") + 1]
        key_serde, value_serde = serdes[topic]
        pipe = driver.create_input_topic(topic, key_serde, value_serde)
        with (ROOT / sample).open() as f:
            for r in parse_records(f, key_serde, value_serde, "auto", sample):
                pipe.pipe_input(r.key, r.value, r.timestamp)
    return driver


def as_json(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=jsonable))


def last_per_key(consumed: str) -> dict[str, str]:
    return dict(line.split("\t", 1) for line in consumed.splitlines())


def test_the_quick_start(walkthrough: Walkthrough) -> None:
    lines = readme_commands("## Quick start: the command line")
    assert lines[0].startswith("streamtable broker &")
    walkthrough.run(lines)
    sample = (ROOT / "examples" / "word_count" / "sample.txt").read_text().splitlines()
    split_words = load_app(str(ROOT / "examples" / "word_count" / "app.py")).split_words
    expected = Counter(w for line in sample for w in split_words(line))
    consumed = last_per_key(walkthrough.output("streamtable consume streams-wordcount-output"))
    assert {k: int(v) for k, v in consumed.items()} == expected
    assert walkthrough.output("streamtable query examples/word_count/app.py counts-store kafka") \
        == f"{expected['kafka']}\n"
    every = [out for line, out in walkthrough.outputs
             if line.rstrip() == "streamtable query examples/word_count/app.py counts-store"]
    assert len(every) == 1
    assert dict(json.loads(row) for row in every[0].splitlines()) == expected
    # the driver agrees on the table
    driver = reference("examples/word_count/app.py", lines)
    assert dict(driver.get_key_value_store("counts-store").all()) == expected


def test_the_inventory_walkthrough(walkthrough: Walkthrough) -> None:
    lines = readme_commands("### Inventory")
    walkthrough.start_broker()
    walkthrough.run(lines)
    driver = reference("examples/inventory/app.py", lines)
    store = dict(driver.get_key_value_store("inventory-store").all())
    assert store == {"store-1": {"apple": 6, "pear": 4}, "store-2": {"pear": 3}}
    consumed = last_per_key(walkthrough.output("streamtable consume inventory"))
    assert {k: json.loads(v) for k, v in consumed.items()} == store
    assert json.loads(walkthrough.output(
        "streamtable query examples/inventory/app.py inventory-store store-1")) \
        == store["store-1"]


def test_the_share_holders_walkthrough(walkthrough: Walkthrough) -> None:
    lines = readme_commands("### Share-holders")
    walkthrough.start_broker()
    walkthrough.run(lines)
    driver = reference("examples/share_holders/app.py", lines)
    expected = as_json(sorted(driver.get_key_value_store("us-share-holders").all()))
    assert expected == [["client1", [1]], ["client3", [3]]]
    queried = walkthrough.output("streamtable query examples/share_holders/app.py "
                                 "us-share-holders")
    assert [json.loads(row) for row in queried.splitlines()] == expected

