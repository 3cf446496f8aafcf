"""Shared by every contender script. Standard library only: contenders run in their own
virtual environments (quixstreams, faust) or in the project's.

A contender is started as ``python bench/contenders/<name>.py --workload w1 --bootstrap ...``.
It reads the input topic from the beginning and writes its result to the output topic in the
common output format, which the harness checks:

* W1 word count: key = the word (UTF-8), value = the count as an 8-byte big-endian signed long
  (Kafka's LongSerializer; the checker also accepts a decimal string).
* W2 share-holders: key = the client (JSON string, e.g. ``"c00042"`` with the quotes, as
  streamtable's json serde writes it), value = JSON list of the client's US position ids,
  or a tombstone (null) when the client has no US position left.

It appends JSON lines to ``--status``: ``{"event": "started", "t": <epoch s>}`` right before it
starts consuming (after imports and engine start-up), and may add other events
(``Status.progress``: how many input records it has read).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import struct
import sys
import threading
import time
from typing import Any

US_EXCHANGES = frozenset(("NASDAQ", "NYSE"))
WORD = re.compile(r"\W+")
_LONG = struct.Struct(">q")

# The consumer group settings every group-based peer gets on the development broker: Tansu
# makes a group join wait session.timeout.ms / 2.
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000


def split_words(line: str) -> list[str]:
    """Exactly the split of examples/word_count/app.py."""
    return [w for w in WORD.split(line.lower()) if w]


def encode_count(n: int) -> bytes:
    return _LONG.pack(n)


def encode_client(client: str) -> bytes:
    return json.dumps(client).encode()


def encode_ids(ids: Any) -> bytes | None:
    if not ids:
        return None
    return json.dumps(sorted(ids), separators=(",", ":")).encode()


def split_config(pairs: list[str]) -> tuple[dict[str, object], dict[str, str]]:
    """A streamtable application's ``--config KEY=VALUE`` pairs as its settings (integers as
    ints) and its Spark session's (``spark.*``: the bench makes the session and hands it to the
    application, which would only warn about them). Imports streamtable, so only streamtable's
    contenders call it.

    >>> split_config(["max.records.per.batch=5000", "spark.eventLog.enabled=true"])
    ({'max.records.per.batch': 5000}, {'spark.eventLog.enabled': 'true'})
    """
    from streamtable.config import is_spark_key

    settings: dict[str, object] = {}
    spark_conf: dict[str, str] = {}
    for kv in pairs:
        key, _, value = kv.partition("=")
        if is_spark_key(key):
            spark_conf[key] = value
        else:
            settings[key] = int(value) if value.lstrip("-").isdigit() else value
    return settings, spark_conf


def parse_args(argv: list[str] | None = None, extra: Any = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--workload", choices=("w1", "w2"), required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--app-id", required=True)
    p.add_argument("--state-dir", required=True)
    p.add_argument("--status", required=True)
    p.add_argument("--mode", choices=("throughput", "latency"), default="throughput")
    p.add_argument("--partitions", type=int, default=2)
    if extra is not None:
        extra(p)
    return p.parse_args(argv)


class Status:
    def __init__(self, path: str) -> None:
        self.path = path
        self._progress_at = float("-inf")
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)

    def event(self, name: str, **fields: Any) -> None:
        line = json.dumps({"event": name, "t": time.time(), **fields})
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()

    def progress(self, done: int, total: int, every: float = 1.0) -> None:
        """A ``progress`` event, ``done`` of ``total`` input records read, at most one each
        ``every`` seconds: the harness reports a contender it stops at its timeout with the
        rate it had reached.

        >>> import tempfile, os
        >>> s = Status(os.path.join(tempfile.mkdtemp(), "status.jsonl"))
        >>> s.progress(10, 100); s.progress(20, 100)  # the second within the second: dropped
        >>> [json.loads(line)["done"] for line in open(s.path)]
        [10]
        """
        now = time.monotonic()
        if now - self._progress_at >= every:
            self._progress_at = now
            self.event("progress", done=done, total=total)


def stop_event_on_signals() -> threading.Event:
    """An event set by SIGTERM/SIGINT (the harness stops a contender with SIGTERM)."""
    stop = threading.Event()

    def handler(*_: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)
