"""The README's page-views walk-through, run as written: Avro records through the development
Schema Registry (``streamtable registry &``), produced, counted on Spark, consumed and queried;
what it prints must be what the test driver computes from the same sample."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from tests.runtime.spark.test_readme_walkthroughs import (
    ROOT,
    Walkthrough,
    last_per_key,
    readme_commands,
    reference,
)

from streamtable.kafka.broker import free_port

pytestmark = pytest.mark.spark

DEFAULT_REGISTRY = "http://localhost:8081"


class RegistryWalkthrough(Walkthrough):
    """A walk-through whose second background command is the development registry, on a port
    of its own (the commands name the default URL: it is rewritten to that port)."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        self.registry_port = free_port()
        self.registry_url = f"http://127.0.0.1:{self.registry_port}"
        self.env.update(STREAMTABLE_REGISTRY_PORT=str(self.registry_port),
                        STREAMTABLE_SCHEMA_REGISTRY=self.registry_url)

    def run(self, lines: list[str]) -> None:
        super().run([line.replace(DEFAULT_REGISTRY, self.registry_url) for line in lines])

    def _wait_for_broker(self) -> None:
        super()._wait_for_broker()
        if len(self.background) < 2:
            return
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.registry_port)) == 0:
                    return
            time.sleep(0.2)
        raise AssertionError(f"no registry on port {self.registry_port}")


@pytest.fixture
def walkthrough(tmp_path: Path) -> Any:
    w = RegistryWalkthrough(tmp_path)
    yield w
    w.close()


def test_the_page_views_walkthrough(walkthrough: RegistryWalkthrough,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    lines = readme_commands("### Page views (Avro, Schema Registry)")
    assert lines[0].startswith("streamtable registry &")
    walkthrough.start_broker()
    walkthrough.run(lines)

    monkeypatch.setenv("STREAMTABLE_SCHEMA_REGISTRY", walkthrough.registry_url)
    driver = reference("examples/page_views/app.py", lines)
    expected = dict(driver.get_key_value_store("pages-per-user").all())
    assert expected == {"alice": 3, "bob": 2, "carol": 1}
    consumed = last_per_key(walkthrough.output("streamtable consume pages-per-user"))
    assert {k: json.loads(v) for k, v in consumed.items()} == {
        user: {"user": user, "pages": n} for user, n in expected.items()}
    sample = [json.loads(line) for line in
              (ROOT / "examples" / "page_views" / "sample.jsonl").read_text().splitlines()]
    inputs = walkthrough.output("streamtable consume page-views").splitlines()
    assert [(k, json.loads(v)) for k, v in (line.split("\t") for line in inputs)] == [
        (r["key"], r["value"]) for r in sample]
    assert walkthrough.output("streamtable query examples/page_views/app.py pages-per-user "
                              "alice") == "3\n"
