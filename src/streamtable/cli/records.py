"""``streamtable produce | consume``: records in and out of topics, encoded with the serdes the
application uses for them.

    streamtable produce streams-plaintext-input examples/word_count/app.py \\
        --file examples/word_count/sample.txt
    streamtable consume streams-wordcount-output examples/word_count/app.py --from-beginning

Input is one record per line: ``key<TAB>value`` (a line without a tab is a value with a null
key), or JSON lines ``{"key": .., "value": .., "timestamp": ..}`` (``timestamp`` in epoch
milliseconds or ISO 8601; a null ``value`` is a tombstone). Output is ``key<TAB>value`` lines, or
JSON lines with ``--format json``; windowed keys read ``alice@[2026-11-23 10:00:00,10:10:00)``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from streamtable.errors import StreamsError
from streamtable.records import Headers, to_headers
from streamtable.serde import Serde, serde_from

log = logging.getLogger("streamtable")

DEFAULT_BOOTSTRAP = "localhost:9092"
_JSON_FIELDS = {"key", "value", "timestamp", "partition", "headers"}


class InputError(StreamsError):
    """A line of ``streamtable produce``'s input cannot become a record (names file and line)."""


# -- how keys and values are shown --------------------------------------------------------
def _instant(ms: int, with_date: bool = True) -> str:
    t = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    text = t.strftime("%Y-%m-%d %H:%M:%S" if with_date else "%H:%M:%S")
    return text + (f".{ms % 1000:03d}" if ms % 1000 else "")


def window_text(key: Any, start: int, end: int) -> str:
    """A windowed key as ``key@[start,end)`` in UTC; the end without its date when it falls on
    the start's day.

    >>> window_text("alice", 1_763_892_000_000, 1_763_892_600_000)
    'alice@[2025-11-23 10:00:00,10:10:00)'
    """
    same_day = (datetime.fromtimestamp(start / 1000, tz=timezone.utc).date()
                == datetime.fromtimestamp(end / 1000, tz=timezone.utc).date())
    inner = key if isinstance(key, str) else json.dumps(key, default=jsonable)
    return f"{inner}@[{_instant(start)},{_instant(end, not same_day)})"


def _window_parts(obj: Any) -> tuple[Any, int, int] | None:
    """``(key, start, end)`` of a windowed key: a ``Windowed`` or its JSON form."""
    from streamtable.windowing import Windowed

    if isinstance(obj, Windowed):
        return obj.key, obj.start, obj.end
    if (isinstance(obj, dict) and set(obj) == {"key", "start", "end"}
            and isinstance(obj["start"], int) and isinstance(obj["end"], int)):
        return obj["key"], obj["start"], obj["end"]
    return None


def jsonable(obj: Any) -> Any:
    """``json.dumps``' ``default``: sets as sorted lists, windowed keys as
    ``{"key", "start", "end"}``, bytes as text, anything else as its repr."""
    from streamtable.windowing import Windowed

    if isinstance(obj, Windowed):
        return {"key": obj.key, "start": obj.start, "end": obj.end}
    if isinstance(obj, (set, frozenset)):
        try:
            return sorted(obj)
        except TypeError:
            return list(obj)
    if isinstance(obj, (bytes, bytearray)):
        return bytes(obj).decode("utf-8", "backslashreplace")
    if hasattr(obj, "DESCRIPTOR") and hasattr(obj, "SerializeToString"):  # a Protobuf message
        from google.protobuf.json_format import MessageToDict

        return MessageToDict(obj, preserving_proto_field_name=True)
    return repr(obj)


def show(obj: Any) -> str:
    """One key or value as text: strings as they are, ``null`` for None (a tombstone), windowed
    keys as ``key@[start,end)``, anything else as JSON.

    >>> show("kafka"), show(None), show({1, 3}), show({"key": "a", "start": 0, "end": 60_000})
    ('kafka', 'null', '[1, 3]', 'a@[1970-01-01 00:00:00,00:01:00)')
    """
    if isinstance(obj, str):
        return obj
    window = _window_parts(obj)
    if window is not None:
        return window_text(*window)
    if isinstance(obj, (bytes, bytearray)):
        return bytes(obj).decode("utf-8", "backslashreplace")
    return json.dumps(obj, default=jsonable)


