"""Configuration of the share-holders service, read from environment variables.

Every setting has a default, so ``Settings.from_env({})`` is a working development setup: an
embedded broker, SMTP on ``localhost:25``, the HTTP API on ``127.0.0.1:8000``.

>>> s = Settings.from_env({"SMTP_PASSWORD": "hunter2", "SHARE_HOLDERS_US_EXCHANGES": "nyse"})
>>> s.us_exchanges
('NYSE',)
>>> "hunter2" in repr(s)
False
>>> s.smtp.password.reveal()
'hunter2'

=================================  =========================================================
Variable                           Meaning (default)
=================================  =========================================================
STREAMTABLE_BOOTSTRAP_SERVERS      Kafka brokers; empty: start an embedded broker (empty)
STREAMTABLE_BROKER_PORT            port of the embedded broker; 0: any free port (9092)
SHARE_HOLDERS_US_EXCHANGES         comma-separated US exchanges (NASDAQ,NYSE)
SHARE_HOLDERS_APPLICATION_ID       the streams application id (share-holders)
SHARE_HOLDERS_PARTITIONS           partitions of the topics the service creates (2)
SMTP_HOST / SMTP_PORT              SMTP server (localhost / 25)
SMTP_STARTTLS                      upgrade the connection with STARTTLS (false)
SMTP_USER / SMTP_PASSWORD          log in when SMTP_USER is set (none)
SMTP_FROM                          sender address (share-holders@localhost)
SMTP_TIMEOUT                       seconds per SMTP operation (30)
EMAIL_RECIPIENT_DOMAIN             a client id without "@" is mailed at client@DOMAIN
                                   (example.com)
EMAIL_SCHEDULE                     cron expression of the weekly run (0 8 * * MON)
EMAIL_TIMEZONE                     time zone of the schedule and the ISO week (Europe/London)
EMAIL_RETRY_SECONDS                retry delay of a run that had failures (300)
HTTP_HOST / HTTP_PORT              the HTTP API (127.0.0.1 / 8000)
STREAMTABLE_STATE_DIR              state directory: stores, checkpoints, send log
                                   (.streamtable)
SHARE_HOLDERS_WORKER_INDEX         this email worker's index i (0)
SHARE_HOLDERS_WORKER_COUNT         number N of email workers; worker i mails the clients
                                   of the tasks t with t % N == i (1)
=================================  =========================================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["Secret", "SmtpSettings", "Settings"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class Secret:
    """A string that never shows itself in ``repr``/``str`` (and so never in logs).

    >>> p = Secret("hunter2")
    >>> p, str(p), f"{p}"
    (Secret('********'), '********', '********')
    >>> p.reveal()
    'hunter2'
    >>> bool(Secret(""))
    False
    """

    __slots__ = ("_value",)

    def __init__(self, value: str = "") -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret itself: pass it straight to the API that needs it, never to a logger."""
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __str__(self) -> str:
        return "********" if self._value else ""

    def __repr__(self) -> str:
        return f"Secret({str(self)!r})"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __reduce__(self) -> Any:  # pickling keeps the value (for worker processes), not repr
        return (Secret, (self._value,))


@dataclass(frozen=True)
class SmtpSettings:
    """How to reach the SMTP server.

    >>> SmtpSettings(host="mail", port=587, starttls=True, user="me", password=Secret("pw"))
    SmtpSettings(host='mail', port=587, starttls=True, user='me', password=Secret('********'), \
sender='share-holders@localhost', timeout=30.0)
    """

    host: str = "localhost"
    port: int = 25
    starttls: bool = False
    user: str | None = None
    password: Secret = field(default_factory=Secret)
    sender: str = "share-holders@localhost"
    timeout: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.password, Secret):  # accept a plain str, keep it wrapped
            object.__setattr__(self, "password", Secret(str(self.password or "")))
        if not 0 < int(self.port) < 65536:
            raise ValueError(f"SMTP port must be in 1..65535, got {self.port}")


