"""Configuration, keyed like Kafka Streams' where Kafka Streams has the key.

>>> cfg = StreamsConfig({"application.id": "app", "cache.max.bytes.buffering": 0})
>>> cfg.caching_enabled
False
"""

from __future__ import annotations

import re
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

# Kafka client settings: keys with these prefixes (security) are librdkafka's own and go, as they
# are, to every consumer, producer and admin client the application creates; any other librdkafka
# setting goes there as ``kafka.<key>`` (e.g. ``kafka.client.id``).
CLIENT_PREFIXES = ("security.", "sasl.", "ssl.")
CLIENT_PASSTHROUGH = "kafka."

# Values never shown (repr, logs, errors): a key matching this, as Spark's spark.redaction.regex
# does, plus key material in PEM form.
SECRET_KEY = re.compile(r"(?i)secret|password|token|access[.]key|credential|pem$|jaas")
REDACTED = "********"
_URL_PASSWORD = re.compile(r"^([a-z][a-z0-9+.-]*://[^:/@]*:)[^@]*@", re.IGNORECASE)


def is_client_key(key: str) -> bool:
    """Whether ``key`` is a Kafka client setting passed to every client (see
    :func:`kafka_client_config`).

    >>> is_client_key("sasl.password"), is_client_key("kafka.client.id"), is_client_key("state.dir")
    (True, True, False)
    """
    return key.startswith(CLIENT_PREFIXES) or (key.startswith(CLIENT_PASSTHROUGH)
                                               and len(key) > len(CLIENT_PASSTHROUGH))


def redacted(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with the values of secret keys (passwords, tokens, keys) replaced.

    >>> redacted({"sasl.username": "me", "sasl.password": "hunter2",
    ...           "serving.url": "postgresql://app:hunter2@db:5432/x"})["serving.url"]
    'postgresql://app:********@db:5432/x'
    """
    return {k: REDACTED if SECRET_KEY.search(str(k)) and v is not None
            else _URL_PASSWORD.sub(rf"\1{REDACTED}@", v) if isinstance(v, str) else v
            for k, v in settings.items()}


def kafka_client_config(config: StreamsConfig | Mapping[str, Any]) -> dict[str, Any]:
    """The librdkafka settings every Kafka client of the application gets: ``bootstrap.servers``,
    the security settings (``security.protocol``, ``sasl.*``, ``ssl.*``) and each
    ``kafka.<key>`` as ``<key>``. Every consumer, producer and admin client is built from it.

    >>> cfg = StreamsConfig({"bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL",
    ...                      "kafka.client.id": "billing"})
    >>> kafka_client_config(cfg)
    {'bootstrap.servers': 'b:9092', 'security.protocol': 'SASL_SSL', 'client.id': 'billing'}
    """
    values = config.as_dict() if isinstance(config, StreamsConfig) else dict(config)
    out: dict[str, Any] = {"bootstrap.servers": values.get("bootstrap.servers",
                                                           DEFAULTS["bootstrap.servers"])}
    for key, value in values.items():
        if value is None or not is_client_key(key):
            continue
        name = key[len(CLIENT_PASSTHROUGH):] if key.startswith(CLIENT_PASSTHROUGH) else key
        out[name] = value
    return out


# Kafka Streams sizes its cache in bytes; we hold Python objects, so bytes become entries at
# this assumed size per entry.
CACHE_BYTES_PER_ENTRY = 256


class ConfigError(ValueError):
    """A setting streamtable does not know (the message suggests the closest known one)."""


def _check_key(key: str) -> None:
    if key in DEFAULTS or is_client_key(key):
        return
    import difflib

    close = difflib.get_close_matches(key, DEFAULTS, n=1, cutoff=0.75)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ConfigError(
        f"unknown setting {key!r}: {hint}streamtable's settings are "
        f"{', '.join(sorted(DEFAULTS))}; Kafka client settings are security.*, sasl.*, ssl.* "
        f"and kafka.<librdkafka key>")


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
        """Every setting, secrets included (for the runtime; show :meth:`redacted`)."""
        return dict(self._values)

    def redacted(self) -> dict[str, Any]:
        """Every setting, with the values of secret keys replaced (for logs and messages)."""
        return redacted(self._values)

    def __repr__(self) -> str:
        changed = {k: v for k, v in self._values.items() if DEFAULTS.get(k, k) != v}
        return f"StreamsConfig({redacted(changed)!r})"

    @property
    def kafka_client_config(self) -> dict[str, Any]:
        """See :func:`kafka_client_config`."""
        return kafka_client_config(self)

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