# -- serdes -------------------------------------------------------------------------------
def record_serdes(args: argparse.Namespace, topic: str) -> tuple[Serde, Serde, str]:
    """``(key serde, value serde, bootstrap servers)`` for ``topic``: ``--key-serde`` and
    ``--value-serde`` when given (a name, or a Schema Registry serde with ``--schema-registry``:
    see :func:`~streamtable.serde.registry.registry_serde`), else what the application file (if
    any) uses for the topic, else its default serdes (JSON without an application)."""
    bootstrap = args.bootstrap_servers
    key: Serde | None = None
    value: Serde | None = None
    if args.app:
        from streamtable.cli import _settings, app_topology, load_app
        from streamtable.config import StreamsConfig
        from streamtable.engine.wiring import external_topic_serdes

        module = load_app(args.app)
        config = StreamsConfig(_settings(module, args))
        bootstrap = bootstrap or config["bootstrap.servers"]
        key, value = external_topic_serdes(app_topology(module), config).get(
            topic, (config.default_key_serde, config.default_value_serde))
    try:
        key = _serde_option(args.key_serde, args) if args.key_serde else key or serde_from(None)
        value = _serde_option(args.value_serde, args) if args.value_serde \
            else value or serde_from(None)
    except ValueError as e:
        raise SystemExit(f"streamtable: {e}") from None
    return key.for_key(), value, bootstrap or DEFAULT_BOOTSTRAP


def _serde_option(spec: str, args: argparse.Namespace) -> Serde:
    """The serde ``--key-serde``/``--value-serde`` names: a Schema Registry serde
    (``avro:FILE.avsc``...) or a built-in one."""
    from streamtable.serde.registry import registry_serde

    return registry_serde(spec, getattr(args, "schema_registry", None)) or serde_from(spec)


# -- produce ------------------------------------------------------------------------------
@dataclass
class InputRecord:
    key: Any
    value: Any
    timestamp: int | None = None
    partition: int | None = None
    headers: Headers = ()


class _NotJson(ValueError):
    """A key or value typed for a JSON serde is not JSON (it is sent as a JSON string)."""


def _from_text(text: str, serde: Serde) -> Any:
    """A key or value typed on a line, as the serde's type: a number for int/long/double, JSON
    for json and the Schema Registry serdes (raises :class:`_NotJson` when it is not JSON),
    the text for string and bytes."""
    from streamtable.serde.registry import RegistrySerde

    name = getattr(serde, "name", "")
    if name in ("int", "long"):
        return int(text)
    if name == "double":
        return float(text)
    if name == "json" or isinstance(serde, RegistrySerde):
        try:
            return json.loads(text)
        except ValueError:
            raise _NotJson(text) from None
    if name == "bytes":
        return text.encode("utf-8")
    return text


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _timestamp(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"timestamp must be epoch milliseconds or ISO 8601, got {value!r}")
    if isinstance(value, int):
        return value
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return int(parsed.timestamp() * 1000)


def _json_record(line: str) -> dict[str, Any] | None:
    """The line as a JSON record, or None when it is not one."""
    if not line.lstrip().startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if isinstance(obj, dict) and "value" in obj and set(obj) <= _JSON_FIELDS:
        return obj
    return None


def parse_records(lines: Iterable[str], key_serde: Serde, value_serde: Serde, fmt: str = "auto",
                  source: str = "<stdin>") -> Iterator[InputRecord]:
    """The records of input lines (blank lines skipped). ``fmt``: ``tsv``, ``json`` or ``auto``
    (JSON lines when the first record line is one, else ``key<TAB>value``).

    >>> from streamtable.serde import STRING, LONG, JSON
    >>> [(r.key, r.value) for r in parse_records(["a\\t1", "2"], STRING, LONG)]
    [('a', 1), (None, 2)]
    >>> line = '{"key": "a", "value": 1, "headers": {"trace-id": "t1"}}'
    >>> next(parse_records([line], JSON, JSON)).headers
    (('trace-id', b't1'),)
    """
    mode = None if fmt == "auto" else fmt
    warned = False

    def typed(text: str, serde: Serde, what: str, number: int) -> Any:
        """The text as the serde's type; text that is not JSON for a JSON serde is sent as a
        JSON string, said once (a forgotten quote or serde would otherwise pass unseen)."""
        nonlocal warned
        try:
            return _from_text(text, serde)
        except _NotJson:
            if not warned:
                warned = True
                log.warning("%s, line %d: the %s %s is not JSON: sent as the string %s, as is "
                            "any such key or value that follows (write %s to mean a string)",
                            source, number, what, _clip(text), _clip(json.dumps(text)),
                            _clip(json.dumps(text)))
            return text

    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        try:
            if mode is None:
                mode = "json" if _json_record(line) is not None else "tsv"
            if mode == "json":
                obj = _json_record(line)
                if obj is None:
                    raise ValueError('expected a JSON object {"key": .., "value": .., '
                                     '"timestamp": ..} (fields: key, value, timestamp, '
                                     'partition, headers)')
                try:
                    headers = to_headers(obj.get("headers"))
                except TypeError as e:
                    raise ValueError(f'"headers": {e} (write {{"name": "value"}} or '
                                     '[["name", "value"], ...])') from None
                yield InputRecord(obj.get("key"), obj["value"], _timestamp(obj.get("timestamp")),
                                  obj.get("partition"), headers)
            else:
                key_text, tab, value_text = line.partition("\t")
                if not tab:
                    yield InputRecord(None, typed(line, value_serde, "value", number))
                else:
                    yield InputRecord(typed(key_text, key_serde, "key", number),
                                      typed(value_text, value_serde, "value", number))
        except ValueError as e:
            raise InputError(f"{source}, line {number}: {e}") from None


