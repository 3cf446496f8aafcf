"""The share-holders demo: the whole service, end to end, on the embedded defaults.

    make demo                 # runs it, then keeps serving HTTP until Ctrl-C
    make demo ARGS=--once     # runs it once, checks every step, exits 0 when all were right

It starts the embedded Kafka-protocol broker, the service (the streams application on Spark,
the HTTP API), and a local SMTP server (unless SMTP_HOST names one); loads the original proof of
concept's positions through the HTTP API; shows the US share-holders table; closes and moves a
position and shows the change; sends the weekly emails and prints what the SMTP server received;
restarts the service and shows that nobody is mailed twice in the same week.
"""

from __future__ import annotations

import argparse
import email
import logging
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from streamtable.kafka.broker import EmbeddedBroker, free_port

from .service import Service, app_task_count, build_emailer, open_stores, start_service
from .settings import Settings, SmtpSettings

log = logging.getLogger("share_holders.demo")

REF_DATA = {"AAPL": ("Apple Inc.", "NASDAQ"), "VOD": ("Vodafone Group", "LON"),
            "FB": ("Meta Platforms", "NASDAQ")}
POSITIONS = [(1, "client1", "AAPL", 100), (2, "client1", "VOD", 5), (3, "client1", "FB", 33),
             (4, "client2", "AAPL", 25), (5, "client3", "VOD", 33)]
FIRST_TABLE = {"client1": [1, 3], "client2": [4]}
SECOND_TABLE = {"client1": [1], "client3": [3]}


@dataclass
class Mailbox:
    """What the demo's SMTP server received."""

    messages: list[email.message.Message] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        with self.lock:
            self.messages.append(email.message_from_bytes(envelope.content))
        return "250 OK"


def _say(text: str = "") -> None:
    print(text, flush=True)


def _table(http: httpx.Client) -> dict[str, list[int]]:
    response = http.get("/share-holders")
    response.raise_for_status()
    return {h["client"]: sorted(p["id"] for p in h["positions"]) for h in response.json()}


def _show(title: str, table: dict[str, list[int]]) -> None:
    _say(f"\n{title}")
    _say(f"  {'client':<10} US positions")
    for client, ids in table.items():
        _say(f"  {client:<10} {ids}")


def _wait_for(http: httpx.Client, service: Service, expected: dict[str, list[int]],
              timeout: float = 120.0) -> dict[str, list[int]]:
    deadline = time.monotonic() + timeout
    table = _table(http)
    while table != expected and time.monotonic() < deadline:
        service.app.process_all_available()
        table = _table(http)
    return table


def _start(settings: Settings) -> tuple[Service, httpx.Client]:
    service = start_service(settings, with_scheduler=False)
    assert service.http is not None
    return service, httpx.Client(base_url=service.http.url, timeout=30)


def run(once: bool, state_dir: Path, smtp: tuple[str, int] | None) -> int:
    ok = True
    mailbox = Mailbox()
    controller = None
    if smtp is None:
        from aiosmtpd.controller import Controller

        controller = Controller(mailbox, hostname="127.0.0.1", port=free_port())
        controller.start()
        smtp = ("127.0.0.1", controller.port)
    broker = EmbeddedBroker(port=free_port()).start()
    settings = Settings.from_env().with_(
        bootstrap_servers=broker.bootstrap_servers, state_dir=state_dir,
        http_port=int(os.environ.get("SHARE_HOLDERS_HTTP_PORT", free_port())),
        smtp=SmtpSettings(host=smtp[0], port=smtp[1]),
    )
    _say(f"broker: {broker.bootstrap_servers} (embedded)   SMTP: {smtp[0]}:{smtp[1]}")
    _say("starting the share-holders service on Spark ...")
    service, http = _start(settings)
    try:
        _say(f"HTTP API: {service.http.url}/docs" if service.http else "")
        for ticker, (name, exchange) in REF_DATA.items():
            http.put(f"/ref-data/{ticker}", json={"name": name, "exchange": exchange}
                     ).raise_for_status()
        for pid, client, ticker, amount in POSITIONS:
            http.put(f"/positions/{pid}", json={"client": client, "ticker": ticker,
                                                "amount": amount}).raise_for_status()
        _say("loaded reference data (AAPL, VOD, FB) and positions 1-5 through the HTTP API")
        table = _wait_for(http, service, FIRST_TABLE)
        _show("US share-holders:", table)
        ok &= table == FIRST_TABLE

        http.delete("/positions/4").raise_for_status()
        http.put("/positions/3", json={"client": "client3", "ticker": "FB", "amount": 33}
                 ).raise_for_status()
        _say("\nclosed position 4 (client2's AAPL) and moved position 3 (FB) to client3")
        table = _wait_for(http, service, SECOND_TABLE)
        _show("US share-holders:", table)
        ok &= table == SECOND_TABLE

        tasks = app_task_count(service.app, service.bootstrap_servers)
        report = build_emailer(settings, open_stores(service.app), tasks).send_now()
        time.sleep(0.5)
        _say(f"\nweekly emails ({report.week}): sent to {sorted(report.sent)}")
        if controller is not None:
            for msg in mailbox.messages:
                _say(f"\n--- received by the SMTP server: To: {msg['To']}  "
                     f"Subject: {msg['Subject']}")
                _say(msg.get_payload(decode=True).decode().rstrip())
        ok &= sorted(report.sent) == ["client1", "client3"] and not report.failed
        if controller is not None:
            ok &= len(mailbox.messages) == 2

        _say("\nrestarting the service (same state) and sending again this week ...")
        http.close()
        service.stop()
        service, http = _start(settings)
        service.app.process_all_available()
        tasks = app_task_count(service.app, service.bootstrap_servers)
        again = build_emailer(settings, open_stores(service.app), tasks).send_now()
        _say(f"sent to {sorted(again.sent)}; already mailed this week: "
             f"{sorted(again.already_sent)}")
        ok &= not again.sent and sorted(again.already_sent) == ["client1", "client3"]
        ok &= _table(http) == SECOND_TABLE

        _say("\ndemo " + ("OK: every table and email was as expected" if ok
                          else "FAILED: something above was not as expected"))
        if not once and service.http is not None:
            _say(f"\nserving {service.http.url} (API docs at {service.http.url}/docs); "
                 "Ctrl-C to stop")
            stop = threading.Event()
            try:
                while not stop.wait(1):
                    if not service.app.is_running:
                        log.error("the streams query stopped")
                        return 1
            except KeyboardInterrupt:
                _say("stopping")
        return 0 if ok else 1
    finally:
        http.close()
        service.stop()
        broker.stop()
        if controller is not None:
            controller.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="share-holders demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--once", action="store_true",
                        help="run once, check every step, exit 0 when all were right")
    parser.add_argument("--state-dir", help="state directory (default: a new temporary one)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for name in ("uvicorn", "uvicorn.access", "uvicorn.error", "py4j"):
        logging.getLogger(name).setLevel(logging.WARNING)
    os.environ.setdefault("STREAMTABLE_SPARK_LOG_LEVEL", "ERROR")
    smtp = None
    if os.environ.get("SMTP_HOST"):
        smtp = (os.environ["SMTP_HOST"], int(os.environ.get("SMTP_PORT", "25")))
    state = Path(args.state_dir or tempfile.mkdtemp(prefix="share-holders-demo-"))
    return run(args.once, state, smtp)


if __name__ == "__main__":
    sys.exit(main())
