"""The Kafka :class:`~streamtable.engine.ports.OutputWriter`: a batch's records produced to
Kafka exactly once per batch id and writer (see ``kafka/sink.py`` for the header and marker
scheme).

It is ``distributed``: the Spark runtime ships it to the executors, and each task produces its
own records there, as writer ``<sub-topology>-<task>``; the batch markers then live on the
application's shared storage (``commit_dir``, a path or URL every executor can reach)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamtable.records import OutputRecord


class KafkaOutput:
    """Produces a batch's records to Kafka exactly once per batch id.

    >>> out = KafkaOutput("localhost:9092", "app", "/tmp/app/sink")  # doctest: +SKIP
    >>> out.write(0, [("counts", b'"a"', b"1", 0, [], None)])           # doctest: +SKIP
    """

    distributed = True

    def __init__(self, bootstrap_servers: str, app_id: str, commit_dir: str,
                 producer_config: Mapping[str, Any] | None = None,
                 client_config: Mapping[str, Any] | None = None,
                 flush_timeout_s: float = 300.0) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.app_id = app_id
        self.commit_dir = commit_dir
        self.producer_config = dict(producer_config or {})
        # every client's settings (security...): the producers and the tail scans get them
        self.client_config = dict(client_config or {})
        # how long a batch's records may wait for an unreachable Kafka before the batch fails
        self.flush_timeout_s = flush_timeout_s

    def __repr__(self) -> str:
        from streamtable.config import redacted

        return (f"KafkaOutput({self.bootstrap_servers!r}, {self.app_id!r}, {self.commit_dir!r}, "
                f"client_config={redacted(self.client_config)!r})")

    def warm_up(self, timeout: float = 5.0) -> None:
        """Connect this process's producer ahead of its first batch (an idempotent producer's
        first connection takes about a second); the first batch connects again and reports
        any error."""
        from streamtable.kafka.sink import warm_up_producer

        try:
            warm_up_producer(self.bootstrap_servers, self.producer_config, timeout=timeout,
                             client_config=self.client_config)
        except Exception as e:
            logging.getLogger(__name__).debug("producer warm-up failed: %s", e)

    def write(self, batch_id: int, records: list[OutputRecord], writer: str = "0") -> None:
        from streamtable.kafka.sink import produce_rows

        produce_rows(self.bootstrap_servers, records, batch_id, self.app_id,
                     commit_dir=self.commit_dir, writer_id=writer,
                     producer_config=self.producer_config, client_config=self.client_config,
                     flush_timeout=self.flush_timeout_s)