def produce_records(bootstrap: str, topic: str, records: Iterable[InputRecord],
                    key_serde: Serde, value_serde: Serde, source: str = "<stdin>") -> int:
    """Encode and produce ``records`` to ``topic`` with Kafka's default partitioner (murmur2,
    as the Java client); returns how many were acknowledged."""
    from confluent_kafka import Producer

    from streamtable.kafka.client_log import with_client_log

    producer = Producer(with_client_log({
        "bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
        "enable.idempotence": True, "linger.ms": 5}))
    errors: list[str] = []
    count = 0
    for number, record in enumerate(records, 1):
        try:
            key = key_serde.serialize(topic, record.key)
            value = value_serde.serialize(topic, record.value)
        except Exception as e:  # a serde's own errors too (a schema refusing the value)
            raise InputError(f"{source}, record {number}: cannot encode it with "
                             f"{key_serde!r}/{value_serde!r}: {e}") from None
        extra: dict[str, Any] = {}
        if record.timestamp is not None:
            extra["timestamp"] = record.timestamp
        if record.partition is not None:
            extra["partition"] = record.partition
        if record.headers:
            extra["headers"] = list(record.headers)
        producer.produce(topic, key=key, value=value,
                         on_delivery=lambda err, msg: errors.append(str(err)) if err else None,
                         **extra)
        producer.poll(0)
        count += 1
    if producer.flush(30) != 0:
        raise StreamsError(f"{topic}: records not acknowledged by {bootstrap} within 30 s")
    if errors:
        raise StreamsError(f"{topic}: {len(errors)} records failed: {errors[0]}")
    return count


def cmd_produce(args: argparse.Namespace) -> int:
    from streamtable.cli.topics import require_topics
    from streamtable.kafka.admin import check_reachable

    key_serde, value_serde, bootstrap = record_serdes(args, args.topic)
    check_reachable(bootstrap)
    require_topics(bootstrap, [args.topic])
    if args.file:
        path = Path(args.file)
        if not path.exists():
            raise SystemExit(f"streamtable: no such file: {args.file}")
        fmt = "json" if args.format == "auto" and path.suffix in (".jsonl", ".ndjson") \
            else args.format
        with path.open(encoding="utf-8") as lines:
            count = produce_records(
                bootstrap, args.topic,
                parse_records(lines, key_serde, value_serde, fmt, args.file),
                key_serde, value_serde, args.file)
    else:
        count = produce_records(
            bootstrap, args.topic, parse_records(sys.stdin, key_serde, value_serde, args.format),
            key_serde, value_serde)
    log.info("produced %d records to %s (key %s, value %s)", count, args.topic,
             key_serde.name, value_serde.name)
    return 0