@dataclass(frozen=True)
class Settings:
    """All settings of the service; build with :meth:`from_env`.

    >>> Settings(worker_index=2, worker_count=2)
    Traceback (most recent call last):
    ...
    ValueError: worker index must be in 0..1 (worker count 2), got 2
    """

    bootstrap_servers: str | None = None
    broker_port: int = 9092
    us_exchanges: tuple[str, ...] = ("NASDAQ", "NYSE")
    application_id: str = "share-holders"
    partitions: int = 2
    smtp: SmtpSettings = field(default_factory=SmtpSettings)
    recipient_domain: str = "example.com"
    email_schedule: str = "0 8 * * MON"
    email_timezone: str = "Europe/London"
    email_retry_seconds: float = 300.0
    http_host: str = "127.0.0.1"
    http_port: int = 8000
    state_dir: Path = Path(".streamtable")
    worker_index: int = 0
    worker_count: int = 1

    def __post_init__(self) -> None:
        if self.worker_count < 1:
            raise ValueError(f"worker count must be >= 1, got {self.worker_count}")
        if not 0 <= self.worker_index < self.worker_count:
            raise ValueError(
                f"worker index must be in 0..{self.worker_count - 1} "
                f"(worker count {self.worker_count}), got {self.worker_index}"
            )
        if self.partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {self.partitions}")
        if not self.us_exchanges:
            raise ValueError("at least one US exchange is needed")
        if not 0 <= self.http_port < 65536:
            raise ValueError(f"HTTP port must be in 0..65535, got {self.http_port}")
        try:
            ZoneInfo(self.email_timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {self.email_timezone!r}") from exc
        from croniter import croniter

        if not croniter.is_valid(self.email_schedule):
            raise ValueError(f"invalid cron expression {self.email_schedule!r}")
        object.__setattr__(self, "state_dir", Path(self.state_dir))

    @property
    def timezone(self) -> ZoneInfo:
        """The schedule's time zone."""
        return ZoneInfo(self.email_timezone)

    @property
    def send_log_path(self) -> Path:
        """The SQLite send log of the weekly emails: next to the streaming application's
        directory, not in it, so that ``streamtable reset`` does not forget who was mailed."""
        return self.state_dir / f"{self.application_id}.emails.db"

    @property
    def serving_db_path(self) -> Path:
        """The streaming application's serving store (where ``StreamsApp`` keeps it)."""
        return self.state_dir / self.application_id / "serving.db"

    def with_(self, **changes: Any) -> Settings:
        """A copy with some settings changed (validated again).

        >>> Settings().with_(http_port=9000).http_port
        9000
        """
        return replace(self, **changes)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from environment variables (``os.environ`` unless ``env`` is given).

        >>> Settings.from_env({"SMTP_PORT": "x"})
        Traceback (most recent call last):
        ...
        ValueError: SMTP_PORT must be an integer, got 'x'
        """
        e = os.environ if env is None else env

        def text(name: str, default: str) -> str:
            value = e.get(name)
            return default if value is None or value.strip() == "" else value.strip()

        def integer(name: str, default: int) -> int:
            raw = text(name, str(default))
            try:
                return int(raw)
            except ValueError:
                raise ValueError(f"{name} must be an integer, got {raw!r}") from None

        def number(name: str, default: float) -> float:
            raw = text(name, str(default))
            try:
                return float(raw)
            except ValueError:
                raise ValueError(f"{name} must be a number, got {raw!r}") from None

        def flag(name: str, default: bool) -> bool:
            raw = (e.get(name) or "").strip().lower()
            if raw == "":
                return default
            if raw in _TRUE:
                return True
            if raw in _FALSE:
                return False
            raise ValueError(f"{name} must be true or false, got {raw!r}")

        exchanges = tuple(
            x.strip().upper()
            for x in text("SHARE_HOLDERS_US_EXCHANGES", "NASDAQ,NYSE").split(",")
            if x.strip()
        )
        smtp = SmtpSettings(
            host=text("SMTP_HOST", "localhost"),
            port=integer("SMTP_PORT", 25),
            starttls=flag("SMTP_STARTTLS", False),
            user=text("SMTP_USER", "") or None,
            password=Secret(e.get("SMTP_PASSWORD") or ""),
            sender=text("SMTP_FROM", "share-holders@localhost"),
            timeout=number("SMTP_TIMEOUT", 30.0),
        )
        return cls(
            bootstrap_servers=text("STREAMTABLE_BOOTSTRAP_SERVERS", "") or None,
            broker_port=integer("STREAMTABLE_BROKER_PORT", 9092),
            us_exchanges=exchanges,
            application_id=text("SHARE_HOLDERS_APPLICATION_ID", "share-holders"),
            partitions=integer("SHARE_HOLDERS_PARTITIONS", 2),
            smtp=smtp,
            recipient_domain=text("EMAIL_RECIPIENT_DOMAIN", "example.com"),
            email_schedule=text("EMAIL_SCHEDULE", "0 8 * * MON"),
            email_timezone=text("EMAIL_TIMEZONE", "Europe/London"),
            email_retry_seconds=number("EMAIL_RETRY_SECONDS", 300.0),
            http_host=text("HTTP_HOST", "127.0.0.1"),
            http_port=integer("HTTP_PORT", 8000),
            state_dir=Path(text("STREAMTABLE_STATE_DIR", ".streamtable")),
            worker_index=integer("SHARE_HOLDERS_WORKER_INDEX", 0),
            worker_count=integer("SHARE_HOLDERS_WORKER_COUNT", 1),
        )
