"""Fixtures of the share-holders service tests: a real broker, a real SMTP server, real stores.

No Spark here: the stores are filled either directly (``StoreWriter``) or by running the
topology on the in-process ``TopologyTestDriver`` and copying its stores into a real
``SqliteServingStore`` (``sync_stores``), the class the Spark runtime keeps up to date.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from email import message_from_bytes
from email.message import Message
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT / "src", ROOT):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from streamtable import StreamsBuilder, TopologyTestDriver  # noqa: E402
from streamtable.kafka.broker import EmbeddedBroker, free_port  # noqa: E402
from streamtable.serving.codec import encode_key, encode_value  # noqa: E402
from streamtable.serving.sqlite import SqliteServingStore  # noqa: E402

HOLDERS = "us-share-holders"
POSITIONS = "positions-enriched"

#: Reference data the tests publish; the stand-in topology looks names up here.
REF_DATA = {
    "AAPL": {"name": "Apple Inc.", "exchange": "NASDAQ"},
    "FB": {"name": "Meta Platforms", "exchange": "NASDAQ"},
    "IBM": {"name": "IBM", "exchange": "NYSE"},
    "VOD": {"name": "Vodafone", "exchange": "LON"},
}


def stand_in_topology(us_exchanges: tuple[str, ...] = ("NASDAQ", "NYSE")) -> Any:
    """The same queryable stores as the real topology, without the foreign-key join: names and
    exchanges come from ``REF_DATA`` instead of the ``shares-ref-data`` topic."""
    exchanges = frozenset(us_exchanges)

    def enrich(p: dict[str, Any]) -> dict[str, Any]:
        ref = REF_DATA.get(p["ticker"], {})
        return {**p, "exchange": ref.get("exchange") or p.get("exchange"),
                "name": ref.get("name")}

    builder = StreamsBuilder()
    (builder.table("share-holders")
        .map_values(enrich, materialized=POSITIONS)
        .filter(lambda key, p: p["exchange"] in exchanges)
        .group_by(lambda key, p: (p["client"], frozenset([p["id"]])))
        .reduce(adder=lambda a, b: a | b, subtractor=lambda a, b: (a - b) or None,
                materialized=HOLDERS))
    return builder.build()


def share_holders_topology(us_exchanges: tuple[str, ...] = ("NASDAQ", "NYSE")) -> Any:
    """The lead's topology when it is there, else the stand-in."""
    try:
        from examples.share_holders.topology import build_topology
    except ImportError:
        return stand_in_topology(us_exchanges)
    return build_topology(us_exchanges=us_exchanges)


def task_of(key: Any, tasks: int) -> int:
    """A stable task for a key (the tests' stand-in for the runtime's partitioner)."""
    return zlib.crc32(json.dumps(key).encode()) % tasks


class StoreWriter:
    """Writes rows into a real ``SqliteServingStore`` the way the runtime does (one batch per
    call, values pickled with a timestamp)."""

    def __init__(self, path: Path) -> None:
        self.serving = SqliteServingStore(path)
        self._batch = itertools.count(self.serving.last_batch() + 1)

    def apply(self, changes: list[tuple[str, Any, Any, int]]) -> None:
        now = int(time.time() * 1000)
        rows = [(store, encode_key(key),
                 None if value is None else encode_value((value, now)), task)
                for store, key, value, task in changes]
        assert self.serving.apply(next(self._batch), rows)

    def holder(self, client: str, ids: set[int] | None, task: int) -> None:
        self.apply([(HOLDERS, client, None if ids is None else frozenset(ids), task)])

    def position(self, pid: int, client: str, ticker: str, amount: float,
                 task: int = 0) -> None:
        ref = REF_DATA.get(ticker, {})
        self.apply([(POSITIONS, pid, {"id": pid, "client": client, "ticker": ticker,
                                      "amount": amount, "exchange": ref.get("exchange"),
                                      "name": ref.get("name")}, task)])

    def stores(self) -> dict[str, Any]:
        return {HOLDERS: self.serving.view(HOLDERS), POSITIONS: self.serving.view(POSITIONS)}


def sync_stores(driver: TopologyTestDriver, writer: StoreWriter, tasks: int = 2) -> None:
    """Make the serving store's two stores equal to the driver's."""
    changes: list[tuple[str, Any, Any, int]] = []
    for name in (HOLDERS, POSITIONS):
        current = driver.get_key_value_store(name).to_dict()
        for key in writer.serving.view(name).to_dict():
            if key not in current:
                changes.append((name, key, None, 0))
        for key, value in current.items():
            changes.append((name, key, value, task_of(key, tasks)))
    writer.apply(changes)


@pytest.fixture
def store_writer(tmp_path: Path) -> StoreWriter:
    return StoreWriter(tmp_path / "app" / "serving.db")


@pytest.fixture
def topology() -> Any:
    return share_holders_topology()


@pytest.fixture
def sync() -> Callable[..., None]:
    return sync_stores


@pytest.fixture
def ref_data() -> dict[str, dict[str, str]]:
    return REF_DATA


# -- Kafka -----------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture(scope="session")
def bootstrap(broker: EmbeddedBroker) -> str:
    return broker.bootstrap_servers


# -- SMTP ------------------------------------------------------------------------------------
class RecordingHandler:
    """An aiosmtpd handler that keeps every message; after ``fail_after`` messages it answers
    ``451`` (try again later) to every further one."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self.fail_after: int | None = None
        self.refused = 0
        self._lock = threading.Lock()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self._lock:
            if self.fail_after is not None and len(self.messages) >= self.fail_after:
                self.refused += 1
                return "451 4.3.0 mailbox busy, try again later"
            self.messages.append(message_from_bytes(envelope.content))
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 OK"

    def clients(self) -> list[str]:
        return [m["X-Share-Holders-Client"] for m in self.messages]


class SmtpServer:
    def __init__(self, handler: RecordingHandler, port: int, controller: Any) -> None:
        self.handler = handler
        self.host = "127.0.0.1"
        self.port = port
        self.controller = controller


def start_smtp(**kwargs: Any) -> SmtpServer:
    from aiosmtpd.controller import Controller

    handler = RecordingHandler()
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port, **kwargs)
    controller.start()
    return SmtpServer(handler, port, controller)


@pytest.fixture
def smtp_server() -> Iterator[SmtpServer]:
    server = start_smtp()
    try:
        yield server
    finally:
        server.controller.stop()


@pytest.fixture
def smtp_factory() -> Iterator[Callable[..., SmtpServer]]:
    servers: list[SmtpServer] = []

    def make(**kwargs: Any) -> SmtpServer:
        server = start_smtp(**kwargs)
        servers.append(server)
        return server

    yield make
    for s in servers:
        s.controller.stop()

