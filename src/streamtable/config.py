"""Configuration, keyed like Kafka Streams' where Kafka Streams has the key.

>>> cfg = StreamsConfig({"application.id": "app", "cache.max.bytes.buffering": 0})
>>> cfg.caching_enabled
False
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamtable.serde import Serde, serde_from

DEFAULTS: dict[str, Any] = {
    "application.id": "streamtable-app",
    "bootstrap.servers": "localhost:9092",
    "cache.max.bytes.buffering": 10 * 1024 * 1024,
    "commit.interval.ms": 1000,
    "default.key.serde": "json",
    "default.value.serde": "json",
    # "fail" (stop with an error naming the record) or "continue" (log, count, skip)
    "default.deserialization.exception.handler": None,
    "processing.exception.handler": None,
    "errors.dead.letter.queue.topic.name": None,
    "processing.guarantee": "exactly_once_v2",
    "num.partitions": None,
    "state.dir": ".streamtable",
    # where tasks keep durable state (Spark runtime): a directory or a URL every executor
    # reaches (s3://bucket/prefix, gs://, hdfs://); None: state.dir
    "state.location": None,
    # tasks' working copies (Spark runtime): "in_memory" (dicts in the Python workers) or
    # "rocksDB" (on the local disk under state.dir: state larger than memory, kept across
    # restarts), as Kafka Streams' key of the same name
    "default.dsl.store": "in_memory",
    # the cap of one micro-batch (Spark runtime): large batches when behind, small when caught up
    "max.records.per.batch": 500_000,
    # the first batch after a start (Spark runtime; None: a sixteenth of max.records.per.batch),
    # growing fourfold per batch up to max.records.per.batch
    "first.batch.records": None,
    # how long the application waits for an unreachable Kafka (planning a batch, reading,
    # writing) before it stops with an error, as Kafka Streams' key of the same name
    "task.timeout.ms": 300_000,
    "serving.url": None,  # the serving store: postgresql://... or a SQLite file (None: state.dir)
}

# Kafka Streams sizes its cache in bytes; we hold Python objects, so bytes become entries at
# this assumed size per entry.
CACHE_BYTES_PER_ENTRY = 256


class ConfigError(ValueError):
    """A setting streamtable does not know (the message suggests the closest known one)."""


def _check_key(key: str) -> None:
    if key in DEFAULTS:
        return
    import difflib

    close = difflib.get_close_matches(key, DEFAULTS, n=1, cutoff=0.75)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ConfigError(
        f"unknown setting {key!r}: {hint}streamtable's settings are "
        f"{', '.join(sorted(DEFAULTS))}")


class StreamsConfig:
    """Read-only view over user settings with Kafka Streams' defaults. An unknown key is an
    error (a misspelt setting would otherwise be ignored); keys may use ``_`` for ``.``.

    >>> try:
    ...     StreamsConfig({"proccessing.exception.handler": "continue"})
    ... except ConfigError as e:
    ...     print(str(e).split("?")[0])
    unknown setting 'proccessing.exception.handler': did you mean 'processing.exception.handler'
    """

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        self._values = dict(DEFAULTS)
        for k, v in (settings or {}).items():
            key = k.replace("_", ".") if k not in DEFAULTS and "." not in k else k
            _check_key(key)
            self._values[key] = v

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    @property
    def application_id(self) -> str:
        return str(self._values["application.id"])

    @property
    def caching_enabled(self) -> bool:
        return int(self._values["cache.max.bytes.buffering"]) > 0

    @property
    def cache_max_entries(self) -> int:
        return max(1, int(self._values["cache.max.bytes.buffering"]) // CACHE_BYTES_PER_ENTRY)

    @property
    def default_key_serde(self) -> Serde:
        return serde_from(self._values["default.key.serde"])

    @property
    def default_value_serde(self) -> Serde:
        return serde_from(self._values["default.value.serde"])

    @property
    def dead_letter_topic(self) -> str | None:
        return self._values.get("errors.dead.letter.queue.topic.name")

    @property
    def rocksdb_stores(self) -> bool:
        value = str(self._values["default.dsl.store"]).lower().replace("_", "")
        if value not in ("inmemory", "rocksdb"):
            raise ValueError(f"default.dsl.store must be 'rocksDB' or 'in_memory', got "
                             f"{self._values['default.dsl.store']!r}")
        return value == "rocksdb"

    def handler(self, key: str) -> str:
        """``fail`` or ``continue``; with a dead-letter topic the default is ``continue``."""
        value = self._values.get(key)
        if value is None:
            return "continue" if self.dead_letter_topic else "fail"
        value = str(value).lower()
        if value not in ("fail", "continue"):
            raise ValueError(f"{key} must be 'fail' or 'continue', got {value!r}")
        return value
