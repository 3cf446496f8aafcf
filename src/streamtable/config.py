"""Configuration, keyed like Kafka Streams' where Kafka Streams has the key.

Every setting is defined once, in :data:`SETTINGS`: its default, what values it takes and what it
means. Values are checked when a :class:`StreamsConfig` is made (strings from the command line are
converted), and ``streamtable config`` prints the table of them all.

>>> cfg = StreamsConfig({"application.id": "app", "cache.max.bytes.buffering": "0"})
>>> cfg.caching_enabled
False
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from streamtable.serde import Serde, serde_from


class ConfigError(ValueError):
    """A setting streamtable does not know (the message suggests the closest known one), or a
    value it does not take (the message names the key, the value and what is expected)."""


@dataclass(frozen=True)
class Setting:
    """One setting: ``kafka`` says whether Kafka Streams has the key (with the same meaning);
    ``expected`` describes the values taken and ``check`` converts or rejects one."""

    key: str
    default: Any
    expected: str
    meaning: str
    kafka: bool
    check: Callable[[Any], Any]


def _integer(minimum: int, optional: bool = False) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, str):
            value = int(value.strip().replace("_", ""))
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or value < minimum:
            raise ValueError
        return value
    return check


def _text(optional: bool = False) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value.strip():
            raise ValueError
        return value.strip()
    return check


def _choice(*choices: str, aliases: Mapping[str, str] | None = None,
            optional: bool = False) -> Callable[[Any], Any]:
    lookup = {c.lower().replace("_", ""): c for c in choices}
    for alias, choice in (aliases or {}).items():
        lookup[alias.lower()] = choice

    def check(value: Any) -> Any:
        if value is None and optional:
            return None
        found = lookup.get(str(value).strip().lower().replace("_", ""))
        if found is None:
            raise ValueError
        return found
    return check


def _serde(value: Any) -> Any:
    if isinstance(value, Serde):
        return value
    if not isinstance(value, str):
        raise ValueError
    serde_from(value)  # raises ValueError for an unknown name
    return value


_HANDLER_ALIASES = {  # Kafka Streams' handler class names
    "logandfailexceptionhandler": "fail", "logandfailprocessingexceptionhandler": "fail",
    "logandcontinueexceptionhandler": "continue",
    "logandcontinueprocessingexceptionhandler": "continue",
}
SERDE_NAMES = "json, string, int, long, double, bytes, pickle, or a Serde instance"

SETTINGS: tuple[Setting, ...] = (
    Setting("application.id", "streamtable-app", "a non-empty string",
            "Names the application: its state directory, its consumer group and Spark query. "
            "The CLI defaults it to the application file's name.", True, _text()),
    Setting("bootstrap.servers", "localhost:9092", "host:port[,host:port...]",
            "The Kafka brokers to connect to.", True, _text()),
    Setting("cache.max.bytes.buffering", 64 * 1024 * 1024, "an integer >= 0",
            "Record cache size: 0 forwards every change of a KTable downstream; otherwise "
            "changes are held per key until the micro-batch ends, and a full cache forwards "
            "its eldest change (counted at 256 bytes per entry, per table; Kafka Streams' "
            "default is 10 MiB). Larger: fewer intermediate updates downstream; smaller: less "
            "memory per task.",
            True, _integer(0)),
    Setting("commit.interval.ms", 1000, "an integer >= 0",
            "The micro-batch trigger interval (0: the next batch as soon as one ends).",
            True, _integer(0)),
    Setting("default.key.serde", "json", SERDE_NAMES,
            "Serde of keys where the topology names none.", True, _serde),
    Setting("default.value.serde", "json", SERDE_NAMES,
            "Serde of values where the topology names none.", True, _serde),
    Setting("default.deserialization.exception.handler", None,
            "fail | continue (or Kafka Streams' LogAndFail/LogAndContinue class names)",
            "A record whose key or value cannot be decoded: fail (stop with an error naming the "
            "record) or continue (log, count, skip). Default: fail, or continue when a "
            "dead-letter topic is set.", True,
            _choice("fail", "continue", aliases=_HANDLER_ALIASES, optional=True)),
    Setting("processing.exception.handler", None,
            "fail | continue (or Kafka Streams' LogAndFail/LogAndContinue class names)",
            "A user function raising on a record: fail or continue, as above.", True,
            _choice("fail", "continue", aliases=_HANDLER_ALIASES, optional=True)),
    Setting("errors.dead.letter.queue.topic.name", None, "a topic name, or unset",
            "Where records skipped by a handler are written, with the error in headers "
            "(KIP-1034).", True, _text(optional=True)),
    Setting("processing.guarantee", "exactly_once_v2", "exactly_once_v2 | at_least_once",
            "Accepted for compatibility: the Spark runtime is always exactly-once (batch-id "
            "replay).", True, _choice("exactly_once_v2", "at_least_once")),
    Setting("num.partitions", None, "an integer >= 1, or unset",
            "Tasks of a sub-topology fed by no source topic (default 1).", False,
            _integer(1, optional=True)),
    Setting("state.dir", ".streamtable", "a directory",
            "This machine's directory: the query's checkpoint, the SQLite serving store, "
            "RocksDB working copies, the log file.", True, _text()),
    Setting("state.location", None, "a directory or URL (s3://, gs://, hdfs://), or unset",
            "Where tasks keep durable state (Spark runtime); every executor must reach it. "
            "Default: state.dir.", False, _text(optional=True)),
    Setting("default.dsl.store", "in_memory", "in_memory | rocksDB",
            "Tasks' working copies of their stores: dicts in the Python workers, or RocksDB on "
            "the local disk under state.dir (state larger than memory).", True,
            _choice("in_memory", "rocksDB")),
    Setting("dsl.store.format", "default", "default | headers",
            "What the DSL's stores keep per key (KIP-1285): default, the value and its "
            "timestamp; headers, also the headers of the record that wrote it, which survive "
            "restarts with the store. A processor reading a DSL store then gets "
            "ValueTimestampHeaders, and a left or outer stream-stream join's unmatched record "
            "keeps its own headers. Records carry their headers through every operator either "
            "way.", True, _choice("default", "headers")),
    Setting("max.records.per.batch", 1_000_000, "an integer >= 1",
            "The cap of one micro-batch (Spark runtime): large batches when behind, small "
            "when caught up.", False, _integer(1)),
    Setting("batch.split", "timestamp", "timestamp | count",
            "How a micro-batch that takes only part of the backlog ends on each partition "
            "(Spark runtime): timestamp ends them all at the same record timestamp, so a task "
            "sees its partitions in timestamp order across batches as Kafka Streams does; "
            "count gives each partition an equal share, and a sparse topic then runs ahead of "
            "a dense one (its records can come late for windows and joins whose grace is "
            "shorter than the gap).", False, _choice("timestamp", "count")),
    Setting("worker.memory.budget.bytes", 256 * 1024 * 1024, "an integer >= 0",
            "What one Python worker may add to its memory while it runs a task of a "
            "micro-batch (Spark runtime, Linux): after each batch the next one is sized from "
            "the largest growth per record of the last 8 batches measured, never above "
            "max.records.per.batch. Smaller: less "
            "memory, smaller batches (each costs a fixed ~0.3 s); 0: batches sized by "
            "max.records.per.batch alone.", False, _integer(0)),
    Setting("worker.memory.recycle.bytes", 256 * 1024 * 1024, "an integer >= 0",
            "After a task, a Python worker whose resident memory is above this exits, and a "
            "new one forked from Spark's Python daemon runs the next task (Spark runtime, "
            "Linux; not a worker that keeps in-memory stores' state between batches). A "
            "long-lived worker keeps much of what its tasks freed: after tens of batches 3-6 "
            "times a new worker's memory at a task's start. Larger: fewer new workers (each "
            "opens its Kafka clients again), more memory kept (Nexmark at 10,000,000 events "
            "on RocksDB stores, q7, q11, q17 and q18: 1.80-1.97 GB at 256 MiB, 2.06-2.08 GB "
            "at 320, with 7% less to 18% more CPU time at 256); 0: workers live as long as "
            "Spark keeps them.",
            False, _integer(0)),
    Setting("first.batch.records", None, "an integer >= 1, or unset",
            "The first batch after a start, growing fourfold per batch up to "
            "max.records.per.batch: early first results for an application that starts behind, "
            "at some throughput while it catches up. Default, for a topology with state: "
            "worker.memory.budget.bytes over 2 KiB a record (131,072), as no batch is "
            "measured yet; without state or without a budget, no ramp.",
            False,
            _integer(1, optional=True)),
    Setting("task.timeout.ms", 300_000, "an integer >= 0",
            "How long a batch waits for an unreachable Kafka (planning, reading, writing), "
            "saying every ten seconds what it waits for, before the application stops with an "
            "error.", True, _integer(0)),
    Setting("lease.timeout.ms", 30_000, "an integer >= 1000",
            "How long a run's lease on its state location lasts without a heartbeat (it beats "
            "every third of this): a run killed on another host blocks a restart this long (on "
            "the same host, not at all), and a run taking over waits at most this long for the "
            "old one to stop.", False, _integer(1000)),
    Setting("upgrade.new.state.from", "earliest", "earliest | latest",
            "Where a store or output that a new version of the topology adds starts (see "
            "docs/upgrading.md): earliest builds it from the input topics' earliest offsets "
            "before the application goes on, as if the new version had always run; latest "
            "starts it empty with the next records. The run flag is --new-state-from.", False,
            _choice("earliest", "latest")),
    Setting("serving.url", None, "postgresql://... or a SQLite file path, or unset",
            "Where the queryable stores are served from (default: SQLite in state.dir).",
            False, _text(optional=True)),
)
SETTINGS_BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}
DEFAULTS: dict[str, Any] = {s.key: s.default for s in SETTINGS}

# Kafka client settings: keys with these prefixes (security) are librdkafka's own and go, as they
# are, to every consumer, producer and admin client the application creates; any other librdkafka
# setting goes there as ``kafka.<key>`` (e.g. ``kafka.client.id``).
CLIENT_PREFIXES = ("security.", "sasl.", "ssl.")
CLIENT_PASSTHROUGH = "kafka."

# Spark settings: keys starting with this go, as they are, to the SparkSession an application
# starts (``spark.executor.memory``, ``spark.sql.shuffle.partitions``, ...)
SPARK_PREFIX = "spark."

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


def is_spark_key(key: str) -> bool:
    """Whether ``key`` is a Spark setting, for the session the application starts (see
    :func:`spark_config`).

    >>> is_spark_key("spark.executor.memory"), is_spark_key("state.dir")
    (True, False)
    """
    return key.startswith(SPARK_PREFIX) and len(key) > len(SPARK_PREFIX)


def spark_config(config: StreamsConfig | Mapping[str, Any]) -> dict[str, str]:
    """The Spark settings among ``config``: its ``spark.*`` keys, as strings.

    >>> spark_config({"spark.executor.memory": "2g", "spark.sql.shuffle.partitions": 16,
    ...               "state.dir": "/tmp/s"})
    {'spark.executor.memory': '2g', 'spark.sql.shuffle.partitions': '16'}
    """
    values = config.as_dict() if isinstance(config, StreamsConfig) else dict(config)
    return {k: str(v) for k, v in values.items() if is_spark_key(k) and v is not None}


def is_passed_on(key: str) -> bool:
    """Whether ``key`` is another program's setting, passed on as it is (a Kafka client's or
    Spark's), which that program checks.

    >>> is_passed_on("sasl.password"), is_passed_on("spark.executor.memory")
    (True, True)
    """
    return is_client_key(key) or is_spark_key(key)


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


def _check_key(key: str) -> None:
    if key in DEFAULTS or is_passed_on(key):
        return
    import difflib

    close = difflib.get_close_matches(key, DEFAULTS, n=1, cutoff=0.75)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ConfigError(
        f"unknown setting {key!r}: {hint}streamtable's settings are "
        f"{', '.join(sorted(DEFAULTS))}; Kafka client settings are security.*, sasl.*, ssl.* "
        f"and kafka.<librdkafka key>; Spark settings are spark.*")


def check_value(key: str, value: Any) -> Any:
    """The value of ``key`` converted to its type, or a :class:`ConfigError` naming the key,
    the value and what is expected.

    >>> check_value("commit.interval.ms", "500")
    500
    >>> check_value("default.dsl.store", "rocksdb")
    'rocksDB'
    >>> check_value("commit.interval.ms", "soon")
    Traceback (most recent call last):
    ...
    streamtable.config.ConfigError: commit.interval.ms = 'soon': expected an integer >= 0
    """
    setting = SETTINGS_BY_KEY[key]
    try:
        return setting.check(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} = {value!r}: expected {setting.expected}") from None


def settings_table() -> str:
    """Every setting as a Markdown table (what ``streamtable config`` prints and
    ``docs/configuration.md`` holds).

    >>> settings_table().splitlines()[2].startswith("| `application.id` |")
    True
    """
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| Key | Default | Values | Meaning | Kafka Streams' key? |",
             "| --- | --- | --- | --- | --- |"]
    for s in SETTINGS:
        default = "unset" if s.default is None else f"`{s.default}`"
        origin = "yes" if s.kafka else "streamtable only"
        lines.append(f"| `{s.key}` | {default} | {cell(s.expected)} | {cell(s.meaning)} | "
                     f"{origin} |")
    return "\n".join(lines) + "\n"


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
            # Kafka client settings are librdkafka's to check, Spark settings Spark's
            self._values[key] = v if is_passed_on(key) else check_value(key, v)

    def get(self, key: str, default: Any = None) -> Any:
        """The value of setting ``key`` (or ``default``; ``config[key]`` raises instead).

        >>> config = StreamsConfig({"application.id": "app", "commit.interval.ms": 500})
        >>> config.get("commit.interval.ms"), config.get("no.such.key", "-")
        (500, '-')
        """
        return self._values.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def as_dict(self) -> dict[str, Any]:
        """Every setting, secrets included (for the runtime; show :meth:`redacted`)."""
        return dict(self._values)

    def redacted(self) -> dict[str, Any]:
        """Every setting, with the values of secret keys replaced (for logs and messages).

        >>> StreamsConfig({"sasl.password": "hunter2"}).redacted()["sasl.password"]
        '********'
        """
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
        """``application.id``."""
        return str(self._values["application.id"])

    @property
    def caching_enabled(self) -> bool:
        """Whether record caches are on (``cache.max.bytes.buffering > 0``)."""
        return int(self._values["cache.max.bytes.buffering"]) > 0

    @property
    def cache_max_entries(self) -> int:
        """How many entries a task's record cache holds, from ``cache.max.bytes.buffering``."""
        return max(1, int(self._values["cache.max.bytes.buffering"]) // CACHE_BYTES_PER_ENTRY)

    @property
    def default_key_serde(self) -> Serde:
        """The serde of ``default.key.serde``, for keys."""
        return serde_from(self._values["default.key.serde"], key=True)

    @property
    def default_value_serde(self) -> Serde:
        """The serde of ``default.value.serde``."""
        return serde_from(self._values["default.value.serde"])

    @property
    def dead_letter_topic(self) -> str | None:
        """``errors.dead.letter.queue.topic.name``, or None."""
        return self._values.get("errors.dead.letter.queue.topic.name")

    @property
    def rocksdb_stores(self) -> bool:
        """Whether tasks keep their stores in RocksDB (``default.dsl.store=rocksDB``)."""
        return bool(self._values["default.dsl.store"] == "rocksDB")

    @property
    def store_headers(self) -> bool:
        """Whether the DSL's stores keep each record's headers (``dsl.store.format=headers``).

        >>> StreamsConfig({"dsl.store.format": "HEADERS"}).store_headers
        True
        """
        return bool(self._values["dsl.store.format"] == "headers")

    def handler(self, key: str) -> str:
        """``fail`` or ``continue``; with a dead-letter topic the default is ``continue``.

        >>> key = "processing.exception.handler"
        >>> StreamsConfig().handler(key), StreamsConfig({
        ...     "errors.dead.letter.queue.topic.name": "dlq"}).handler(key)
        ('fail', 'continue')
        """
        value = self._values.get(key)
        if value is None:
            return "continue" if self.dead_letter_topic else "fail"
        return str(value)


def configuration_page() -> str:
    """The configuration reference page: ``streamtable config`` prints it, and
    ``make config-docs`` writes it to ``docs/configuration.md``."""
    return (
        "# Configuration\n\n"
        "Settings are given as the `config` dict of an application file, as "
        "`StreamsApp(config=...)`, or on the command line (`--config key=value`, repeatable). "
        "Keys are Kafka Streams' where Kafka Streams has the setting; `_` may stand for `.`. "
        "An unknown key or a value of the wrong type stops the application at start with an "
        "error naming the key, the value and what is expected. Besides the settings below, "
        "`security.*`, `sasl.*`, `ssl.*` and `kafka.<librdkafka key>` go to every Kafka client, "
        "and `spark.*` (e.g. `spark.executor.memory`) to the SparkSession the application "
        "starts.\n\n"
        "This page is generated from `streamtable/config.py` by `make config-docs` "
        "(`streamtable config`).\n\n" + settings_table())
