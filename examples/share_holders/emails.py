"""The weekly email to every US share-holder, exactly once per client and ISO week.

:class:`WeeklyEmailer` reads the streaming application's stores (``us-share-holders`` and
``positions-enriched``) and sends one email per US share-holder listing its US positions. A send
log (SQLite, primary key ``(client, week)``) is written right after each accepted message, so a
run that stops half-way -- a crash, an SMTP outage -- resumes where it stopped: a restart resends
nothing and skips nobody. (A crash in the instant between the SMTP server accepting a message and
the log write resends that one message; its ``Message-ID`` is the same, so mail systems can drop
the duplicate.)

Work is sharded like the streaming application's state: worker ``i`` of ``N`` mails the clients
of the tasks (partitions) ``t`` with ``t % N == i``.

:class:`EmailScheduler` runs the emailer on a cron schedule (``0 8 * * MON``: Mondays at 08:00)
in a time zone, in a background thread, and retries a run that had failures.

>>> emailer = WeeklyEmailer(app.store("us-share-holders"),            # doctest: +SKIP
...                         app.store("positions-enriched"), settings.smtp,
...                         "state/emails.db", task_count=2)
>>> emailer.send_now()                                                # doctest: +SKIP
SendReport(week='2024-W05', sent=['client1', 'client2'], already_sent=[], failed={})
>>> EmailScheduler(emailer, "0 8 * * MON", "Europe/London").start()   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import smtplib
import sqlite3
import ssl
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from .settings import SmtpSettings

log = logging.getLogger("share_holders.emails")

__all__ = [
    "HOLDERS_STORE",
    "POSITIONS_STORE",
    "ReadableStore",
    "read_share_holder",
    "iso_week",
    "recipient_for_domain",
    "SendLog",
    "SendReport",
    "WeeklyEmailer",
    "EmailScheduler",
]

HOLDERS_STORE = "us-share-holders"
POSITIONS_STORE = "positions-enriched"


class ReadableStore(Protocol):
    """The part of :class:`streamtable.serving.StoreView` used here."""

    def get(self, key: Any) -> Any: ...

    def all(self) -> Iterator[tuple[Any, Any]]: ...

    def keys_of_task(self, task: int) -> list[Any]: ...

    def __len__(self) -> int: ...


def _sort_key(value: Any) -> tuple[str, Any]:
    return (type(value).__name__, value)


def read_share_holder(holders: ReadableStore, positions: ReadableStore,
                      client: str) -> list[dict[str, Any]] | None:
    """A US share-holder's positions, by id, or None when the client holds no US stock.

    Each position is the ``positions-enriched`` value (``id``, ``client``, ``ticker``,
    ``amount``, ``exchange``, ``name``); an id whose position is not (yet) in that store is left
    out.

    >>> class Store(dict):
    ...     def all(self): return iter(sorted(self.items()))
    ...     def keys_of_task(self, task): return sorted(self)
    >>> holders = Store({"client1": {3, 1}})
    >>> positions = Store({1: {"id": 1, "client": "client1", "ticker": "AAPL", "amount": 5},
    ...                    3: {"id": 3, "client": "client1", "ticker": "FB", "amount": 2}})
    >>> [p["ticker"] for p in read_share_holder(holders, positions, "client1")]
    ['AAPL', 'FB']
    >>> read_share_holder(holders, positions, "client9") is None
    True
    """
    ids = holders.get(client)
    if ids is None:
        return None
    if isinstance(ids, (int, str)):
        ids = [ids]
    rows = []
    for pid in sorted(ids, key=_sort_key):
        value = positions.get(pid)
        if value is None:
            log.debug("position %r of %r is not in %s yet", pid, client, POSITIONS_STORE)
            continue
        row = {"id": pid, "client": client, "ticker": None, "amount": None, "exchange": None,
               "name": None}
        row.update({k: value[k] for k in ("client", "ticker", "amount", "exchange", "name")
                    if k in value})
        rows.append(row)
    return rows


def iso_week(moment: datetime, tz: ZoneInfo | str | None = None) -> str:
    """The ISO week of ``moment`` (in ``tz`` when given), e.g. ``2024-W01``.

    >>> iso_week(datetime(2024, 12, 30, 9, tzinfo=timezone.utc))
    '2025-W01'
    >>> iso_week(datetime(2024, 1, 7, 23, 30, tzinfo=timezone.utc), "Europe/Helsinki")
    '2024-W02'
    """
    if tz is not None:
        moment = moment.astimezone(ZoneInfo(tz) if isinstance(tz, str) else tz)
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


def recipient_for_domain(domain: str) -> Callable[[str], str]:
    """Client id -> email address: an id containing ``@`` is the address, else ``id@domain``.

    >>> to = recipient_for_domain("example.com")
    >>> to("client1"), to("ann@corp.example")
    ('client1@example.com', 'ann@corp.example')
    """

    def recipient(client: str) -> str:
        return client if "@" in client else f"{client}@{domain}"

    return recipient


# -- the send log ----------------------------------------------------------------------------
_LOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS sent (
    client TEXT NOT NULL,
    week TEXT NOT NULL,
    sent_at TEXT NOT NULL,
    message_id TEXT NOT NULL,
    PRIMARY KEY (client, week)
);
CREATE TABLE IF NOT EXISTS runs (
    week TEXT NOT NULL,
    worker TEXT NOT NULL,
    started_at TEXT NOT NULL,
    completed_at TEXT,
    PRIMARY KEY (week, worker)
);
"""


