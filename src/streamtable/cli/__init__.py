"""Command line: ``streamtable run | describe | reset | query | serve | config | broker |
registry``, and ``topics | produce | consume`` (in ``topics.py`` and ``records.py``).

An application file defines ``build_topology()`` (or a ``topology`` object) and may define a
``config`` dict of settings (Kafka Streams keys: ``application.id``, ``bootstrap.servers``...).

    streamtable broker --port 9092                  # a development broker on localhost
    streamtable registry --port 8081                # a development Schema Registry
    streamtable topics create lines                 # then: produce, consume (records.py)
    streamtable run app.py --bootstrap-servers localhost:9092
    streamtable query app.py us-share-holders client1
    streamtable serve app.py --http-port 8080       # HTTP queries, without running the app
    streamtable reset app.py                        # reprocess from the beginning next run
    streamtable reset app.py --store counts         # rebuild one store at the next start

The queryable stores are served from SQLite in the state directory, or from where the setting
``serving.url`` (``--serving-url``) says: a ``postgresql://`` URL lets several ``serve`` processes
answer from one database while the application restarts or moves.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import shutil
import signal
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from streamtable.config import ConfigError, StreamsConfig
from streamtable.errors import StreamsError
from streamtable.serving import configured_serving_store
from streamtable.topology.graph import Topology

if TYPE_CHECKING:
    from streamtable.serving.base import ServingStore
    from streamtable.serving.view import StoreView

log = logging.getLogger("streamtable")

#: environment variables giving the default of ``--bootstrap-servers`` (over an application's
#: own setting) and of ``streamtable broker --port``
BOOTSTRAP_ENV = "STREAMTABLE_BOOTSTRAP_SERVERS"
BROKER_PORT_ENV = "STREAMTABLE_BROKER_PORT"
#: environment variables giving the default of ``--schema-registry`` (produce, consume) and of
#: ``streamtable registry --port``
REGISTRY_ENV = "STREAMTABLE_SCHEMA_REGISTRY"
REGISTRY_PORT_ENV = "STREAMTABLE_REGISTRY_PORT"


def load_app(path: str) -> ModuleType:
    """Import an application file by path."""
    file = Path(path)
    if not file.exists():
        raise SystemExit(f"streamtable: no such application file: {path}")
    spec = importlib.util.spec_from_file_location(file.stem.replace("-", "_"), file)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    try:
        from streamtable.runtime.spark.shipping import ship_by_value
    except ImportError:  # the core alone (no PySpark): nothing is shipped to workers
        return module
    # Spark's workers cannot import a module loaded from a path: ship its functions by value.
    ship_by_value(module)
    return module


def app_topology(module: ModuleType) -> Topology:
    if hasattr(module, "build_topology"):
        return module.build_topology()
    topo = getattr(module, "topology", None)
    if isinstance(topo, Topology):
        return topo
    raise SystemExit(
        f"streamtable: {module.__file__} defines neither build_topology() nor a topology"
    )


def app_config(module: ModuleType, args: argparse.Namespace) -> dict[str, Any]:
    """The module's ``config`` dict, overridden by command-line options."""
    config: dict[str, Any] = dict(getattr(module, "config", {}) or {})
    for item in getattr(args, "config", None) or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"streamtable: --config expects key=value, got {item!r}")
        config[key.strip()] = value.strip()
    for opt, key in (("bootstrap_servers", "bootstrap.servers"),
                     ("application_id", "application.id"), ("state_dir", "state.dir"),
                     ("serving_url", "serving.url")):
        value = getattr(args, opt, None)
        if value:
            config[key] = value
    return config


def _settings(module: ModuleType, args: argparse.Namespace) -> dict[str, Any]:
    """:func:`app_config` with the application id defaulting to the file name."""
    config = app_config(module, args)
    config.setdefault("application.id", Path(args.app).stem.replace("_", "-"))
    return config


def _queryable(topology: Topology) -> list[str]:
    return sorted(name for name, spec in topology.stores.items() if spec.queryable)


def _streams_app(args: argparse.Namespace) -> Any:
    from streamtable.runtime.spark import StreamsApp

    module = load_app(args.app)
    settings = _settings(module, args)
    if getattr(args, "new_state_from", None):
        settings["upgrade.new.state.from"] = args.new_state_from
    app = StreamsApp(app_topology(module), config=settings,
                     master=getattr(args, "master", None),
                     development_broker=getattr(args, "development_broker", False),
                     verbose=getattr(args, "verbose", False))
    app.app_file = args.app
    return app


