"""Settings: a misspelt key is an error that names the setting meant, from Python and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtable.cli import main
from streamtable.config import ConfigError, StreamsConfig
from streamtable.testing import TopologyTestDriver

ROOT = Path(__file__).resolve().parents[2]


def test_a_misspelt_setting_names_the_one_meant() -> None:
    with pytest.raises(ConfigError, match="did you mean 'processing.exception.handler'"):
        StreamsConfig({"proccessing.exception.handler": "continue"})
    with pytest.raises(ConfigError, match="unknown setting 'no.such.thing'"):
        StreamsConfig({"no.such.thing": 1})


def test_known_settings_and_underscore_spelling_pass() -> None:
    cfg = StreamsConfig({"application_id": "app", "state.location": "s3://b/p",
                         "default.dsl.store": "rocksDB", "first.batch.records": 10})
    assert cfg.application_id == "app" and cfg.rocksdb_stores
    assert cfg["state.location"] == "s3://b/p"


def test_the_test_driver_refuses_an_unknown_setting() -> None:
    from streamtable import StreamsBuilder

    builder = StreamsBuilder()
    builder.stream("in").to("out")
    with pytest.raises(ConfigError, match="did you mean 'cache.max.bytes.buffering'"):
        TopologyTestDriver(builder.build(), {"cache.max.byte.buffering": 0})


def test_the_cli_says_it_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["reset", str(ROOT / "examples" / "word_count" / "app.py"),
                 "--state-dir", str(tmp_path), "--config", "commit.intervall.ms=10"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("streamtable: unknown setting 'commit.intervall.ms': did you mean "
                          "'commit.interval.ms'?")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
