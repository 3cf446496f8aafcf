"""What the peer contenders share: the command line of their measured process, its arguments,
and the JSON of the output contract (``README.md``). Standard library only: the peers run in
their own virtual environments (``bench/envs.py``), importing this package from the repository.

A peer's process is ``<python> -m bench.nexmark.contenders.<module> --query qN ...``: the module
that defines the contender also holds the code it runs, with the engine imported only there.

>>> dumps({"auction": 1000, "price": 907.996})
'{"auction":1000,"price":907.996}'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.contenders.common import Status as Status  # the status file of every contender
from bench.nexmark.contenders import Run

ROOT = Path(__file__).resolve().parents[3]
PERSON, AUCTION, BID, SIDE_INPUT = ("nexmark-person", "nexmark-auction", "nexmark-bid",
                                    "nexmark-side-input")
#: the consumer group settings of every group-based peer on the development broker (it makes a
#: group join wait session.timeout.ms / 2), as in ``bench/contenders/common.py``
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000


def dumps(obj: Any) -> str:
    """Compact JSON, the output format of every query."""
    return json.dumps(obj, separators=(",", ":"))


def encode(obj: Any) -> bytes:
    return dumps(obj).encode()


@dataclass(frozen=True)
class PeerContender:
    """A peer engine: its name, the venv it runs in (None: the project's own), the module
    whose ``main`` runs a query, the queries it implements, and whether it reads input that
    arrives while it runs (``--live``, the latency mode)."""

    name: str
    venv: str | None
    module: str
    queries: frozenset[str]
    live: bool = True

    def supports(self, query: str) -> bool:
        return query in self.queries

    def python(self) -> str:
        if self.venv is None:
            return sys.executable
        from bench import envs

        return str(envs.ensure_env(self.venv))

    def command(self, run: Run) -> tuple[list[str], dict[str, str]]:
        cmd = [self.python(), "-m", self.module, "--query", run.query, "--output", run.output,
               "--bootstrap", run.bootstrap, "--run-id", run.run_id,
               "--state-dir", str(run.state_dir), "--status", str(run.status),
               "--input-counts", dumps(run.input_counts)]
        for kv in run.extra:
            cmd += ["--config", kv]
        if run.live:
            cmd.append("--live")
        paths = [str(ROOT)] + ([str(ROOT / "src")] if self.venv is None else [])
        return cmd, {"PYTHONPATH": os.pathsep.join(paths)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--query", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--state-dir", required=True)
    p.add_argument("--status", required=True)
    p.add_argument("--input-counts", type=json.loads, default={},
                   help="records per input topic, JSON (the process stops when it has them)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--live", action="store_true",
                   help="the input arrives while the process runs (the latency mode)")
    args = p.parse_args(argv)
    args.settings = dict(kv.partition("=")[::2] for kv in args.config)
    return args


def log(msg: str) -> None:
    """A line on stderr (the runner keeps it in the run's log)."""
    print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def key_value(message: Any) -> tuple[bytes, bytes]:
    """A confluent-kafka message's key and value; the input topics have no null ones."""
    key, value = message.key(), message.value()
    if key is None or value is None:
        raise ValueError(f"{message.topic()} partition {message.partition()} offset "
                         f"{message.offset()}: a record without a key or value; the input "
                         "topics of README.md have neither")
    return key, value


def linger(seconds: float = 120.0) -> None:
    """After ``caught_up``: wait for the runner to stop the process. The runner samples the
    process tree's CPU time when it sees ``caught_up``; a process that had exited by then
    would take its CPU time with it."""
    time.sleep(seconds)
