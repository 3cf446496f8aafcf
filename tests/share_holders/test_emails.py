"""The weekly emails against a real SMTP server (aiosmtpd), real SQLite stores and send log."""

from __future__ import annotations

import json
import logging
import shutil
import ssl
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from examples.share_holders import service
from examples.share_holders.emails import (
    EmailScheduler,
    SendLog,
    WeeklyEmailer,
    iso_week,
    recipient_for_domain,
)
from examples.share_holders.settings import Secret, Settings, SmtpSettings

from streamtable import TopologyTestDriver
from streamtable.serving.codec import encode_key, encode_value

LONDON = ZoneInfo("Europe/London")
MONDAY_9AM = datetime(2024, 2, 5, 9, 0, tzinfo=LONDON)  # ISO week 2024-W06
PASSWORD = "s3cr3t-Pa55word!"


def smtp_settings(server: Any, **kw: Any) -> SmtpSettings:
    return SmtpSettings(host=server.host, port=server.port, sender="bot@bank.example",
                        timeout=10, **kw)


def make_emailer(writer: Any, server: Any, log_path: Path, *, task_count: int = 2,
                 now: datetime = MONDAY_9AM, **kw: Any) -> WeeklyEmailer:
    stores = writer.stores()
    kw.setdefault("recipient", recipient_for_domain("clients.example"))
    smtp = kw.pop("smtp", None) or smtp_settings(server)
    return WeeklyEmailer(stores["us-share-holders"], stores["positions-enriched"], smtp,
                         log_path, task_count=task_count, clock=lambda: now, **kw)


def body_rows(msg: Any) -> list[list[str]]:
    """The table rows of an email: [ticker, name, amount]."""
    text = msg.get_content() if hasattr(msg, "get_content") else msg.get_payload(decode=True)
    if isinstance(text, bytes):
        text = text.decode()
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("Ticker"))
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        parts = line.split()
        rows.append([parts[0], " ".join(parts[1:-1]), parts[-1]])
    return rows


def seed_many(writer: Any, n: int, tasks: int = 2) -> list[str]:
    clients = [f"client{i:02d}" for i in range(n)]
    for i, c in enumerate(clients):
        writer.position(100 + i, c, "AAPL", 10 + i, task=i % tasks)
        writer.holder(c, {100 + i}, task=i % tasks)
    return clients


def pipe(driver: TopologyTestDriver, topic: str, key: Any, value: Any) -> None:
    driver.pipe_raw(topic, json.dumps(key).encode(),
                    None if value is None else json.dumps(value).encode(),
                    int(time.time() * 1000))


# -- content ---------------------------------------------------------------------------------
def test_one_email_per_us_share_holder_with_exactly_its_us_positions(
        tmp_path, store_writer, smtp_server, topology, sync, ref_data):
    driver = TopologyTestDriver(topology)
    for ticker, ref in ref_data.items():
        pipe(driver, "shares-ref-data", ticker, ref)
    positions = [
        (1, "client1", "AAPL", 100), (2, "client1", "VOD", 5), (3, "client1", "FB", 33),
        (4, "client2", "AAPL", 25), (5, "client3", "VOD", 33), (6, "client4", "IBM", 7),
        (7, "client5", "IBM", 1),
    ]
    for pid, client, ticker, amount in positions:
        pipe(driver, "share-holders", pid, {"id": pid, "client": client, "ticker": ticker,
                                            "amount": amount})
    pipe(driver, "share-holders", 7, None)  # client5's only US position closes
    sync(driver, store_writer)

    report = make_emailer(store_writer, smtp_server, tmp_path / "log.db").send_now()

    assert sorted(report.sent) == ["client1", "client2", "client4"]
    assert report.complete and report.week == "2024-W06"
    by_client = {m["X-Share-Holders-Client"]: m for m in smtp_server.handler.messages}
    assert len(smtp_server.handler.messages) == 3 and set(by_client) == set(report.sent)
    assert body_rows(by_client["client1"]) == [["AAPL", "Apple Inc.", "100"],
                                               ["FB", "Meta Platforms", "33"]]
    assert body_rows(by_client["client2"]) == [["AAPL", "Apple Inc.", "25"]]
    assert body_rows(by_client["client4"]) == [["IBM", "IBM", "7"]]
    msg = by_client["client1"]
    assert msg["To"] == "client1@clients.example" and msg["From"] == "bot@bank.example"
    assert "2024-W06" in msg["Subject"]
    assert smtp_server.handler.envelopes[0][1] in (["client1@clients.example"],
                                                   ["client2@clients.example"],
                                                   ["client4@clients.example"])


