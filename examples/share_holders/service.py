"""The share-holders microservice: Kafka, the streaming app on Spark, HTTP and weekly emails.

    python -m examples.share_holders.service serve       # everything, until Ctrl-C
    python -m examples.share_holders.service send-now    # this week's emails, once, then exit

(run from the repository root). Configuration comes from environment variables, see
:mod:`examples.share_holders.settings`; without ``STREAMTABLE_BOOTSTRAP_SERVERS`` ``serve``
starts an embedded development broker on ``STREAMTABLE_BROKER_PORT`` (9092).

``serve`` wires, in order: the broker (started or connected to), the topics ``share-holders``
and ``shares-ref-data`` (``SHARE_HOLDERS_PARTITIONS`` each, 2 by default; existing topics are
left as they are), the streams application (``build_topology`` of
``examples.share_holders.topology``), the HTTP API (uvicorn in a thread; docs at ``/docs``)
and the email scheduler. Each step is a function taking its dependencies, so tests and other
wirings can reuse them.

>>> service = start_service(Settings.from_env())          # doctest: +SKIP
>>> service.http.url                                      # doctest: +SKIP
'http://127.0.0.1:8000'
>>> service.stop()                                        # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .emails import (
    HOLDERS_STORE,
    POSITIONS_STORE,
    EmailScheduler,
    ReadableStore,
    SendReport,
    WeeklyEmailer,
    recipient_for_domain,
)
from .producer import POSITIONS_TOPIC, REF_DATA_TOPIC, ShareHoldersProducer
from .settings import Settings

log = logging.getLogger("share_holders.service")

__all__ = [
    "connect_broker",
    "create_topics",
    "streams_config",
    "build_streams_app",
    "store_task_count",
    "app_task_count",
    "open_stores",
    "build_emailer",
    "HttpServer",
    "Service",
    "start_service",
    "serve",
    "send_now",
    "main",
]


# -- the steps -------------------------------------------------------------------------------
def connect_broker(settings: Settings) -> tuple[str, Any]:
    """``(bootstrap servers, embedded broker or None)``: the configured Kafka, or else a new
    embedded development broker on ``settings.broker_port`` (0: any free port)."""
    if settings.bootstrap_servers:
        log.info("using Kafka at %s", settings.bootstrap_servers)
        return settings.bootstrap_servers, None
    from streamtable.kafka.broker import EmbeddedBroker

    broker = EmbeddedBroker(settings.broker_port or None).start()
    log.info("started an embedded development broker at %s", broker.bootstrap_servers)
    return broker.bootstrap_servers, broker


def create_topics(bootstrap_servers: str, partitions: int = 2) -> dict[str, int]:
    """Create ``share-holders`` and ``shares-ref-data`` if missing; returns their partition
    counts (existing topics keep theirs).

    >>> create_topics("127.0.0.1:9092")                     # doctest: +SKIP
    {'share-holders': 2, 'shares-ref-data': 2}
    """
    from streamtable.kafka.admin import ensure_topics

    return ensure_topics(bootstrap_servers, {POSITIONS_TOPIC: partitions,
                                             REF_DATA_TOPIC: partitions})


def streams_config(settings: Settings, bootstrap_servers: str) -> dict[str, Any]:
    """The streams application's settings (Kafka Streams' keys)."""
    return {
        "application.id": settings.application_id,
        "bootstrap.servers": bootstrap_servers,
        "state.dir": str(settings.state_dir),
    }


def build_streams_app(settings: Settings, bootstrap_servers: str, *,
                      development_broker: bool = False, topology: Any = None,
                      **app_kwargs: Any) -> Any:
    """The ``StreamsApp`` (not started) of ``topology`` (default: the share-holders topology
    for ``settings.us_exchanges``)."""
    from streamtable.runtime.spark.app import StreamsApp

    if topology is None:
        from .topology import build_topology

        topology = build_topology(us_exchanges=settings.us_exchanges)
    return StreamsApp(topology, config=streams_config(settings, bootstrap_servers),
                      development_broker=development_broker, **app_kwargs)


def store_task_count(topology: Any, application_id: str, source_partitions: Mapping[str, int],
                     store: str = HOLDERS_STORE) -> int:
    """How many tasks hold ``store``: the task count the runtime plans for its sub-topology.

    >>> store_task_count(topology, "share-holders",                  # doctest: +SKIP
    ...                  {"share-holders": 2, "shares-ref-data": 2})
    2
    """
    from streamtable.runtime.spark.plan import plan_query

    plan = plan_query(topology, application_id, source_partitions)
    for stage in plan.stages:
        if store in stage.queryable_stores:
            return int(stage.partitions)
    raise KeyError(f"no queryable store {store!r} in the topology")


def app_task_count(app: Any, bootstrap_servers: str, store: str = HOLDERS_STORE) -> int:
    """:func:`store_task_count` of a ``StreamsApp``, with partition counts read from Kafka."""
    from streamtable.kafka.admin import partition_counts

    counts = partition_counts(bootstrap_servers, app.topology.source_topics)
    return store_task_count(app.topology, app.application_id, counts, store)


def open_stores(source: Any) -> dict[str, ReadableStore]:
    """The two stores the API and the emailer read, from a ``StreamsApp`` (``app.store``) or a
    ``SqliteServingStore`` (``serving.view``)."""
    get: Callable[[str], ReadableStore] = getattr(source, "store", None) or source.view
    return {name: get(name) for name in (HOLDERS_STORE, POSITIONS_STORE)}


def build_emailer(settings: Settings, stores: Mapping[str, ReadableStore], task_count: int,
                  **kwargs: Any) -> WeeklyEmailer:
    """The weekly emailer of this worker (``settings.worker_index`` of ``worker_count``);
    ``kwargs`` go to :class:`WeeklyEmailer` (``clock``, ``ssl_context``, ...)."""
    kwargs.setdefault("recipient", recipient_for_domain(settings.recipient_domain))
    return WeeklyEmailer(
        stores[HOLDERS_STORE], stores[POSITIONS_STORE], settings.smtp, settings.send_log_path,
        task_count=task_count, worker_index=settings.worker_index,
        worker_count=settings.worker_count, timezone=settings.timezone, **kwargs,
    )


class HttpServer:
    """A uvicorn server in a background thread.

    >>> http = HttpServer(api, "127.0.0.1", 0).start()      # doctest: +SKIP
    >>> http.url                                            # doctest: +SKIP
    'http://127.0.0.1:41235'
    >>> http.stop()                                         # doctest: +SKIP
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 8000,
                 **config: Any) -> None:
        import uvicorn

        # the process's logging configuration, levels included: uvicorn's loggers inherit the
        # root's level (the service's --log-level), the demo quiets them to warnings
        config.setdefault("log_config", None)
        config.setdefault("log_level", None)
        self.host = host
        self._server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, **config))
        self._thread: threading.Thread | None = None
        self.port = port

    def start(self, timeout: float = 30.0) -> HttpServer:
        """Start serving; returns once the socket is listening."""
        self._thread = threading.Thread(target=self._server.run, name="http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"the HTTP server on {self.host}:{self.port} did not start "
                                   "(is the port in use?)")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the HTTP server did not start within {timeout}s")
            time.sleep(0.02)
        sockets = [s for server in self._server.servers for s in server.sockets]
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        log.info("HTTP API at %s (docs at %s/docs)", self.url, self.url)
        return self

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None


