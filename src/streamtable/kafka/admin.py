"""Topic administration: create what is missing, look up partition counts, delete.

>>> ensure_topics("127.0.0.1:9092", {"orders": 4, "payments": 2})      # doctest: +SKIP
>>> partition_counts("127.0.0.1:9092", ["orders"])                      # doctest: +SKIP
{'orders': 4}

All lookups use a full metadata request (no topic named in it), so a broker that auto-creates
topics on a metadata request (Tansu, or Kafka with ``auto.create.topics.enable``) never creates
a topic merely because it was looked up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from streamtable.errors import StreamsError
from streamtable.kafka.client_log import with_client_log

logger = logging.getLogger(__name__)

__all__ = [
    "KafkaAdminError",
    "KafkaUnreachableError",
    "check_reachable",
    "TopicNotFoundError",
    "admin_client",
    "ensure_topics",
    "partition_counts",
    "partitions_text",
    "delete_topics",
    "list_topic_names",
]


class KafkaAdminError(StreamsError):
    """A topic administration request failed (the message names the topic)."""


class TopicNotFoundError(KafkaAdminError, LookupError):
    """A topic that must exist does not.

    >>> str(TopicNotFoundError("orders", "127.0.0.1:9092"))
    "topic 'orders' does not exist on 127.0.0.1:9092"
    """

    def __init__(self, topic: str, bootstrap_servers: str = "", hint: str = "") -> None:
        self.topic = topic
        where = f" on {bootstrap_servers}" if bootstrap_servers else ""
        super().__init__(f"topic {topic!r} does not exist{where}{hint}")


class KafkaUnreachableError(KafkaAdminError):
    """No broker of ``bootstrap.servers`` accepts a connection."""


def check_reachable(bootstrap_servers: str, timeout: float = 5.0) -> None:
    """Raise :class:`KafkaUnreachableError` unless some broker of ``bootstrap_servers`` accepts
    a TCP connection within ``timeout`` seconds: a closed port is known at once, where a Kafka
    client would retry until its own timeout.

    >>> try:
    ...     check_reachable("127.0.0.1:1")
    ... except KafkaUnreachableError as e:
    ...     print(str(e).split(": is")[0])
    cannot reach Kafka at 127.0.0.1:1 (127.0.0.1:1: connection refused)
    """
    import socket

    reasons = []
    for server in bootstrap_servers.split(","):
        address = server.strip().rsplit("://", 1)[-1]
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]") or "localhost", int(port)),
                                          timeout=timeout):
                return
        except ConnectionRefusedError:
            reasons.append(f"{address}: connection refused")
        except (OSError, ValueError) as e:
            reasons.append(f"{address}: {e}")
    raise KafkaUnreachableError(
        f"cannot reach Kafka at {bootstrap_servers} ({'; '.join(reasons)}): is a broker running "
        "there? Start one (`streamtable broker --port 9092` runs a development broker) or point "
        "--bootstrap-servers at yours")


def partitions_text(count: int) -> str:
    """``"1 partition"``, ``"3 partitions"``.

    >>> partitions_text(1), partitions_text(3)
    ('1 partition', '3 partitions')
    """
    return f"{count} partition{'' if count == 1 else 's'}"


def admin_client(bootstrap_servers: str, extra: Mapping[str, Any] | None = None) -> AdminClient:
    """An AdminClient for ``bootstrap_servers`` with ``extra`` librdkafka settings."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap_servers}
    conf.update(extra or {})
    try:
        return AdminClient(with_client_log(conf))
    except KafkaException as e:  # settings librdkafka refuses (security.protocol, sasl.*...)
        err = e.args[0] if e.args else e
        reason = err.str() if isinstance(err, KafkaError) else str(err)
        raise KafkaAdminError(
            f"cannot create a Kafka client for {bootstrap_servers}: {reason}") from e


def _metadata_partitions(client: Any, timeout: float) -> dict[str, int]:
    """Partition counts of every topic, from any client with ``list_topics`` (an AdminClient,
    or a producer that is connected already)."""
    metadata = client.list_topics(timeout=timeout)
    counts: dict[str, int] = {}
    for name, topic in metadata.topics.items():
        if topic.error is not None and topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            continue
        counts[name] = len(topic.partitions)
    return counts


def list_topic_names(
    bootstrap_servers: str, *, timeout: float = 10.0, client_config: Mapping[str, Any] | None = None
) -> set[str]:
    """Names of all topics on the cluster (internal ones included)."""
    return set(_metadata_partitions(admin_client(bootstrap_servers, client_config), timeout))