def test_no_email_for_clients_without_us_positions(tmp_path, store_writer, smtp_server):
    store_writer.position(1, "london-only", "VOD", 10)  # in positions-enriched, not a holder
    store_writer.position(2, "us", "AAPL", 10)
    store_writer.holder("us", {2}, task=1)
    report = make_emailer(store_writer, smtp_server, tmp_path / "log.db").send_now()
    assert report.sent == ["us"]
    assert smtp_server.handler.clients() == ["us"]


def test_second_run_in_the_same_week_sends_nothing(tmp_path, store_writer, smtp_server):
    clients = seed_many(store_writer, 4)
    log_path = tmp_path / "log.db"
    first = make_emailer(store_writer, smtp_server, log_path).send_now()
    assert sorted(first.sent) == clients
    later_that_week = MONDAY_9AM + timedelta(days=4, hours=10)
    second = make_emailer(store_writer, smtp_server, log_path, now=later_that_week).send_now()
    assert second.sent == [] and sorted(second.already_sent) == clients and second.complete
    assert len(smtp_server.handler.messages) == 4
    next_week = make_emailer(store_writer, smtp_server, log_path,
                             now=MONDAY_9AM + timedelta(days=7)).send_now()
    assert sorted(next_week.sent) == clients and next_week.week == "2024-W07"
    assert len(smtp_server.handler.messages) == 8


def test_a_new_share_holder_later_in_the_week_gets_its_email(tmp_path, store_writer,
                                                             smtp_server):
    seed_many(store_writer, 2)
    log_path = tmp_path / "log.db"
    make_emailer(store_writer, smtp_server, log_path).send_now()
    store_writer.position(9, "late", "IBM", 3)
    store_writer.holder("late", {9}, task=0)
    again = make_emailer(store_writer, smtp_server, log_path).send_now()
    assert again.sent == ["late"]


# -- resuming --------------------------------------------------------------------------------
def test_smtp_failures_after_k_then_a_restart_sends_exactly_the_missing(
        tmp_path, store_writer, smtp_server):
    clients = seed_many(store_writer, 6)
    log_path = tmp_path / "log.db"
    smtp_server.handler.fail_after = 2
    first = make_emailer(store_writer, smtp_server, log_path).send_now()
    assert len(first.sent) == 2 and len(first.failed) == 4 and not first.complete
    assert SendLog(log_path).run_state("2024-W06", "0/1") == "started"

    smtp_server.handler.fail_after = None
    restarted = make_emailer(store_writer, smtp_server, log_path).send_now()  # a new process
    assert sorted(restarted.sent) == sorted(first.failed)
    assert sorted(restarted.already_sent) == sorted(first.sent)
    assert sorted(smtp_server.handler.clients()) == clients  # each exactly once
    assert SendLog(log_path).run_state("2024-W06", "0/1") == "completed"


class Crash(BaseException):
    """Stands for the process dying: nothing in the emailer catches it."""


def test_a_crash_after_k_emails_then_a_restart_sends_exactly_the_missing(
        tmp_path, store_writer, smtp_server):
    clients = seed_many(store_writer, 7)
    log_path = tmp_path / "log.db"
    sent: list[str] = []

    def crash_after_three(client: str) -> None:
        sent.append(client)
        if len(sent) == 3:
            raise Crash()

    with pytest.raises(Crash):
        make_emailer(store_writer, smtp_server, log_path, on_sent=crash_after_three).send_now()
    assert len(smtp_server.handler.messages) == 3

    restarted = make_emailer(store_writer, smtp_server, log_path).send_now()
    assert len(restarted.sent) == 4 and set(restarted.sent).isdisjoint(sent)
    assert sorted(smtp_server.handler.clients()) == clients


def test_smtp_down_sends_nothing_and_a_later_run_sends_everyone(tmp_path, store_writer,
                                                                smtp_factory):
    from streamtable.kafka.broker import free_port

    clients = seed_many(store_writer, 3)
    log_path = tmp_path / "log.db"
    down = SmtpSettings(host="127.0.0.1", port=free_port(), timeout=2)
    report = make_emailer(store_writer, None, log_path, smtp=down).send_now()
    assert report.sent == [] and sorted(report.failed) == clients
    server = smtp_factory()
    report = make_emailer(store_writer, server, log_path).send_now()
    assert sorted(report.sent) == clients