@dataclass
class Service:
    """A running service; :meth:`stop` stops what was started, in reverse order."""

    settings: Settings
    bootstrap_servers: str
    producer: ShareHoldersProducer
    app: Any
    http: HttpServer | None = None
    emailer: WeeklyEmailer | None = None
    scheduler: EmailScheduler | None = None
    broker: Any = None
    _stopped: bool = field(default=False, repr=False)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for name, step in (("scheduler", self.scheduler), ("http", self.http),
                           ("streams app", self.app)):
            if step is not None:
                try:
                    step.stop()
                except Exception:
                    log.exception("stopping the %s failed", name)
        self.producer.close()
        if self.broker is not None:
            self.broker.stop()
        log.info("share-holders service stopped")


def start_service(settings: Settings, *, topology: Any = None, with_http: bool = True,
                  with_scheduler: bool = True, **emailer_kwargs: Any) -> Service:
    """Start everything and return the running :class:`Service`."""
    from .api import create_api

    bootstrap, broker = connect_broker(settings)
    started: list[Any] = [broker] if broker is not None else []
    try:
        counts = create_topics(bootstrap, settings.partitions)
        log.info("topics: %s", counts)
        producer = ShareHoldersProducer(bootstrap)
        app = build_streams_app(settings, bootstrap, development_broker=broker is not None,
                                topology=topology)
        app.start()
        started.append(app)
        stores = open_stores(app)
        service = Service(settings, bootstrap, producer, app, broker=broker)
        if with_http:
            service.http = HttpServer(create_api(producer, stores), settings.http_host,
                                      settings.http_port).start()
            started.append(service.http)
        if with_scheduler:
            tasks = app_task_count(app, bootstrap)
            service.emailer = build_emailer(settings, stores, tasks, **emailer_kwargs)
            service.scheduler = EmailScheduler(
                service.emailer, settings.email_schedule, settings.timezone,
                retry_seconds=settings.email_retry_seconds,
                before_run=app.process_all_available,
            ).start()
        return service
    except BaseException:
        for step in reversed(started):
            try:
                step.stop()
            except Exception:
                log.exception("cleanup after a failed start failed")
        raise


