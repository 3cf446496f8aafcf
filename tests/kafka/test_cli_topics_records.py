"""`streamtable topics | produce | consume` against the real embedded broker (no Spark): what a
user types in the first hour, with the application's serdes."""

from __future__ import annotations

import io
import json
import struct
import time
import uuid
from pathlib import Path

import pytest
from tests.runtime.spark.kafka_util import read_all

from streamtable.cli import load_app, main
from streamtable.kafka.admin import list_topic_names

ROOT = Path(__file__).resolve().parents[2]


def _name(base: str) -> str:
    return f"{base}-{uuid.uuid4().hex[:6]}"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str, stdin: str | None = None,
         monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[int, str, str]:
    if stdin is not None:
        assert monkeypatch is not None
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _word_count_app(tmp_path: Path, src: str, out: str) -> Path:
    app = tmp_path / "wc_app.py"
    # the example by path: an "app" module another test imported may be in sys.modules
    app.write_text(
        "import importlib.util\n"
        "_spec = importlib.util.spec_from_file_location(\n"
        f"    'word_count_example', {str(ROOT / 'examples' / 'word_count' / 'app.py')!r})\n"
        "_example = importlib.util.module_from_spec(_spec)\n"
        "_spec.loader.exec_module(_example)\n"
        "config = _example.config\n"
        f"def build_topology():\n    return _example.build_topology({src!r}, {out!r})\n")
    return app