class SendLog:
    """Which client was mailed in which week (SQLite; every write is durable on return).

    >>> import os, tempfile
    >>> sl = SendLog(os.path.join(tempfile.mkdtemp(), "emails.db"))
    >>> sl.mark_sent("client1", "2024-W05", "<id@x>")
    >>> sl.was_sent("client1", "2024-W05"), sl.was_sent("client1", "2024-W06")
    (True, False)
    >>> sorted(sl.sent_clients("2024-W05"))
    ['client1']
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as conn:
            conn.executescript(_LOG_SCHEMA)

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.path, timeout=30)
        try:
            conn.execute("PRAGMA synchronous=FULL")
            with conn:  # one transaction, committed on success
                yield conn
        finally:
            conn.close()

    @staticmethod
    def _now() -> str:
        return datetime.now(timezone.utc).isoformat(timespec="seconds")

    def was_sent(self, client: str, week: str) -> bool:
        with self._connect() as conn:
            row = conn.execute("SELECT 1 FROM sent WHERE client = ? AND week = ?",
                               (client, week)).fetchone()
        return row is not None

    def sent_clients(self, week: str) -> set[str]:
        with self._connect() as conn:
            return {r[0] for r in conn.execute("SELECT client FROM sent WHERE week = ?", (week,))}

    def mark_sent(self, client: str, week: str, message_id: str) -> None:
        with self._connect() as conn:
            conn.execute("INSERT OR IGNORE INTO sent (client, week, sent_at, message_id) "
                         "VALUES (?, ?, ?, ?)", (client, week, self._now(), message_id))

    def run_started(self, week: str, worker: str) -> None:
        with self._connect() as conn:
            conn.execute("INSERT OR IGNORE INTO runs (week, worker, started_at) VALUES (?, ?, ?)",
                         (week, worker, self._now()))

    def run_completed(self, week: str, worker: str) -> None:
        with self._connect() as conn:
            conn.execute("INSERT OR IGNORE INTO runs (week, worker, started_at) VALUES (?, ?, ?)",
                         (week, worker, self._now()))
            conn.execute("UPDATE runs SET completed_at = ? WHERE week = ? AND worker = ?",
                         (self._now(), week, worker))

    def run_state(self, week: str, worker: str) -> str | None:
        """None (no run this week), ``"started"`` (unfinished or had failures), ``"completed"``."""
        with self._connect() as conn:
            row = conn.execute("SELECT completed_at FROM runs WHERE week = ? AND worker = ?",
                               (week, worker)).fetchone()
        if row is None:
            return None
        return "started" if row[0] is None else "completed"

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold an exclusive lock (a ``flock`` on ``<log>.lock``) so that two processes sharing
        the send log never run at the same time; the OS releases it if the process dies."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            yield
            return
        with open(f"{self.path}.lock", "a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


# -- the emailer -----------------------------------------------------------------------------
@dataclass
class SendReport:
    """What one run did. ``complete`` when nothing failed."""

    week: str
    sent: list[str] = field(default_factory=list)
    already_sent: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.failed


class _SmtpUnavailable(Exception):
    """The SMTP server cannot be reached or refuses the session: abort the run."""


class WeeklyEmailer:
    """Sends this week's email to each US share-holder of this worker's shard, once.

    ``task_count`` is the number of tasks of the ``us-share-holders`` store (the partition count
    the streaming application planned for it; see ``service.store_task_count``). ``clock``
    returns the current time (aware), ``recipient`` maps a client id to its address,
    ``ssl_context`` is used for STARTTLS (default: the system's CAs), ``on_sent(client)`` is
    called after each logged send.

    >>> emailer = WeeklyEmailer(holders, positions, SmtpSettings(port=2525),  # doctest: +SKIP
    ...                         "emails.db", task_count=2, worker_index=0, worker_count=2)
    >>> emailer.send_now().sent                                              # doctest: +SKIP
    ['client1']
    """

    def __init__(
        self,
        holders: ReadableStore,
        positions: ReadableStore,
        smtp: SmtpSettings,
        send_log: SendLog | str | Path,
        *,
        task_count: int,
        worker_index: int = 0,
        worker_count: int = 1,
        timezone: str | ZoneInfo = "Europe/London",
        recipient: Callable[[str], str] | None = None,
        clock: Callable[[], datetime] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        on_sent: Callable[[str], None] | None = None,
    ) -> None:
        if task_count < 1:
            raise ValueError(f"task count must be >= 1, got {task_count}")
        if worker_count < 1 or not 0 <= worker_index < worker_count:
            raise ValueError(f"worker index {worker_index} is not in 0..{worker_count - 1}")
        self.holders = holders
        self.positions = positions
        self.smtp = smtp
        self.send_log = send_log if isinstance(send_log, SendLog) else SendLog(send_log)
        self.task_count = task_count
        self.worker_index = worker_index
        self.worker_count = worker_count
        self.tz = ZoneInfo(timezone) if isinstance(timezone, str) else timezone
        self.recipient = recipient or recipient_for_domain("example.com")
        self.clock = clock or (lambda: datetime.now(self.tz))
        self.ssl_context = ssl_context
        self.on_sent = on_sent
        self._lock = threading.Lock()

    @property
    def worker(self) -> str:
        """This worker as ``i/N``."""
        return f"{self.worker_index}/{self.worker_count}"

    def tasks(self) -> list[int]:
        """The tasks of this worker's shard: ``t`` in ``range(task_count)`` with
        ``t % worker_count == worker_index`` (worker 1 of 2 over 5 tasks: ``[1, 3]``)."""
        return [t for t in range(self.task_count) if t % self.worker_count == self.worker_index]

    def clients(self) -> list[str]:
        """The US share-holders of this worker's shard, sorted."""
        out: list[str] = []
        for task in self.tasks():
            out.extend(self.holders.keys_of_task(task))
        return sorted(out, key=_sort_key)

    def current_week(self, now: datetime | None = None) -> str:
        return iso_week(now or self.clock(), self.tz)

    # -- messages --------------------------------------------------------------------------
    def message_id(self, client: str, week: str) -> str:
        """The same for a client and week, every time (lets mail systems drop a duplicate)."""
        digest = hashlib.sha256(f"{client}\0{week}".encode()).hexdigest()[:24]
        domain = self.smtp.sender.rpartition("@")[2] or "localhost"
        return f"<share-holders.{week}.{digest}@{domain}>"

    def compose(self, client: str, positions: Iterable[dict[str, Any]], week: str,
                now: datetime | None = None) -> EmailMessage:
        """The email of one client: a table of its US positions (ticker, name, amount)."""
        rows = [(str(p.get("ticker") or ""), str(p.get("name") or ""), _amount(p.get("amount")))
                for p in positions]
        rows.sort()
        width_t = max([len("Ticker"), *(len(r[0]) for r in rows)])
        width_n = max([len("Name"), *(len(r[1]) for r in rows)])
        lines = [
            f"Dear {client},",
            "",
            f"your positions in US stocks this week ({week}):",
            "",
            f"  {'Ticker':<{width_t}}  {'Name':<{width_n}}  Amount",
            *(f"  {t:<{width_t}}  {n:<{width_n}}  {a}" for t, n, a in rows),
            "",
            "This is an automated weekly message.",
        ]
        msg = EmailMessage()
        msg["Subject"] = f"Your US share positions, week {week}"
        msg["From"] = self.smtp.sender
        msg["To"] = self.recipient(client)
        msg["Date"] = format_datetime((now or self.clock()).astimezone(self.tz))
        msg["Message-ID"] = self.message_id(client, week)
        msg["X-Share-Holders-Client"] = client
        msg["X-Share-Holders-Week"] = week
        msg.set_content("\n".join(lines) + "\n")
        return msg

    # -- SMTP ------------------------------------------------------------------------------
    def _connect(self) -> smtplib.SMTP:
        s = self.smtp
        log.info("connecting to SMTP %s:%d (STARTTLS %s, login %s)", s.host, s.port,
                 "on" if s.starttls else "off", s.user or "none")
        try:
            conn = smtplib.SMTP(s.host, s.port, timeout=s.timeout)
        except (OSError, smtplib.SMTPException) as exc:
            raise _SmtpUnavailable(f"cannot connect to {s.host}:{s.port}: {exc}") from exc
        try:
            conn.ehlo()
            if s.starttls:
                conn.starttls(context=self.ssl_context or ssl.create_default_context())
                conn.ehlo()
            if s.user:
                conn.login(s.user, s.password.reveal())
        except smtplib.SMTPAuthenticationError as exc:
            _quietly_close(conn)
            raise _SmtpUnavailable(f"SMTP login as {s.user!r} refused "
                                   f"({exc.smtp_code})") from None
        except (OSError, smtplib.SMTPException) as exc:
            _quietly_close(conn)
            raise _SmtpUnavailable(f"SMTP session setup with {s.host}:{s.port} failed: "
                                   f"{type(exc).__name__}: {_safe(exc, s)}") from None
        return conn

    # -- a run -----------------------------------------------------------------------------
    def send_now(self, now: datetime | None = None) -> SendReport:
        """Mail every client of this shard not mailed this week yet; returns what happened.

        Failures of single messages (the server refused that message) are reported and the run
        goes on; when the server cannot be reached the run stops. Either way the report lists
        the failed clients and a later run sends them (and only them).
        """
        with self._lock, self.send_log.exclusive():
            return self._run(now)

    def _run(self, now: datetime | None) -> SendReport:
        now = now or self.clock()
        week = self.current_week(now)
        report = SendReport(week)
        self.send_log.run_started(week, self.worker)
        done = self.send_log.sent_clients(week)
        clients = self.clients()
        log.info("weekly emails %s, worker %s: %d clients (%d mailed before)", week,
                 self.worker, len(clients), sum(1 for c in clients if c in done))
        conn: smtplib.SMTP | None = None
        try:
            for i, client in enumerate(clients):
                if client in done:
                    report.already_sent.append(client)
                    continue
                rows = read_share_holder(self.holders, self.positions, client)
                if rows is None:  # no longer a US share-holder
                    continue
                if not rows:
                    report.failed[client] = "its positions are not in the store yet"
                    log.warning("%s: no positions found for %r; will retry", week, client)
                    continue
                msg = self.compose(client, rows, week, now)
                try:
                    conn = self._deliver(conn, msg)
                except _SmtpUnavailable as exc:
                    log.error("%s: SMTP unavailable, stopping the run: %s", week, exc)
                    for rest in clients[i:]:
                        if rest not in done and self.holders.get(rest) is not None:
                            report.failed[rest] = str(exc)
                    break
                except smtplib.SMTPException as exc:
                    report.failed[client] = f"{type(exc).__name__}: {_safe(exc, self.smtp)}"
                    log.warning("%s: email to %r refused: %s", week, client,
                                report.failed[client])
                    continue
                self.send_log.mark_sent(client, week, msg["Message-ID"])
                report.sent.append(client)
                log.info("%s: emailed %r (%d positions)", week, client, len(rows))
                if self.on_sent is not None:
                    self.on_sent(client)
        finally:
            if conn is not None:
                _quietly_close(conn)
        if report.complete:
            self.send_log.run_completed(week, self.worker)
        log.info("weekly emails %s, worker %s: %d sent, %d sent before, %d failed", week,
                 self.worker, len(report.sent), len(report.already_sent), len(report.failed))
        return report

    def _deliver(self, conn: smtplib.SMTP | None, msg: EmailMessage) -> smtplib.SMTP:
        """Send on ``conn`` (connecting if needed; reconnecting once if the connection was
        lost); returns the connection to reuse."""
        if conn is None:
            conn = self._connect()
        try:
            conn.send_message(msg)
            return conn
        except (smtplib.SMTPServerDisconnected, OSError) as exc:
            log.info("SMTP connection lost (%s); reconnecting", type(exc).__name__)
            _quietly_close(conn)
        conn = self._connect()
        try:
            conn.send_message(msg)
        except (smtplib.SMTPServerDisconnected, OSError) as exc:
            _quietly_close(conn)
            raise _SmtpUnavailable(f"connection lost twice: {exc}") from None
        return conn


def _amount(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None else str(value)


def _safe(exc: BaseException, smtp: SmtpSettings) -> str:
    """An exception's text with the password blanked out, should a server echo it."""
    text = str(exc)
    secret = smtp.password.reveal()
    return text.replace(secret, "********") if secret else text


def _quietly_close(conn: smtplib.SMTP) -> None:
    try:
        conn.quit()
    except Exception:
        with contextlib.suppress(Exception):
            conn.close()


# -- the schedule ----------------------------------------------------------------------------
class EmailScheduler:
    """Runs ``emailer.send_now()`` on a cron schedule in a background thread.

    The schedule is read in ``timezone`` (so ``0 8 * * MON`` is 08:00 London time, summer and
    winter). On start, if this week's scheduled run was missed or did not complete (the service
    was down, or crashed mid-run), it runs at once (``catch_up``). A run with failures is
    retried every ``retry_seconds`` until it completes or the next scheduled run is due.
    ``before_run`` is called before each run (e.g. to let the streaming app catch up).

    >>> s = EmailScheduler(emailer, "0 8 * * MON", "Europe/London")    # doctest: +SKIP
    >>> s.start(); ...; s.stop()                                       # doctest: +SKIP
    >>> EmailScheduler.next_fire_time("0 8 * * MON", "Europe/London",
    ...     datetime(2024, 3, 27, 12, tzinfo=timezone.utc)).isoformat()
    '2024-04-01T08:00:00+01:00'
    """

    def __init__(
        self,
        emailer: WeeklyEmailer,
        cron: str = "0 8 * * MON",
        timezone: str | ZoneInfo = "Europe/London",
        *,
        retry_seconds: float = 300.0,
        catch_up: bool = True,
        before_run: Callable[[], None] | None = None,
        clock: Callable[[], datetime] | None = None,
        max_sleep: float = 30.0,
    ) -> None:
        from croniter import croniter

        if not croniter.is_valid(cron):
            raise ValueError(f"invalid cron expression {cron!r}")
        self.emailer = emailer
        self.cron = cron
        self.tz = ZoneInfo(timezone) if isinstance(timezone, str) else timezone
        self.retry_seconds = retry_seconds
        self.catch_up = catch_up
        self.before_run = before_run
        self.clock = clock or (lambda: datetime.now(self.tz))
        self.max_sleep = max_sleep
        self.runs = 0
        self.last_report: SendReport | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def next_fire_time(cron: str, tz: str | ZoneInfo, after: datetime) -> datetime:
        """The first time strictly after ``after`` that ``cron`` fires, in ``tz``."""
        from croniter import croniter

        zone = ZoneInfo(tz) if isinstance(tz, str) else tz
        return croniter(cron, after.astimezone(zone)).get_next(datetime)

    @staticmethod
    def previous_fire_time(cron: str, tz: str | ZoneInfo, before: datetime) -> datetime:
        """The last time at or before ``before`` that ``cron`` fired, in ``tz``."""
        from croniter import croniter

        zone = ZoneInfo(tz) if isinstance(tz, str) else tz
        start = before.astimezone(zone) + timedelta(seconds=1)
        return croniter(cron, start).get_prev(datetime)

    def due_on_start(self, now: datetime | None = None) -> bool:
        """True when this week's scheduled run has fired already but not completed."""
        now = now or self.clock()
        prev = self.previous_fire_time(self.cron, self.tz, now)
        week = iso_week(now, self.tz)
        if iso_week(prev, self.tz) != week:
            return False
        return self.emailer.send_log.run_state(week, self.emailer.worker) != "completed"

    def run_once(self) -> SendReport | None:
        """One run now (``before_run``, then ``send_now``); None if it raised (logged)."""
        try:
            if self.before_run is not None:
                self.before_run()
            report = self.emailer.send_now()
        except Exception:
            log.exception("weekly email run failed")
            report = None
        self.runs += 1
        self.last_report = report
        return report

    def _loop(self) -> None:
        now = self.clock()
        next_at = self.next_fire_time(self.cron, self.tz, now)
        if self.catch_up and self.due_on_start(now):
            log.info("this week's email run is due (missed or unfinished): running now")
            next_at = now
        log.info("next weekly email run at %s", next_at.isoformat())
        while not self._stop.is_set():
            now = self.clock()
            if now < next_at:
                self._stop.wait(min(self.max_sleep, (next_at - now).total_seconds()))
                continue
            report = self.run_once()
            now = self.clock()
            next_at = self.next_fire_time(self.cron, self.tz, now)
            if report is None or not report.complete:
                retry = now + timedelta(seconds=self.retry_seconds)
                if retry < next_at and (report is None
                                        or iso_week(retry, self.tz) == report.week):
                    next_at = retry
            log.info("next weekly email run at %s", next_at.isoformat())

    def start(self) -> EmailScheduler:
        """Start the background thread (a daemon: it does not keep the process alive)."""
        if self._thread is not None and self._thread.is_alive():
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="weekly-emails", daemon=True)
        self._thread.start()
        log.info("email schedule %r (%s), worker %s", self.cron, self.tz.key,
                 self.emailer.worker)
        return self

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop the thread, waiting for a run in progress to finish."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