def partition_counts(
    bootstrap_servers: str,
    names: Iterable[str],
    *,
    timeout: float = 10.0,
    client_config: Mapping[str, Any] | None = None,
    client: Any = None,
) -> dict[str, int]:
    """Number of partitions of each named topic; ``client``: a connected client to ask (a
    producer, say: no new connection), else a new AdminClient.

    Raises :class:`TopicNotFoundError` naming the first topic that does not exist.

    >>> partition_counts("127.0.0.1:9092", ["orders"])      # doctest: +SKIP
    {'orders': 4}
    """
    wanted = list(dict.fromkeys(names))
    counts = _metadata_partitions(client or admin_client(bootstrap_servers, client_config),
                                  timeout)
    for name in wanted:
        if counts.get(name, 0) <= 0:
            raise TopicNotFoundError(
                name, bootstrap_servers, " (create it first, e.g. with ensure_topics)"
            )
    return {name: counts[name] for name in wanted}


def ensure_topics(
    bootstrap_servers: str,
    topics: Mapping[str, int],
    config: Mapping[str, str] | None = None,
    *,
    replication_factor: int = -1,
    timeout: float = 30.0,
    client_config: Mapping[str, Any] | None = None,
) -> dict[str, int]:
    """Create the topics of ``topics`` (name -> partition count) that do not exist yet.

    ``config`` (e.g. ``{"cleanup.policy": "compact"}``) applies to the topics created here.
    Topics that already exist are left alone, whatever their partition count (a differing count
    is logged as a warning). A concurrent creator is tolerated (TOPIC_ALREADY_EXISTS is ignored).
    ``replication_factor=-1`` uses the broker default. Returns the partition count of every named
    topic once all of them are visible in metadata.

    >>> ensure_topics("127.0.0.1:9092", {"orders": 4})      # doctest: +SKIP
    {'orders': 4}
    """
    if not topics:
        return {}
    for name, count in topics.items():
        if not name or int(count) < 1:
            raise ValueError(f"topic {name!r}: partition count must be >= 1, got {count}")
    admin = admin_client(bootstrap_servers, client_config)
    existing = _metadata_partitions(admin, timeout)
    for name, count in topics.items():
        if name in existing and existing[name] != int(count):
            logger.warning(
                "topic %r exists with %s, %d requested; keeping it as it is",
                name,
                partitions_text(existing[name]),
                count,
            )
    missing = [name for name in topics if name not in existing]
    if missing:
        new_topics = [
            NewTopic(
                name,
                num_partitions=int(topics[name]),
                replication_factor=replication_factor,
                config=dict(config or {}),
            )
            for name in missing
        ]
        futures = admin.create_topics(
            new_topics, operation_timeout=timeout, request_timeout=timeout
        )
        for name, future in futures.items():
            try:
                future.result(timeout)
                # at debug: the callers that create topics for a user say so in their own words
                logger.debug("created topic %r (%s)", name, partitions_text(int(topics[name])))
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                raise KafkaAdminError(f"could not create topic {name!r}: {exc}") from exc
    deadline = time.monotonic() + timeout
    while True:
        existing = _metadata_partitions(admin, timeout)
        absent = [name for name in topics if existing.get(name, 0) <= 0]
        if not absent:
            return {name: existing[name] for name in topics}
        if time.monotonic() > deadline:
            raise KafkaAdminError(
                f"topic {absent[0]!r} was created but is not visible in metadata after {timeout}s"
            )
        time.sleep(0.05)


def delete_topics(
    bootstrap_servers: str,
    names: Iterable[str],
    *,
    missing_ok: bool = True,
    timeout: float = 30.0,
    client_config: Mapping[str, Any] | None = None,
) -> None:
    """Delete the named topics and wait until they are gone from metadata.

    With ``missing_ok=False`` a topic that does not exist raises :class:`TopicNotFoundError`.

    >>> delete_topics("127.0.0.1:9092", ["scratch"])          # doctest: +SKIP
    """
    wanted = list(dict.fromkeys(names))
    if not wanted:
        return
    admin = admin_client(bootstrap_servers, client_config)
    existing = _metadata_partitions(admin, timeout)
    present = [name for name in wanted if name in existing]
    if not missing_ok:
        for name in wanted:
            if name not in existing:
                raise TopicNotFoundError(name, bootstrap_servers)
    if not present:
        return
    futures = admin.delete_topics(present, operation_timeout=timeout, request_timeout=timeout)
    for name, future in futures.items():
        try:
            future.result(timeout)
            logger.info("deleted topic %r", name)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if (
                missing_ok
                and isinstance(err, KafkaError)
                and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            ):
                continue
            raise KafkaAdminError(f"could not delete topic {name!r}: {exc}") from exc
    deadline = time.monotonic() + timeout
    while True:
        still = [name for name in present if name in _metadata_partitions(admin, timeout)]
        if not still:
            return
        if time.monotonic() > deadline:
            raise KafkaAdminError(f"topic {still[0]!r} still listed {timeout}s after deletion")
        time.sleep(0.05)