def _stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT (Ctrl-C)."""
    stop = threading.Event()

    def _stop(*_: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    return stop


def _input_topics(app: Any, create: bool, partitions: int) -> None:
    """Create the application's missing input topics, or stop (before Spark starts) with one
    line naming them and the command that creates them."""
    from streamtable.cli.topics import require_topics
    from streamtable.kafka.admin import ensure_topics, list_topic_names

    bootstrap = app.config["bootstrap.servers"]
    client = app.config.kafka_client_config
    sources = app.topology.source_topics
    if create:
        from streamtable.kafka.admin import partitions_text

        existing = list_topic_names(bootstrap, client_config=client)
        missing = [t for t in sources if t not in existing]
        ensure_topics(bootstrap, {t: partitions for t in missing}, client_config=client)
        if missing:
            log.info("created the input topic%s %s (%s each)", "s" if missing[1:] else "",
                     ", ".join(missing), partitions_text(partitions))
        return
    require_topics(bootstrap, sources, " (or run with --create-topics)", client_config=client)


def cmd_run(args: argparse.Namespace) -> int:
    from streamtable.kafka.admin import check_reachable
    from streamtable.logs import LOG_FILE_NAME, ProgressLine, log_to_file

    token = None
    if args.http_port is not None:
        from streamtable.serving.http import query_token

        token = query_token(args.http_host, args.http_token)  # refuse before starting anything
    app = _streams_app(args)
    log_to_file(app.app_dir / LOG_FILE_NAME)
    # Kafka reachable, topics there: said in a sentence, before Spark starts
    check_reachable(app.config["bootstrap.servers"])
    _input_topics(app, args.create_topics, args.partitions)
    app.prepare()
    app.hold_lease(take_over=args.take_over)  # a second run is refused before Spark starts
    app.spark  # noqa: B018 - Spark installs its own SIGINT handler: ours must come after it
    stop = _stop_on_signals()
    if args.until_caught_up:
        app.start(available_now=True, take_over=args.take_over)
        # on a terminal one updating line; otherwise the log line per batch
        progress = ProgressLine(app.metrics, sys.stderr) if sys.stderr.isatty() else None
        while app.is_running and not stop.is_set():
            stop.wait(0.5)
            if progress is not None:
                progress.update()
        if progress is not None:
            progress.done()
        interrupted = stop.is_set() and app.is_running
        app.stop()
        app.raise_if_failed()
        log.info("stopped before catching up" if interrupted else "caught up; stopped")
        return 0
    app.start(take_over=args.take_over)
    server = None
    if args.http_port is not None:
        from streamtable.serving.http import serve_queries

        server = serve_queries(app, args.http_host, args.http_port, token)
        log.info("interactive queries at %s/stores", server.url)
    while not stop.is_set():
        if not app.is_running:
            if server is not None:
                server.stop()
            app.stop()
            app.raise_if_failed()
            log.error("the query stopped")
            return 1
        stop.wait(0.5)
    log.info("stopping %s", app.application_id)
    if server is not None:
        server.stop()
    app.stop()
    return 0


def _reset_stores(args: argparse.Namespace) -> int:
    """``reset --store NAME``: the next start rebuilds just these stores from the earliest
    offsets of their input topics (see docs/upgrading.md)."""
    app = _streams_app(args)
    lease = _lease_for_reset(app.config)
    try:
        return _forget_stores(app, args)
    finally:
        lease.release()


def _forget_stores(app: Any, args: argparse.Namespace) -> int:
    from streamtable.runtime.spark.upgrade import read_fingerprint, write_fingerprint

    kept = read_fingerprint(app)
    if kept is None:
        raise SystemExit(f"streamtable: {app.application_id} has no state to reset stores of "
                         f"(it has not run, or not with --state-dir/--config state.location as "
                         f"given)")
    if "state" not in kept:
        raise SystemExit("streamtable: this state was written by an older streamtable: start "
                         f"the application once ({' '.join(['streamtable run', args.app])}) "
                         "before resetting single stores, or reset it whole")
    unknown = [s for s in args.store if s not in kept["state"]]
    if unknown:
        raise SystemExit(f"streamtable: no store {', '.join(map(repr, unknown))} in the state "
                         f"of {app.application_id}; its stores: {sorted(kept['state'])}")
    for name in args.store:
        del kept["state"][name]
    kept["rebuild"] = sorted(set(kept.get("rebuild", [])) | set(args.store))
    write_fingerprint(app.shared_location, kept)
    log.info("the next start of %s rebuilds %s from the earliest offsets of %s input topics; "
             "the other stores keep their state", app.application_id, ", ".join(args.store),
             "their" if len(args.store) > 1 else "its")
    return 0


def _lease_for_reset(config: StreamsConfig) -> Any:
    """The application's lease, held while its state is reset: a run writing meanwhile would
    lose the state under it, or write it back. Refused, naming the run, while one holds it."""
    from streamtable.errors import LeaseHeldError
    from streamtable.runtime.spark.app import application_location
    from streamtable.storage import storage_at
    from streamtable.storage.lease import Lease

    lease = Lease(storage_at(application_location(config)), config.application_id,
                  timeout_ms=int(config["lease.timeout.ms"]))
    try:
        lease.acquire()
    except LeaseHeldError as e:
        raise SystemExit(f"streamtable: {config.application_id} is running ({e.holder}): stop "
                         "it before resetting its state; nothing was reset") from None
    return lease


def cmd_reset(args: argparse.Namespace) -> int:
    if args.store:
        return _reset_stores(args)
    config = StreamsConfig(_settings(load_app(args.app), args))
    target = Path(config["state.dir"]) / config.application_id
    if target.exists() or config.get("state.location"):
        # the lease lives in the state it resets: removed with it, not released
        _lease_for_reset(config)
    if target.exists():
        shutil.rmtree(target)
        log.info("removed %s: the next run reprocesses the input topics from the start", target)
    else:
        log.info("nothing to reset at %s", target)
    location = config.get("state.location")
    if location:
        from streamtable.storage import join, storage_at

        storage_at(join(location, config.application_id)).clear()
        log.info("removed the task state of %s under %s (state.location)",
                 config.application_id, location)
    if config.get("serving.url"):
        # batch ids start again from 0: a serving store elsewhere must forget the old ones
        configured_serving_store(config).reset()
        log.info("emptied the serving store of %s (serving.url)", config.application_id)
    return 0


def _served_state(config: StreamsConfig, app: str) -> ServingStore:
    """The application's serving store; raises StreamsError saying the application has not run
    yet when it holds no batch (without creating a SQLite file where there is none)."""
    path = Path(config["state.dir"]) / config.application_id / "serving.db"
    # a serving.url may hold a password: named by its setting, not shown
    where = "in its serving store (serving.url)" if config.get("serving.url") else f"at {path}"
    not_run = StreamsError(
        f"the application {config.application_id!r} has not run yet: there is no state "
        f"{where}; run it first (streamtable run {app}), with the same --state-dir or "
        "--serving-url")
    if not config.get("serving.url") and not path.exists():
        raise not_run
    serving = configured_serving_store(config)
    if serving.last_batch() < 0:
        raise not_run
    return serving


def cmd_query(args: argparse.Namespace) -> int:
    from streamtable.state.versioned import ReadOnlyVersionedKeyValueStore

    module = load_app(args.app)
    topology = app_topology(module)
    names = _queryable(topology)
    if args.store not in names:
        raise SystemExit(f"streamtable: no queryable store {args.store!r}; "
                         f"queryable stores: {names}")
    config = StreamsConfig(_settings(module, args))
    view = _served_state(config, args.app).view(args.store, topology.stores[args.store].kind)
    if args.key is None:
        for k, v in view.all():
            print(json.dumps([k, v], default=_jsonable))
        return 0
    key: Any = args.key
    try:
        key = json.loads(args.key)
    except ValueError:
        pass
    if args.as_of is not None:
        if not isinstance(view, ReadOnlyVersionedKeyValueStore):
            raise StreamsError(f"store {args.store!r} is not a versioned store: --as-of reads "
                               "need one")
        value = view.get(key, as_of=args.as_of)
        if value is None:
            raise StreamsError(f"no key {key!r} in store {args.store!r} of "
                               f"{config.application_id} as of {args.as_of}")
        print(json.dumps(value, default=_jsonable))
        return 0
    value = view.get(key)
    if value is not None:
        print(json.dumps(value, default=_jsonable))
        return 0
    from streamtable.windowing import Windowed

    # a windowed store's keys are Windowed(key, start, end): every window of the key
    windows = [(k, v) for k, v in view.all() if isinstance(k, Windowed) and k.key == key]
    for k, v in windows:
        print(json.dumps([k, v], default=_jsonable))
    if not windows:
        raise StreamsError(f"no key {key!r} in store {args.store!r} of {config.application_id}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Answer interactive queries over HTTP from the serving store, without running the
    application: such processes hold no state, any number can share one serving store."""
    from streamtable.errors import StoreNotReadyError
    from streamtable.serving.http import QueryServer, create_query_api

    module = load_app(args.app)
    topology = app_topology(module)
    names = _queryable(topology)
    config = StreamsConfig(_settings(module, args))
    serving = configured_serving_store(config)

    def views(name: str) -> StoreView:
        # before the application's first batch an absent key is no answer: 503 "no state yet"
        if serving.last_batch() < 0:
            raise StoreNotReadyError(config.application_id, name)
        # the views are StoreViews; create_query_api's hint names that class
        return cast("StoreView", serving.view(name, topology.stores[name].kind))

    server = QueryServer(create_query_api(views, names), args.http_host, args.http_port,
                         args.http_token).start()
    log.info("interactive queries of %s at %s/stores, from its %s", config.application_id,
             server.url, type(serving).__name__)
    stop = _stop_on_signals()
    stop.wait()
    log.info("stopping the query server")
    server.stop()
    close = getattr(serving, "close", None)
    if close is not None:
        close()
    return 0


