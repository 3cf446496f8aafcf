"""Upgrading a running application's topology on Spark: kept stores keep their state, new ones
are built from the earliest offsets (or from now on), removed ones are dropped, and a store
whose upstream changed is refused until `streamtable reset --store` rebuilds it. Every result
is compared with the test driver's over the whole input."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from tests.runtime.spark.kafka_util import new_topics, produce, read_all

from streamtable import TopologyTestDriver
from streamtable.cli import load_app, main
from streamtable.runtime.spark.app import StreamsApp
from streamtable.runtime.spark.upgrade import read_fingerprint
from streamtable.storage import storage_at
from streamtable.topology.fingerprint import TopologyChangedError

pytestmark = pytest.mark.spark

APP = '''
from streamtable import StreamsBuilder
config = {{"default.key.serde": "string", "default.value.serde": "string",
           "cache.max.bytes.buffering": 0}}
def build_topology(version="v3"):
    b = StreamsBuilder()
    lines = b.stream({src!r})
    if version in ("v2", "v2-latest"):  # a new branch and a new output
        lines.filter(lambda k, line: "x" in line).to({alerts!r})
    words = lines.flat_map_values(lambda line: line.split())
    if version == "v3":  # the counts' upstream changed: no more short words
        words = words.filter(lambda k, w: len(w) > 1)
    if version != "v4":  # v4 removed the counts
        counts = words.group_by(lambda k, w: w).count("counts")
        counts.to_stream().to({out!r}, value_serde="long")
    if version in ("v2", "v2-latest", "v4"):  # a new aggregation
        lines.group_by(lambda k, line: str(len(line.split()))).count("by-length")
    return b.build()
'''

FIRST = [("k1", "a b a"), ("k2", "xa c"), ("k3", "b")]
SECOND = [("k4", "a x"), ("k5", "c c d"), ("k6", "xb")]


@pytest.fixture
def upgrade_app(spark, bootstrap, tmp_path):
    src, out, alerts = new_topics(bootstrap, 2, "up-lines", "up-counts", "up-alerts")
    file = tmp_path / "upgrade_app.py"
    file.write_text(APP.format(src=src, out=out, alerts=alerts))
    module = load_app(str(file))
    state, app_id = tmp_path / "state", f"up-{src}"

    def app(version: str, **config: Any) -> StreamsApp:
        a = StreamsApp(module.build_topology(version), app_id, bootstrap, state_dir=state,
                       spark=spark, config={**module.config, **config},
                       development_broker=True)
        a.app_file = str(file)
        return a

    def send(records: list[tuple[str, str]]) -> None:
        produce(bootstrap, src, [(k.encode(), v.encode()) for k, v in records])

    def reference(version: str, records: list[tuple[str, str]]) -> TopologyTestDriver:
        driver = TopologyTestDriver(module.build_topology(version), module.config)
        topic = driver.create_input_topic(src)
        for k, v in records:
            topic.pipe_input(k, v)
        return driver

    return {"app": app, "send": send, "reference": reference, "file": str(file),
            "state": state, "app_id": app_id, "topics": (src, out, alerts)}


def _per_key(records: list[Any], decode: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = defaultdict(list)
    for m in records:
        out[m.key().decode()].append(decode(m.value()))
    return dict(out)


def test_a_new_branch_output_and_aggregation_keep_the_counts_and_backfill(upgrade_app,
                                                                           bootstrap):
    u = upgrade_app
    _, out, alerts = u["topics"]
    u["send"](FIRST)
    first = u["app"]("v1")
    first.run_until_caught_up(timeout=180)
    assert first.store("counts").to_dict() == {"a": 2, "b": 2, "xa": 1, "c": 1}
    run_before = first.shared_location
    u["send"](SECOND)
    second = u["app"]("v2")
    second.run_until_caught_up(timeout=300)
    ref = u["reference"]("v2", FIRST + SECOND)
    # the counts kept their state: exact over the whole input, each update written once
    assert second.store("counts").to_dict() == ref.get_key_value_store("counts").to_dict()
    assert _per_key(read_all(bootstrap, out), lambda v: int.from_bytes(v, "big", signed=True)) \
        == _per_key_ref(ref.create_output_topic(out, value_serde="long").read_key_values())
    # the new aggregation and the new output were built from the earliest offsets
    assert second.store("by-length").to_dict() == ref.get_key_value_store("by-length").to_dict()
    assert sorted((m.key().decode(), m.value().decode()) for m in read_all(bootstrap, alerts)) \
        == sorted(ref.create_output_topic(alerts).read_key_values())
    # the state moved to a new run; the old one and the backfill's are gone
    assert second.shared_location != run_before
    assert not storage_at(run_before).list("tasks/0/0")
    assert [p.name for p in u["state"].iterdir()] == [u["app_id"]]
    # and a plain restart of the same version changes nothing
    again = u["app"]("v2")
    u["send"]([("k7", "a")])
    again.run_until_caught_up(timeout=180)
    assert again.shared_location == second.shared_location
    assert again.store("counts").to_dict()["a"] == 4


def _per_key_ref(records: list[tuple[Any, Any]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = defaultdict(list)
    for k, v in records:
        out[k].append(v)
    return dict(out)


def test_new_state_from_latest_starts_empty_with_the_next_records(upgrade_app, bootstrap):
    u = upgrade_app
    _, _, alerts = u["topics"]
    u["send"](FIRST)
    u["app"]("v1").run_until_caught_up(timeout=180)
    u["send"](SECOND)
    second = u["app"]("v2", **{"upgrade.new.state.from": "latest"})
    second.run_until_caught_up(timeout=300)
    only_new = u["reference"]("v2", SECOND)
    assert second.store("by-length").to_dict() == \
        only_new.get_key_value_store("by-length").to_dict()
    assert sorted((m.key().decode(), m.value().decode()) for m in read_all(bootstrap, alerts)) \
        == sorted(only_new.create_output_topic(alerts).read_key_values())
    full = u["reference"]("v2", FIRST + SECOND)
    assert second.store("counts").to_dict() == full.get_key_value_store("counts").to_dict()


def test_a_removed_store_is_dropped(upgrade_app):
    u = upgrade_app
    u["send"](FIRST)
    u["app"]("v1").run_until_caught_up(timeout=180)
    u["send"](SECOND)
    fourth = u["app"]("v4")
    fourth.run_until_caught_up(timeout=300)
    assert "counts" not in fourth.serving.stores()
    kept = read_fingerprint(fourth)
    assert kept is not None and "counts" not in kept["state"]
    state = fourth.task_state.checkout(0, 0, 10**9)
    assert "counts" not in state.stores
    ref = u["reference"]("v4", FIRST + SECOND)
    assert fourth.store("by-length").to_dict() == ref.get_key_value_store("by-length").to_dict()


def test_a_store_whose_upstream_changed_is_refused_then_reset_store_rebuilds_it(upgrade_app):
    u = upgrade_app
    u["send"](FIRST)
    first = u["app"]("v1")
    first.run_until_caught_up(timeout=180)
    u["send"](SECOND)
    with pytest.raises(TopologyChangedError) as info:
        u["app"]("v3").start(available_now=True)
    message = str(info.value)
    assert "store 'counts'" in message and "upstream" in message
    assert f"streamtable reset {u['file']} --store counts" in message
    assert main(["reset", u["file"], "--store", "counts", "--state-dir", str(u["state"]),
                 "--application-id", u["app_id"]]) == 0
    third = u["app"]("v3")
    third.run_until_caught_up(timeout=300)
    ref = u["reference"]("v3", FIRST + SECOND)
    assert third.store("counts").to_dict() == ref.get_key_value_store("counts").to_dict()
    assert "a" not in third.store("counts").to_dict()  # rebuilt through the new filter


def test_a_batch_the_deployed_version_planned_is_planned_again_unless_it_wrote_output(
        upgrade_app):
    """A stop (even Ctrl-C) can leave the next batch planned but not committed. The new version
    plans it again when the deployed one wrote nothing of it, and refuses when it may have
    written output, which only the deployed version can finish exactly once."""
    u = upgrade_app
    u["send"](FIRST)
    first = u["app"]("v1")
    first.run_until_caught_up(timeout=180)
    offsets = first.checkpoint_dir / "query" / "offsets"
    last = max(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
    (offsets / str(last + 1)).write_text((offsets / str(last)).read_text())  # planned, not run
    u["send"](SECOND)
    marker = f"{u['app_id']}/0-0/{last + 1:020d}.started"
    sink = storage_at(f"{first.shared_location}/sink")
    sink.write(marker, b"{}")  # a writer of the deployed version had started that batch
    with pytest.raises(TopologyChangedError, match=rf"stopped inside batch {last + 1}.*"
                                                   r"--until-caught-up"):
        u["app"]("v2").start(available_now=True)
    sink.delete(marker)
    second = u["app"]("v2")
    second.run_until_caught_up(timeout=300)
    ref = u["reference"]("v2", FIRST + SECOND)
    assert second.store("counts").to_dict() == ref.get_key_value_store("counts").to_dict()
    assert second.store("by-length").to_dict() == ref.get_key_value_store("by-length").to_dict()