def serve(settings: Settings, stop_event: threading.Event | None = None) -> int:
    """Run the service until SIGINT/SIGTERM (or ``stop_event``); 1 if the streams query died."""
    stop = stop_event or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    service = start_service(settings)
    code = 0
    try:
        while not stop.wait(0.5):
            if not service.app.is_running:
                log.error("the streams query stopped; shutting down")
                code = 1
                break
    finally:
        service.stop()
    return code


def send_now(settings: Settings, *, task_count: int | None = None,
             **emailer_kwargs: Any) -> SendReport:
    """Send this week's missing emails once, from the serving store the streaming app keeps in
    the state directory (no Spark here; FileNotFoundError when there is none).

    The task count is read from Kafka (``settings.bootstrap_servers``, else the embedded
    broker's port) unless given; when Kafka cannot be reached it falls back to
    ``settings.partitions``.

    >>> send_now(Settings.from_env(), task_count=2).sent               # doctest: +SKIP
    ['client1', 'client2']
    """
    from streamtable.serving.sqlite import SqliteServingStore

    path = settings.serving_db_path
    if not path.exists():
        raise FileNotFoundError(f"no serving store at {path}: start the service ('serve') with "
                                "the same STREAMTABLE_STATE_DIR first")
    stores = open_stores(SqliteServingStore(path))
    if task_count is None:
        task_count = _task_count_from_kafka(settings)
    emailer = build_emailer(settings, stores, task_count, **emailer_kwargs)
    return emailer.send_now()


def _task_count_from_kafka(settings: Settings) -> int:
    bootstrap = settings.bootstrap_servers or f"127.0.0.1:{settings.broker_port}"
    try:
        from streamtable.kafka.admin import partition_counts

        from .topology import build_topology

        topology = build_topology(us_exchanges=settings.us_exchanges)
        counts = partition_counts(bootstrap, topology.source_topics, timeout=5.0)
        return store_task_count(topology, settings.application_id, counts)
    except Exception as exc:
        log.warning("could not read the task count from Kafka at %s (%s); assuming %d",
                    bootstrap, exc, settings.partitions)
        return settings.partitions


# -- command line ----------------------------------------------------------------------------
def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """``serve`` or ``send-now``; settings from the environment (see ``settings.py``)."""
    parser = argparse.ArgumentParser(
        prog="python -m examples.share_holders.service",
        description="The share-holders service: HTTP API, streaming app and weekly emails. "
                    "Configured with environment variables (see examples/share_holders/"
                    "settings.py).",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ...")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="run the broker (unless configured), the streaming app, the "
                                 "HTTP API and the email schedule until interrupted")
    p = sub.add_parser("send-now", help="send this week's emails not sent yet, then exit "
                                        "(1 if some failed)")
    p.add_argument("--tasks", type=int, default=None,
                   help="task count of the us-share-holders store (default: from Kafka)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = Settings.from_env(env)
    except ValueError as exc:
        log.error("invalid configuration: %s", exc)
        return 2
    log.info("settings: %s", settings)
    if args.command == "serve":
        return serve(settings)
    try:
        report = send_now(settings, task_count=args.tasks)
    except FileNotFoundError as exc:
        log.error("%s", exc)
        return 2
    log.info("week %s: sent %d, sent before %d, failed %d", report.week, len(report.sent),
             len(report.already_sent), len(report.failed))
    return 0 if report.complete else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
