"""Settings: a misspelt key is an error that names the setting meant, from Python and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtable.cli import main
from streamtable.config import ConfigError, StreamsConfig
from streamtable.testing import TopologyTestDriver

ROOT = Path(__file__).resolve().parents[1]


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


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("commit.interval.ms", "soon", "expected an integer >= 0"),
    ("commit.interval.ms", -5, "expected an integer >= 0"),
    ("max.records.per.batch", "0", "expected an integer >= 1"),
    ("cache.max.bytes.buffering", True, "expected an integer >= 0"),
    ("processing.exception.handler", "ignore", "expected fail | continue"),
    ("default.dsl.store", "lmdb", "expected in_memory | rocksDB"),
    ("default.key.serde", "avro", "expected json, string, int"),
    ("processing.guarantee", "exactly_once_v3", "expected exactly_once_v2 | at_least_once"),
    ("application.id", "", "expected a non-empty string"),
])
def test_a_value_of_the_wrong_type_names_key_value_and_what_is_expected(
        key: str, value: object, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        StreamsConfig({key: value})
    assert str(caught.value).startswith(f"{key} = {value!r}: {expected}")


def test_values_from_the_command_line_are_converted() -> None:
    cfg = StreamsConfig({"commit.interval.ms": "500", "default.dsl.store": "RocksDB",
                         "processing.exception.handler": "LogAndContinueExceptionHandler",
                         "default.deserialization.exception.handler": "FAIL",
                         "first.batch.records": "1_000"})
    assert cfg["commit.interval.ms"] == 500 and cfg.rocksdb_stores
    assert cfg.handler("processing.exception.handler") == "continue"
    assert cfg.handler("default.deserialization.exception.handler") == "fail"
    assert cfg["first.batch.records"] == 1000


def test_the_cli_rejects_a_bad_value_in_one_line(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["reset", str(ROOT / "examples" / "word_count" / "app.py"),
                 "--state-dir", str(tmp_path), "--config", "default.dsl.store=disk"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == "streamtable: default.dsl.store = 'disk': expected in_memory | rocksDB\n"


def test_the_configuration_page_is_generated_from_the_definitions(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config"]) == 0
    printed = capsys.readouterr().out
    from streamtable.config import DEFAULTS

    for key in DEFAULTS:
        assert f"| `{key}` |" in printed
    assert "| `default.dsl.store` | `in_memory` | in_memory \\| rocksDB |" in printed
    checked_in = (ROOT / "docs" / "configuration.md").read_text()
    assert checked_in == printed, "docs/configuration.md is stale: run `make config-docs`"


def test_spark_settings_go_to_the_session_the_application_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from streamtable import StreamsBuilder
    from streamtable.config import spark_config
    from streamtable.runtime.spark import StreamsApp
    from streamtable.runtime.spark.process import session

    cfg = StreamsConfig({"spark.executor.memory": "4g", "spark.sql.shuffle.partitions": 16,
                         "kafka.client.id": "billing"})
    assert spark_config(cfg) == {"spark.executor.memory": "4g",
                                 "spark.sql.shuffle.partitions": "16"}
    assert "spark.executor.memory" not in cfg.kafka_client_config
    with pytest.raises(ConfigError, match="Spark settings are spark"):
        StreamsConfig({"spark": "on"})

    started: list[dict[str, str]] = []
    monkeypatch.setattr(session, "spark_session",
                        lambda master, name, conf=None, **kw: started.append(dict(conf or {})))
    builder = StreamsBuilder()
    builder.stream("in").to("out")
    settings = {"spark.executor.memory": "4g", "spark.sql.shuffle.partitions": "16"}
    app = StreamsApp(builder.build(), "spark-settings", "localhost:9092", tmp_path,
                     config=settings)
    app.spark  # noqa: B018  (the session it starts)
    assert started == [settings]
    # a session given to the application keeps its own settings: said, not silently dropped
    StreamsApp(builder.build(), "spark-given", "localhost:9092", tmp_path, config=settings,
               spark=object())
    assert "spark.executor.memory, spark.sql.shuffle.partitions" in caplog.text