# -- sharding --------------------------------------------------------------------------------
def test_two_workers_send_disjoint_sets_whose_union_is_everyone(tmp_path, store_writer,
                                                                smtp_server):
    clients = seed_many(store_writer, 10, tasks=4)
    tasks = {c: i % 4 for i, c in enumerate(clients)}
    reports = []
    for worker in (0, 1):
        emailer = make_emailer(store_writer, smtp_server, tmp_path / f"log-{worker}.db",
                               task_count=4, worker_index=worker, worker_count=2)
        assert emailer.tasks() == [worker, worker + 2]
        reports.append(emailer.send_now())
    a, b = (set(r.sent) for r in reports)
    assert a and b and a.isdisjoint(b) and a | b == set(clients)
    assert all(tasks[c] % 2 == 0 for c in a) and all(tasks[c] % 2 == 1 for c in b)
    assert sorted(smtp_server.handler.clients()) == clients


# -- credentials -----------------------------------------------------------------------------
def _authenticator(user: str, password: str) -> Any:
    from aiosmtpd.smtp import AuthResult, LoginPassword

    def check(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> Any:
        ok = (isinstance(data, LoginPassword) and data.login.decode() == user
              and data.password.decode() == password)
        return AuthResult(success=ok, handled=False)

    return check


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
def test_login_works_and_the_password_never_appears_in_logs(tmp_path, store_writer,
                                                            smtp_factory, caplog):
    caplog.set_level(logging.DEBUG)
    server = smtp_factory(authenticator=_authenticator("mailer", PASSWORD),
                          auth_require_tls=False, auth_required=True)
    seed_many(store_writer, 2)
    good = smtp_settings(server, user="mailer", password=Secret(PASSWORD))
    report = make_emailer(store_writer, server, tmp_path / "log.db", smtp=good).send_now()
    assert len(report.sent) == 2

    bad = smtp_settings(server, user="mailer", password=Secret(PASSWORD + "-wrong"))
    store_writer.holder("x", {100}, task=0)
    report = make_emailer(store_writer, server, tmp_path / "log.db", smtp=bad).send_now()
    assert report.failed == {"x": report.failed["x"]} and "refused" in report.failed["x"]

    settings = Settings(smtp=good)
    logging.getLogger("test").info("settings %s %r", settings, settings)
    ours = [r for r in caplog.records if not r.name.startswith("mail.log")]
    assert ours and any("mailer" in r.getMessage() for r in ours)
    for record in ours:
        assert PASSWORD not in record.getMessage()
    assert PASSWORD not in caplog.text
    assert PASSWORD not in repr(report) and PASSWORD not in str(settings)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl to make a cert")
def test_starttls_then_login(tmp_path, store_writer, smtp_factory, caplog):
    caplog.set_level(logging.DEBUG)
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    server = smtp_factory(tls_context=server_ctx, require_starttls=True,
                          authenticator=_authenticator("mailer", PASSWORD), auth_required=True)
    seed_many(store_writer, 2)
    smtp = smtp_settings(server, starttls=True, user="mailer", password=Secret(PASSWORD))
    client_ctx = ssl.create_default_context(cafile=str(cert))
    report = make_emailer(store_writer, server, tmp_path / "log.db", smtp=smtp,
                          ssl_context=client_ctx).send_now()
    assert len(report.sent) == 2 and len(server.handler.messages) == 2
    assert PASSWORD not in caplog.text


def test_settings_from_env_hide_the_password():
    env = {"SMTP_PASSWORD": PASSWORD, "SMTP_USER": "u", "SMTP_STARTTLS": "yes",
           "SHARE_HOLDERS_US_EXCHANGES": "nyse, nasdaq", "SHARE_HOLDERS_WORKER_COUNT": "3",
           "SHARE_HOLDERS_WORKER_INDEX": "2", "EMAIL_TIMEZONE": "America/New_York"}
    s = Settings.from_env(env)
    assert s.smtp.starttls and s.smtp.user == "u" and s.smtp.password.reveal() == PASSWORD
    assert s.us_exchanges == ("NYSE", "NASDAQ") and (s.worker_index, s.worker_count) == (2, 3)
    assert PASSWORD not in repr(s) and PASSWORD not in str(s) and PASSWORD not in f"{s.smtp}"
    defaults = Settings.from_env({})
    assert defaults.email_schedule == "0 8 * * MON" and defaults.email_timezone == "Europe/London"
    assert defaults.bootstrap_servers is None and defaults.us_exchanges == ("NASDAQ", "NYSE")
    for bad in ({"EMAIL_SCHEDULE": "every monday"}, {"EMAIL_TIMEZONE": "Mars/Olympus"},
                {"SMTP_STARTTLS": "maybe"}, {"SHARE_HOLDERS_WORKER_INDEX": "1"}):
        with pytest.raises(ValueError):
            Settings.from_env(bad)


# -- schedule --------------------------------------------------------------------------------
def test_the_schedule_is_read_in_its_time_zone():
    nxt = EmailScheduler.next_fire_time
    # GMT in winter, BST after the last Sunday of March
    assert nxt("0 8 * * MON", "Europe/London",
               datetime(2024, 3, 20, tzinfo=timezone.utc)) == datetime(2024, 3, 25, 8,
                                                                      tzinfo=LONDON)
    after_dst = nxt("0 8 * * MON", "Europe/London", datetime(2024, 3, 26, tzinfo=timezone.utc))
    assert after_dst.astimezone(timezone.utc) == datetime(2024, 4, 1, 7, tzinfo=timezone.utc)
    prev = EmailScheduler.previous_fire_time("0 8 * * MON", "Europe/London", MONDAY_9AM)
    assert prev == datetime(2024, 2, 5, 8, tzinfo=LONDON)
    assert iso_week(datetime(2024, 2, 4, 23, 30, tzinfo=timezone.utc), LONDON) == "2024-W05"


def test_the_scheduler_catches_up_a_missed_run_and_not_twice(tmp_path, store_writer,
                                                             smtp_server):
    clients = seed_many(store_writer, 3)
    log_path = tmp_path / "log.db"
    emailer = make_emailer(store_writer, smtp_server, log_path)
    early = EmailScheduler(emailer, "0 8 * * MON", LONDON,
                           clock=lambda: MONDAY_9AM - timedelta(hours=2))
    assert not early.due_on_start()  # 07:00: this week's run is still ahead
    ran: list[bool] = []
    scheduler = EmailScheduler(emailer, "0 8 * * MON", LONDON, clock=lambda: MONDAY_9AM,
                               before_run=lambda: ran.append(True))
    assert scheduler.due_on_start()
    scheduler.start()
    try:
        deadline = time.monotonic() + 10
        while scheduler.runs == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        scheduler.stop()
    assert ran and scheduler.last_report is not None and scheduler.last_report.complete
    assert sorted(smtp_server.handler.clients()) == clients
    assert not EmailScheduler(emailer, "0 8 * * MON", LONDON,
                              clock=lambda: MONDAY_9AM).due_on_start()


# -- the send-now command --------------------------------------------------------------------
def test_service_send_now_and_main(tmp_path, smtp_server, caplog):
    caplog.set_level(logging.INFO)
    env = {"STREAMTABLE_STATE_DIR": str(tmp_path / "state"), "SMTP_HOST": "127.0.0.1",
           "SMTP_PORT": str(smtp_server.port), "SMTP_PASSWORD": PASSWORD,
           "EMAIL_RECIPIENT_DOMAIN": "clients.example"}
    settings = Settings.from_env(env)
    from streamtable.serving.sqlite import SqliteServingStore

    serving = SqliteServingStore(settings.serving_db_path)

    def row(store: str, key: Any, value: Any, task: int) -> tuple[str, bytes, bytes, int]:
        return (store, encode_key(key), encode_value((value, 0)), task)

    serving.apply(0, [
        row("us-share-holders", "client1", frozenset({1}), 0),
        row("us-share-holders", "client2", frozenset({2}), 1),
        row("positions-enriched", 1, {"id": 1, "client": "client1", "ticker": "AAPL",
                                      "amount": 5, "exchange": "NASDAQ", "name": "Apple"}, 0),
        row("positions-enriched", 2, {"id": 2, "client": "client2", "ticker": "IBM",
                                      "amount": 6, "exchange": "NYSE", "name": "IBM"}, 1),
    ])
    report = service.send_now(settings, task_count=2)
    assert sorted(report.sent) == ["client1", "client2"]
    assert smtp_server.handler.messages[0]["To"].endswith("@clients.example")
    assert settings.send_log_path.exists()
    # the command line: everything was sent this week, so nothing more; exit code 0
    assert service.main(["send-now", "--tasks", "2"], env=env) == 0
    assert len(smtp_server.handler.messages) == 2
    assert "settings:" in caplog.text and PASSWORD not in caplog.text
    assert service.main(["send-now"], env={**env, "EMAIL_TIMEZONE": "nowhere"}) == 2
    empty = {**env, "STREAMTABLE_STATE_DIR": str(tmp_path / "empty")}
    assert service.main(["send-now", "--tasks", "2"], env=empty) == 2
    assert "no serving store" in caplog.text