def test_topics_create_list_describe(bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    name = _name("cli-topic")
    code, out, _ = _cli(capsys, "topics", "create", name, "--partitions", "2",
                        "--bootstrap-servers", bootstrap)
    assert code == 0 and out == f"created topic {name} (2 partitions)\n"
    code, out, _ = _cli(capsys, "topics", "create", name, "--partitions", "3",
                        "--bootstrap-servers", bootstrap)
    assert code == 0 and out == ""  # exists: left as it is
    code, out, _ = _cli(capsys, "topics", "list", "--bootstrap-servers", bootstrap)
    assert f"{name}\t2\n" in out
    code, out, _ = _cli(capsys, "topics", "describe", name, "--bootstrap-servers", bootstrap)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"topic {name}: 2 partitions"
    assert lines[1].startswith("  partition 0: leader ") and lines[1].endswith("offsets 0..0")
    assert lines[2].startswith("  partition 1: ")


def test_produce_tab_lines_and_consume_them_with_given_serdes(
        bootstrap: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    topic = _name("cli-tsv")
    main(["topics", "create", topic, "--bootstrap-servers", bootstrap])
    code, _, err = _cli(capsys, "produce", topic, "--key-serde", "string", "--value-serde",
                        "long", "--bootstrap-servers", bootstrap,
                        stdin="kafka\t3\nstreams\t-1\n\n", monkeypatch=monkeypatch)
    assert code == 0, err
    raw = read_all(bootstrap, topic)
    assert [(m.key(), m.value()) for m in raw] == [
        (b"kafka", struct.pack(">q", 3)), (b"streams", struct.pack(">q", -1))]
    code, out, _ = _cli(capsys, "consume", topic, "--from-beginning", "--key-serde", "string",
                        "--value-serde", "long", "--bootstrap-servers", bootstrap)
    assert code == 0 and out == "kafka\t3\nstreams\t-1\n"
    code, out, _ = _cli(capsys, "consume", topic, "--from-beginning", "--max", "1",
                        "--key-serde", "string", "--value-serde", "long", "--format", "json",
                        "--bootstrap-servers", bootstrap)
    record = json.loads(out)
    assert (record["key"], record["value"], record["partition"], record["offset"]) == (
        "kafka", 3, 0, 0)
    assert record["timestamp"] == raw[0].timestamp()[1]


def test_json_lines_with_timestamps_tombstones_and_windowed_keys(
        bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topic = _name("cli-json")
    main(["topics", "create", topic, "--bootstrap-servers", bootstrap])
    sample = tmp_path / "records.jsonl"
    window = {"key": "alice", "start": 1_763_892_000_000, "end": 1_763_892_600_000}
    sample.write_text(
        json.dumps({"key": 1, "value": {"client": "c1", "ids": [1, 2]},
                    "timestamp": "2025-11-23T10:00:00Z"}) + "\n"
        + json.dumps({"key": 1, "value": None, "timestamp": 1_763_892_060_000}) + "\n"
        + json.dumps({"key": window, "value": 4}) + "\n")
    code, _, err = _cli(capsys, "produce", topic, "--file", str(sample),
                        "--bootstrap-servers", bootstrap)
    assert code == 0, err
    raw = read_all(bootstrap, topic)
    assert [m.timestamp()[1] for m in raw[:2]] == [1_763_892_000_000, 1_763_892_060_000]
    assert raw[1].value() is None  # a tombstone, not the bytes of "null"
    code, out, _ = _cli(capsys, "consume", topic, "--from-beginning",
                        "--bootstrap-servers", bootstrap)
    assert out.splitlines() == [
        '1\t{"client": "c1", "ids": [1, 2]}',
        "1\tnull",
        "alice@[2025-11-23 10:00:00,10:10:00)\t4",
    ]
    code, out, _ = _cli(capsys, "consume", topic, "--from-beginning", "--format", "json",
                        "--bootstrap-servers", bootstrap)
    assert json.loads(out.splitlines()[2])["key"] == window


def test_json_lines_with_headers_are_produced_with_them_and_consumed_back(
        bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topic = _name("cli-headers")
    main(["topics", "create", topic, "--bootstrap-servers", bootstrap])
    sample = tmp_path / "records.jsonl"
    sample.write_text(
        json.dumps({"key": "a", "value": 1, "headers": {"trace-id": "t1", "tenant": "x"}}) + "\n"
        + json.dumps({"key": "b", "value": 2, "headers": [["trace-id", "t2"], ["n", None]]})
        + "\n" + json.dumps({"key": "c", "value": 3}) + "\n")
    code, _, err = _cli(capsys, "produce", topic, "--file", str(sample),
                        "--bootstrap-servers", bootstrap)
    assert code == 0, err
    assert [m.headers() for m in read_all(bootstrap, topic)] == [
        [("trace-id", b"t1"), ("tenant", b"x")], [("trace-id", b"t2"), ("n", None)], None]
    code, out, _ = _cli(capsys, "consume", topic, "--from-beginning", "--format", "json",
                        "--bootstrap-servers", bootstrap)
    assert [json.loads(line)["headers"] for line in out.splitlines()] == [
        [["trace-id", "t1"], ["tenant", "x"]], [["trace-id", "t2"], ["n", None]], []]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"key": "a", "value": 1, "headers": [["only-a-name"]]}) + "\n")
    code, _, err = _cli(capsys, "produce", topic, "--file", str(bad),
                        "--bootstrap-servers", bootstrap)
    assert code != 0 and "line 1" in err and '"headers"' in err, err


def test_the_application_file_gives_the_serdes_of_each_topic(
        bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    src, out_topic = _name("cli-lines"), _name("cli-counts")
    main(["topics", "create", src, out_topic, "--bootstrap-servers", bootstrap])
    app = _word_count_app(tmp_path, src, out_topic)
    # the input: string keys and values (the app's defaults); a line without a tab has no key
    code, _, err = _cli(capsys, "produce", src, str(app), "--bootstrap-servers", bootstrap,
                        stdin="the quick fox\n", monkeypatch=monkeypatch)
    assert code == 0, err
    assert [(m.key(), m.value()) for m in read_all(bootstrap, src)] == [
        (None, b"the quick fox")]
    # the output: the sink's value serde (long)
    code, _, err = _cli(capsys, "produce", out_topic, str(app), "--bootstrap-servers", bootstrap,
                        stdin="fox\t7\n", monkeypatch=monkeypatch)
    assert code == 0, err
    assert read_all(bootstrap, out_topic)[0].value() == struct.pack(">q", 7)
    code, out, _ = _cli(capsys, "consume", out_topic, str(app), "--from-beginning",
                        "--bootstrap-servers", bootstrap)
    assert out == "fox\t7\n"


def test_a_missing_topic_is_one_line_with_the_command_that_creates_it(
        bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    topic = _name("cli-missing")
    code, out, err = _cli(capsys, "produce", topic, "--bootstrap-servers", bootstrap,
                          stdin="a\tb\n", monkeypatch=monkeypatch)
    assert code == 1 and out == ""
    assert err == (f"streamtable: topic '{topic}' does not exist on {bootstrap}; create it with:"
                   f" streamtable topics create {topic} --bootstrap-servers {bootstrap}\n")
    code, _, err = _cli(capsys, "consume", topic, "--bootstrap-servers", bootstrap)
    assert code == 1 and "streamtable topics create" in err
    assert topic not in list_topic_names(bootstrap)  # asking did not create it (Tansu would)
    from streamtable.cli.topics import require_topics
    from streamtable.kafka.admin import TopicNotFoundError

    other = _name("cli-missing-too")
    with pytest.raises(TopicNotFoundError) as missing:
        require_topics(bootstrap, [topic, other])
    assert str(missing.value) == (
        f"topic '{topic}' does not exist on {bootstrap} (nor '{other}'); create them with: "
        f"streamtable topics create {topic} {other} --bootstrap-servers {bootstrap}")


def test_run_with_a_missing_input_topic_names_it_before_starting_spark(
        bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, out_topic = _name("cli-run-lines"), _name("cli-run-counts")
    app = _word_count_app(tmp_path, src, out_topic)
    code, out, err = _cli(capsys, "run", str(app), "--bootstrap-servers", bootstrap,
                          "--state-dir", str(tmp_path / "state"))
    assert code == 1
    assert err.splitlines() == [
        f"streamtable: topic '{src}' does not exist on {bootstrap}; create it with: "
        f"streamtable topics create {src} --bootstrap-servers {bootstrap} "
        "(or run with --create-topics)"]


def test_bad_input_names_the_file_and_line(
        bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topic = _name("cli-bad")
    main(["topics", "create", topic, "--bootstrap-servers", bootstrap])
    sample = tmp_path / "bad.txt"
    sample.write_text("a\t1\nb\tmany\n")
    code, _, err = _cli(capsys, "produce", topic, "--file", str(sample), "--value-serde", "int",
                        "--bootstrap-servers", bootstrap)
    assert code == 1
    assert err.startswith(f"streamtable: {sample}, line 2: invalid literal for int()")


def test_follow_stops_at_max_or_after_the_idle_timeout(
        bootstrap: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    topic = _name("cli-follow")
    main(["topics", "create", topic, "--partitions", "2", "--bootstrap-servers", bootstrap])
    _cli(capsys, "produce", topic, "--key-serde", "string", "--value-serde", "string",
         "--bootstrap-servers", bootstrap, stdin="a\t1\nb\t2\nc\t3\n", monkeypatch=monkeypatch)
    serdes = ("--key-serde", "string", "--value-serde", "string", "--bootstrap-servers",
              bootstrap)
    code, out, err = _cli(capsys, "consume", topic, "--from-beginning", "--follow", "--max", "2",
                          *serdes)
    assert code == 0 and len(out.splitlines()) == 2, err
    started = time.monotonic()
    code, out, _ = _cli(capsys, "consume", topic, "--from-beginning", "--follow", "--timeout",
                        "1", *serdes)
    assert code == 0 and sorted(out.splitlines()) == ["a\t1", "b\t2", "c\t3"]
    assert time.monotonic() - started < 30


def test_run_create_topics_creates_the_missing_input_topics(bootstrap: str,
                                                            tmp_path: Path) -> None:
    """What `streamtable run --create-topics` does before it starts the query (no Spark here)."""
    from streamtable.cli import _input_topics
    from streamtable.kafka.admin import partition_counts
    from streamtable.runtime.spark import StreamsApp

    src, out_topic = _name("cli-create-lines"), _name("cli-create-counts")
    main(["topics", "create", out_topic, "--bootstrap-servers", bootstrap])
    app = StreamsApp(load_app(str(_word_count_app(tmp_path, src, out_topic))).build_topology(),
                     bootstrap_servers=bootstrap, state_dir=tmp_path / "state")
    _input_topics(app, True, 3)
    assert partition_counts(bootstrap, [src]) == {src: 3}
    _input_topics(app, False, 1)  # now present: no error
