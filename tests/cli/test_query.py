"""`streamtable query` prints windowed keys as {"key", "start", "end"}, not Python reprs, looks a
plain key up in every window of a windowed store, and says so (exit 1) when the key is absent or
the application has not run yet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamtable.cli import main
from streamtable.config import StreamsConfig
from streamtable.serving import configured_serving_store
from streamtable.serving.codec import encode_key, encode_value
from streamtable.windowing import Windowed

APP = """
from streamtable import StreamsBuilder, TimeWindows

config = {"application.id": "clicks"}


def build_topology():
    b = StreamsBuilder()
    (b.stream("clicks").group_by_key()
        .windowed_by(TimeWindows.of(600_000)).count("clicks-per-window"))
    return b.build()
"""


def test_windowed_keys_are_readable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app = tmp_path / "clicks.py"
    app.write_text(APP)
    state = tmp_path / "state"
    serving = configured_serving_store(StreamsConfig({"application.id": "clicks",
                                                      "state.dir": str(state)}))
    serving.apply(0, [
        ("clicks-per-window", encode_key(Windowed("alice", 0, 600_000)), encode_value((2, 5)), 0),
        ("clicks-per-window", encode_key(Windowed("alice", 600_000, 1_200_000)),
         encode_value((1, 700_000)), 0),
        ("clicks-per-window", encode_key(Windowed("bob", 0, 600_000)), encode_value((4, 9)), 0),
    ])
    assert main(["query", str(app), "clicks-per-window", "--state-dir", str(state)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows == [[{"key": "alice", "start": 0, "end": 600_000}, 2],
                    [{"key": "alice", "start": 600_000, "end": 1_200_000}, 1],
                    [{"key": "bob", "start": 0, "end": 600_000}, 4]]
    assert main(["query", str(app), "clicks-per-window", "bob", "--state-dir", str(state)]) == 0
    assert capsys.readouterr().out == '[{"key": "bob", "start": 0, "end": 600000}, 4]\n'
    assert main(["query", str(app), "clicks-per-window", "carol", "--state-dir", str(state)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "streamtable: no key 'carol' in store 'clicks-per-window' of clicks\n"


def test_an_absent_key_is_a_message_and_exit_1(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    app = tmp_path / "clicks.py"
    app.write_text(APP.replace(".windowed_by(TimeWindows.of(600_000))", ""))
    state = tmp_path / "state"
    serving = configured_serving_store(StreamsConfig({"application.id": "clicks",
                                                      "state.dir": str(state)}))
    serving.apply(0, [("clicks-per-window", encode_key("alice"), encode_value((2, 5)), 0)])
    assert main(["query", str(app), "clicks-per-window", "alice", "--state-dir", str(state)]) == 0
    assert capsys.readouterr().out == "2\n"
    assert main(["query", str(app), "clicks-per-window", "bob", "--state-dir", str(state)]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "", "streamtable: no key 'bob' in store 'clicks-per-window' of clicks\n")


def test_no_state_says_the_application_has_not_run_yet(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app = tmp_path / "clicks.py"
    app.write_text(APP)
    state = tmp_path / "state"
    for key in (["alice"], []):
        assert main(["query", str(app), "clicks-per-window", *key, "--state-dir", str(state)]) == 1
        err = capsys.readouterr().err
        assert err.startswith("streamtable: the application 'clicks' has not run yet: there is "
                              f"no state at {state / 'clicks' / 'serving.db'}; run it first "
                              f"(streamtable run {app})"), err
    assert not state.exists()  # asking creates nothing
    # a serving store opened by a run that applied no batch yet: still nothing to answer from
    configured_serving_store(StreamsConfig({"application.id": "clicks", "state.dir": str(state)}))
    assert main(["query", str(app), "clicks-per-window", "--state-dir", str(state)]) == 1
    assert "has not run yet" in capsys.readouterr().err
