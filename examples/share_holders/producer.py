"""Writes positions and reference data to Kafka, validated.

Records follow the share-holders topics' contract:

* ``share-holders``: key the position id as a JSON number (``1``); value the JSON object
  ``{"client", "id", "ticker", "amount"}`` plus ``"exchange"`` when known; a tombstone (null
  value) closes the position.
* ``shares-ref-data``: key the ticker as a JSON string (``"AAPL"``, the streams application's
  default key serde); value ``{"name", "exchange"}``.

>>> validate_position(1, "client1", "aapl", 10)
Traceback (most recent call last):
...
ValueError: ticker must be upper-case letters (A-Z), got 'aapl'
>>> validate_position(1, "client1", "AAPL", 10, "nasdaq")
{'id': 1, 'client': 'client1', 'ticker': 'AAPL', 'amount': 10, 'exchange': 'NASDAQ'}
>>> validate_position(1, "client1", "AAPL", 0) is None      # amount 0 closes the position
True
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Mapping
from typing import Any

from streamtable.serde import Serde, serde_from

log = logging.getLogger("share_holders.producer")

__all__ = [
    "POSITIONS_TOPIC",
    "REF_DATA_TOPIC",
    "ProduceError",
    "ShareHoldersProducer",
    "validate_position",
    "validate_ref_data",
]

POSITIONS_TOPIC = "share-holders"
REF_DATA_TOPIC = "shares-ref-data"

_TICKER = re.compile(r"[A-Z]+")
_EXCHANGE = re.compile(r"[A-Z0-9][A-Z0-9._-]*")


class ProduceError(RuntimeError):
    """Kafka did not acknowledge a record (the broker is down, the topic is missing, ...)."""


MAX_POSITION_ID = 2**63 - 1


def check_position_id(position_id: Any) -> int:
    """A position id: an integer from 0 to 2**63 - 1 (a signed 64-bit integer, what Kafka
    clients and the serving stores hold as a key); ValueError saying why not."""
    if isinstance(position_id, bool) or not isinstance(position_id, int):
        raise ValueError(f"position id must be an integer, got {position_id!r}")
    if position_id < 0:
        raise ValueError(f"position id must be >= 0, got {position_id}")
    if position_id > MAX_POSITION_ID:
        raise ValueError(f"position id must fit a signed 64-bit integer (at most "
                         f"{MAX_POSITION_ID}), got {position_id}")
    return position_id


def _check_ticker(ticker: Any) -> str:
    if not isinstance(ticker, str) or not _TICKER.fullmatch(ticker):
        raise ValueError(f"ticker must be upper-case letters (A-Z), got {ticker!r}")
    return ticker


def _check_exchange(exchange: Any) -> str:
    if not isinstance(exchange, str) or not exchange.strip():
        raise ValueError(f"exchange must be a non-empty string, got {exchange!r}")
    value = exchange.strip().upper()
    if not _EXCHANGE.fullmatch(value):
        raise ValueError(f"exchange must be letters and digits (e.g. NASDAQ), got {exchange!r}")
    return value


def validate_position(position_id: Any, client: Any, ticker: Any, amount: Any,
                      exchange: Any = None) -> dict[str, Any] | None:
    """The record value of a position, or None when ``amount`` is 0 (the position closes).

    Raises ValueError saying what is wrong: the id must be an integer >= 0, the client a
    non-empty string, the ticker upper-case letters, the amount a finite number >= 0, the
    exchange (optional) letters and digits (it is upper-cased).

    >>> validate_position(7, " ", "FB", 1)
    Traceback (most recent call last):
    ...
    ValueError: client must be a non-empty string, got ' '
    >>> validate_position(7, "c", "FB", -1)
    Traceback (most recent call last):
    ...
    ValueError: amount must be >= 0, got -1
    """
    pid = check_position_id(position_id)
    if not isinstance(client, str) or not client.strip():
        raise ValueError(f"client must be a non-empty string, got {client!r}")
    _check_ticker(ticker)
    if isinstance(amount, bool) or not isinstance(amount, (int, float)):
        raise ValueError(f"amount must be a number, got {amount!r}")
    if not math.isfinite(amount):
        raise ValueError(f"amount must be a finite number, got {amount!r}")
    if amount < 0:
        raise ValueError(f"amount must be >= 0, got {amount}")
    if amount == 0:
        return None
    value: dict[str, Any] = {"id": pid, "client": client, "ticker": ticker, "amount": amount}
    if exchange is not None:
        value["exchange"] = _check_exchange(exchange)
    return value


def validate_ref_data(ticker: Any, name: Any, exchange: Any) -> dict[str, str]:
    """The record value of a ticker's reference data; ValueError if a field is invalid.

    >>> validate_ref_data("AAPL", "Apple Inc.", "nasdaq")
    {'name': 'Apple Inc.', 'exchange': 'NASDAQ'}
    """
    _check_ticker(ticker)
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    return {"name": name.strip(), "exchange": _check_exchange(exchange)}


class ShareHoldersProducer:
    """Produces positions and reference data; each call returns once Kafka acknowledged it.

    >>> p = ShareHoldersProducer("127.0.0.1:9092")                  # doctest: +SKIP
    >>> p.put_ref_data("AAPL", "Apple Inc.", "NASDAQ")              # doctest: +SKIP
    {'name': 'Apple Inc.', 'exchange': 'NASDAQ'}
    >>> p.put_position(1, "client1", "AAPL", 100)                   # doctest: +SKIP
    {'id': 1, 'client': 'client1', 'ticker': 'AAPL', 'amount': 100}
    >>> p.close_position(1)                                         # doctest: +SKIP
    >>> p.close()                                                   # doctest: +SKIP

    ``producer`` replaces the confluent-kafka Producer (anything with ``produce``, ``poll`` and
    ``flush``); ``config`` adds librdkafka settings. The producer is idempotent, waits for all
    in-sync replicas (``acks=all``) and partitions keys like the Java client (murmur2), as the
    streams runtime expects. It is safe to share between threads.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        positions_topic: str = POSITIONS_TOPIC,
        ref_data_topic: str = REF_DATA_TOPIC,
        key_serde: Serde | str = "json",
        value_serde: Serde | str = "json",
        timeout: float = 30.0,
        config: Mapping[str, Any] | None = None,
        producer: Any = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.positions_topic = positions_topic
        self.ref_data_topic = ref_data_topic
        self.key_serde = serde_from(key_serde)
        self.value_serde = serde_from(value_serde)
        self.timeout = timeout
        if producer is None:
            from confluent_kafka import Producer

            conf: dict[str, Any] = {
                "bootstrap.servers": bootstrap_servers,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": int(timeout * 1000),
                # the Java client's partitioner (librdkafka's default is CRC32-based): the
                # streams runtime co-partitions by it, e.g. in the foreign-key join on the ticker
                "partitioner": "murmur2_random",
                # librdkafka's own messages go to Python logging, not stderr
                "logger": logging.getLogger("share_holders.kafka"),
            }
            conf.update(config or {})
            producer = Producer(conf)
        self._producer = producer

    # -- writes ----------------------------------------------------------------------------
    def put_position(self, position_id: int, client: str, ticker: str, amount: float,
                     exchange: str | None = None) -> dict[str, Any] | None:
        """Open or update a position; ``amount`` 0 closes it (a tombstone). Returns the value
        written (None for a tombstone). ValueError if a field is invalid."""
        value = validate_position(position_id, client, ticker, amount, exchange)
        self._send(self.positions_topic, position_id, value)
        log.info("position %d %s", position_id,
                 "closed (amount 0)" if value is None else f"set: {value}")
        return value

    def close_position(self, position_id: int) -> None:
        """Close a position: a tombstone for its key."""
        check_position_id(position_id)
        self._send(self.positions_topic, position_id, None)
        log.info("position %d closed", position_id)

    def put_ref_data(self, ticker: str, name: str, exchange: str) -> dict[str, str]:
        """Set a ticker's name and exchange; returns the value written."""
        value = validate_ref_data(ticker, name, exchange)
        self._send(self.ref_data_topic, ticker, value)
        log.info("ref data %s set: %s", ticker, value)
        return value

    # -- plumbing --------------------------------------------------------------------------
    def _send(self, topic: str, key: Any, value: Any) -> None:
        errors: list[Any] = []
        done = threading.Event()

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            done.set()

        key_bytes = self.key_serde.serialize(topic, key)
        value_bytes = self.value_serde.serialize(topic, value)
        try:
            try:
                self._producer.produce(topic, key=key_bytes, value=value_bytes,
                                       on_delivery=on_delivery)
            except BufferError:  # the local queue is full: serve callbacks, then try again
                self._producer.poll(1.0)
                self._producer.produce(topic, key=key_bytes, value=value_bytes,
                                       on_delivery=on_delivery)
        except Exception as exc:  # KafkaException: unknown topic, bad config ...
            raise ProduceError(f"could not produce to {topic!r}: {exc}") from exc
        self._producer.flush(self.timeout)  # thread-safe; serves on_delivery callbacks
        if not done.is_set():
            raise ProduceError(f"no acknowledgement from Kafka for {topic!r} "
                               f"within {self.timeout}s")
        if errors:
            raise ProduceError(f"Kafka refused the record for {topic!r}: {errors[0]}")

    def flush(self, timeout: float | None = None) -> int:
        """Wait for outstanding records; returns how many are still in flight."""
        return int(self._producer.flush(self.timeout if timeout is None else timeout))

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout`` seconds), then release the producer's connections."""
        remaining = self.flush(timeout)
        if remaining:
            log.warning("closing with %d records not acknowledged by Kafka", remaining)
        close = getattr(self._producer, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> ShareHoldersProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"ShareHoldersProducer({self.bootstrap_servers!r}, "
                f"topics={self.positions_topic!r}/{self.ref_data_topic!r})")