# -- consume ------------------------------------------------------------------------------
def consume_records(bootstrap: str, topic: str, *, from_beginning: bool = False,
                    follow: bool = False, max_records: int | None = None,
                    timeout: float | None = None) -> Iterator[Any]:
    """The raw messages of every partition of ``topic``: from the beginning or from the end,
    until the end of every partition (or, with ``follow``, until ``max_records`` or ``timeout``
    seconds without a record)."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, TopicPartition

    from streamtable.cli.topics import require_topics
    from streamtable.kafka.client_log import with_client_log

    partitions = require_topics(bootstrap, [topic])[topic]
    consumer = Consumer(with_client_log({
        "bootstrap.servers": bootstrap, "group.id": f"streamtable-consume-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "enable.partition.eof": True, "fetch.wait.max.ms": 100}))
    start = OFFSET_BEGINNING if from_beginning else OFFSET_END
    consumer.assign([TopicPartition(topic, p, start) for p in range(partitions)])
    at_end: set[int] = set()
    seen = 0
    last = time.monotonic()
    try:
        while max_records is None or seen < max_records:
            if not follow and len(at_end) == partitions:
                return
            if timeout is not None and time.monotonic() - last > timeout:
                return
            for msg in consumer.consume(500, 0.2):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition() or 0)
                        continue
                    raise StreamsError(f"reading {topic}: {error}")
                last = time.monotonic()
                seen += 1
                yield msg
                if max_records is not None and seen >= max_records:
                    return
    finally:
        consumer.close()


def header_texts(headers: Iterable[tuple[str, bytes | None]] | None) -> list[list[Any]]:
    """A record's headers as ``[name, value]`` pairs in order, values as UTF-8 text (bytes that
    are not UTF-8 escaped) or None.

    >>> header_texts([("reason", b"bad\\xff"), ("empty", None)])
    [['reason', 'bad\\\\xff'], ['empty', None]]
    """
    return [[name, None if value is None else bytes(value).decode("utf-8", "backslashreplace")]
            for name, value in headers or ()]


def show_header(text: str | None) -> str:
    """A header value on one line: ``null`` for None, line breaks as ``\\n``."""
    return "null" if text is None else text.replace("\n", "\\n")


def cmd_consume(args: argparse.Namespace) -> int:
    from streamtable.kafka.admin import check_reachable

    key_serde, value_serde, bootstrap = record_serdes(args, args.topic)
    check_reachable(bootstrap)
    out = sys.stdout
    for msg in consume_records(bootstrap, args.topic, from_beginning=args.from_beginning,
                               follow=args.follow, max_records=args.max, timeout=args.timeout):
        where = f"topic {args.topic!r} partition {msg.partition()} offset {msg.offset()}"
        try:
            key = key_serde.deserialize(args.topic, msg.key())
        except Exception as e:
            raise StreamsError(f"cannot decode the key at {where} with {key_serde!r}: {e}; "
                               "give --key-serde") from None
        try:
            value = value_serde.deserialize(args.topic, msg.value())
        except Exception as e:
            raise StreamsError(f"cannot decode the value at {where} with {value_serde!r}: {e}; "
                               "give --value-serde") from None
        headers = header_texts(msg.headers())
        if args.format == "json":
            window = _window_parts(key)
            if window is not None:
                key = {"key": window[0], "start": window[1], "end": window[2]}
            out.write(json.dumps({"key": key, "value": value, "timestamp": msg.timestamp()[1],
                                  "partition": msg.partition(), "offset": msg.offset(),
                                  "headers": headers}, default=jsonable) + "\n")
        else:
            out.write(f"{show(key)}\t{show(value)}\n")
            if args.headers:
                out.writelines(f"  {name}: {show_header(text)}\n" for name, text in headers)
        out.flush()
    return 0


def add_parsers(sub: Any) -> None:
    """The ``produce`` and ``consume`` commands."""

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("topic", help="topic name")
        p.add_argument("app", nargs="?",
                       help="application file: encode as it reads/writes the topic")
        from streamtable.cli import BOOTSTRAP_ENV

        p.add_argument("--bootstrap-servers", default=os.environ.get(BOOTSTRAP_ENV) or None,
                       help=f"Kafka bootstrap servers (default: ${BOOTSTRAP_ENV}, else the "
                            f"application's, else {DEFAULT_BOOTSTRAP})")
        p.add_argument("--key-serde", help="json, string, int, long, double, bytes, or with "
                                           "--schema-registry: avro[:FILE.avsc], "
                                           "json-schema[:FILE.json], "
                                           "protobuf:FILE_pb2.py:Message (default: the "
                                           "application's for the topic, else json)")
        p.add_argument("--value-serde", help="as --key-serde")
        from streamtable.cli import REGISTRY_ENV

        p.add_argument("--schema-registry", metavar="URL",
                       default=os.environ.get(REGISTRY_ENV) or None,
                       help="Schema Registry of the avro, json-schema and protobuf serdes "
                            f"(default: ${REGISTRY_ENV})")

    p = sub.add_parser("produce", help="write records to a topic: key<TAB>value or JSON lines "
                                       '{"key", "value", "timestamp", "headers"}, from stdin or '
                                       '--file')
    common(p)
    p.add_argument("--file", help="read the records from this file instead of stdin")
    p.add_argument("--format", choices=("auto", "tsv", "json"), default="auto",
                   help="input format (auto: JSON lines if the first line is a JSON record "
                        "or the file ends in .jsonl)")
    p.set_defaults(func=cmd_produce)
    p = sub.add_parser("consume", help="print the records of a topic, decoded")
    common(p)
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the first record (default: at the end)")
    p.add_argument("--follow", action="store_true",
                   help="keep waiting for new records (default: stop at the end)")
    p.add_argument("--max", type=int, help="stop after this many records")
    p.add_argument("--timeout", type=float, help="stop after this many seconds without a record")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: key<TAB>value; json: one JSON object per record (key, value, "
                        "timestamp, partition, offset, headers)")
    p.add_argument("--headers", action="store_true",
                   help="text: each header on a line of its own under its record, "
                        "'  name: value' (a dead-letter record's reason, say)")
    p.set_defaults(func=cmd_consume)
