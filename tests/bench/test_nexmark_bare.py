"""The bare loop of the Nexmark bench (the practical limit of Python on the stateless queries)
runs against the broker and writes the reference's result."""

from __future__ import annotations

import uuid

import pytest
from bench.harness import create_topics, read_topic
from bench.nexmark.check import verdict
from bench.nexmark.contenders import bare_loop
from bench.nexmark.events import BID_TOPIC, PARTITIONS
from bench.nexmark.queries import QUERIES
from bench.nexmark.reference import EXPECTED, Events


@pytest.mark.parametrize("query", ["q1", "q2", "q21"])
def test_the_bare_loop_writes_the_reference_result(query, nexmark_input, tmp_path,
                                                   monkeypatch) -> None:
    bootstrap, bids = nexmark_input["bootstrap"], nexmark_input["counts"]["bid"]
    output = f"nexmark-bare-{query}-{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, {output: PARTITIONS})
    status = tmp_path / "status.jsonl"
    monkeypatch.setattr(bare_loop, "linger", lambda: None)
    assert bare_loop.main(["--query", query, "--output", output, "--bootstrap", bootstrap,
                           "--run-id", output, "--state-dir", str(tmp_path),
                           "--status", str(status),
                           "--input-counts", f'{{"{BID_TOPIC}": {bids}}}']) == 0
    assert [e for e in ("started", "caught_up") if f'"{e}"' in status.read_text()] == [
        "started", "caught_up"]
    raw = [(m.key(), m.value()) for m in read_topic(bootstrap, output, timeout=30)]
    want = EXPECTED[query](Events(generator=nexmark_input["generator"],
                                  count=nexmark_input["events"]))
    assert verdict(QUERIES[query].kind, want, raw) is None