def _jsonable(obj: Any) -> Any:
    from streamtable.cli.records import jsonable

    return jsonable(obj)


def cmd_broker(args: argparse.Namespace) -> int:
    from streamtable.kafka.broker import run_broker_forever

    run_broker_forever(args.port, host=args.host, storage_engine=args.storage)
    return 0


def cmd_registry(args: argparse.Namespace) -> int:
    from streamtable.kafka.registry import run_registry_forever

    run_registry_forever(args.port, host=args.host)
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    from streamtable.cli.describe import cmd_describe as describe

    return describe(args)


_TOKEN_HELP = ("bearer token the query server requires (default: $STREAMTABLE_HTTP_TOKEN; "
               "required when --http-host is not loopback; prefer the variable: a command "
               "line is visible to other users)")


def cmd_config(args: argparse.Namespace) -> int:
    from streamtable.config import configuration_page

    print(configuration_page(), end="")
    return 0


def cmd_jvm_archive(args: argparse.Namespace) -> int:
    from streamtable.runtime.spark.process.jvm_archive import archive_path
    from streamtable.runtime.spark.process.jvm_training import build

    path = archive_path()
    if args.if_missing and path is not None and path.exists():
        print(path)
        return 0
    log.info("making the class archive of Spark's JVM (a training run of ~20 s)")
    print(build(path))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="streamtable", description="Kafka Streams' stream-table model on Spark"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("describe", help="print an application's topology, or what an upgrade "
                                        "keeps (--diff)")
    p.add_argument("app", nargs="?", help="path to the application file")
    p.add_argument("--diff", nargs=2, metavar=("OLD", "NEW"),
                   help="what deploying NEW over the state of OLD keeps, rebuilds and drops "
                        "(exit code 1 when its start would be refused)")
    p.add_argument("--format", choices=("text", "mermaid", "dot"), default="text",
                   help="text (Kafka Streams' description, topics, serdes, stores), or a "
                        "Mermaid or Graphviz diagram")
    p.add_argument("--application-id", help="application.id (default: the file name)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="any setting")
    p.set_defaults(func=cmd_describe)

    def app_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("app", help="path to the application file")
        p.add_argument("--bootstrap-servers", default=os.environ.get(BOOTSTRAP_ENV) or None,
                       help=f"Kafka bootstrap servers (default: ${BOOTSTRAP_ENV}, else the "
                            "application's bootstrap.servers)")
        p.add_argument("--application-id", help="application.id (default: the file name)")
        p.add_argument("--state-dir", help="state directory (default: .streamtable)")
        p.add_argument("--config", action="append", metavar="KEY=VALUE",
                       help="any setting, e.g. commit.interval.ms=500 (repeatable)")
        p.add_argument("--serving-url", metavar="URL",
                       help="the serving store of the queryable stores (config key serving.url):"
                            " postgresql://user:password@host:5432/db (several applications and "
                            "query processes can share one database) or a SQLite file; default: "
                            "SQLite in the state directory")

    p = sub.add_parser("run", help="run an application on Spark until Ctrl-C")
    app_options(p)
    p.add_argument("--master", help="Spark master URL (default: local[*])")
    p.add_argument("--until-caught-up", action="store_true",
                   help="process what the input topics hold now, then exit")
    p.add_argument("--development-broker", action="store_true",
                   help="the input broker is the embedded development broker")
    p.add_argument("--http-port", type=int, help="serve interactive queries over HTTP here")
    p.add_argument("--http-host", default="127.0.0.1", help="address of the query server")
    p.add_argument("--http-token", help=_TOKEN_HELP)
    p.add_argument("--take-over", action="store_true",
                   help="if another run of the application is running, fence it (it stops at "
                        "its next commit) and go on in its place; without it, the start is "
                        "refused")
    p.add_argument("--create-topics", action="store_true",
                   help="create the application's input topics that do not exist")
    p.add_argument("--new-state-from", choices=("earliest", "latest"),
                   help="where stores and outputs a new version adds start (setting "
                        "upgrade.new.state.from; default earliest)")
    p.add_argument("--partitions", type=int, default=1,
                   help="partitions of the input topics --create-topics creates (default: 1)")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("reset", help="forget an application's progress and state, or (--store) "
                                     "one store's state")
    app_options(p)
    p.add_argument("--store", action="append", metavar="NAME", default=[],
                   help="rebuild just this store (repeatable) at the next start, from the "
                        "earliest offsets of its input topics; the others keep their state")
    p.set_defaults(func=cmd_reset)
    p = sub.add_parser("query", help="read a queryable store of an application")
    app_options(p)
    p.add_argument("store", help="store name")
    p.add_argument("key", nargs="?", help="a key (JSON or plain text); all entries if omitted")
    p.add_argument("--as-of", type=int, metavar="TIMESTAMP",
                   help="a versioned store: the key's value at this time (epoch ms)")
    p.set_defaults(func=cmd_query)
    p = sub.add_parser("serve", help="answer interactive queries over HTTP from the serving store"
                                     " (serving.url) until Ctrl-C, without running the application")
    app_options(p)
    p.add_argument("--http-port", type=int, default=8080, help="port of the query server")
    p.add_argument("--http-host", default="127.0.0.1", help="address of the query server")
    p.add_argument("--http-token", help=_TOKEN_HELP)
    p.set_defaults(func=cmd_serve)
    p = sub.add_parser("config", help="print every setting (key, default, values, meaning) as "
                                      "Markdown")
    p.set_defaults(func=cmd_config)
    p = sub.add_parser("broker", help="run the embedded development broker")
    p.add_argument("--port", type=int, default=int(os.environ.get(BROKER_PORT_ENV) or 9092),
                   help=f"port (default: ${BROKER_PORT_ENV}, else 9092)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--storage", default="memory://tansu/", metavar="URL",
                   help="where the broker keeps its topics: memory://tansu/ (the default: gone "
                        "when it stops) or s3://bucket/ (kept across restarts; AWS_* variables "
                        "give the credentials and the endpoint)")
    p.set_defaults(func=cmd_broker)
    p = sub.add_parser("registry", help="run the development Schema Registry (in memory)")
    p.add_argument("--port", type=int, default=int(os.environ.get(REGISTRY_PORT_ENV) or 8081),
                   help=f"port (default: ${REGISTRY_PORT_ENV}, else 8081)")
    p.add_argument("--host", default="127.0.0.1")
    p.set_defaults(func=cmd_registry)
    p = sub.add_parser("jvm-archive", help="make the class archive that starts Spark's JVM ~2 s "
                                           "faster (once per Java and Spark version)")
    p.add_argument("--if-missing", action="store_true", help="only when there is none yet")
    p.set_defaults(func=cmd_jvm_archive)
    from streamtable.cli import records, topics

    topics.add_parsers(sub)
    records.add_parsers(sub)
    args = parser.parse_args(argv)
    from streamtable.logs import configure_logging

    configure_logging(args.verbose)
    try:
        return int(args.func(args))
    except ConfigError as e:
        print(f"streamtable: {e}", file=sys.stderr)
        return 2
    except StreamsError as e:
        print(f"streamtable: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
