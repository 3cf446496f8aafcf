"""Interactive queries over HTTP: every queryable store of a running application.

    GET /stores                         the queryable stores
    GET /stores/{store}?from=&to=       all entries (or a key range), in key order
    GET /stores/{store}/keys/{key}?as_of=   one entry (404 when absent; on a window or session
                                        store the 404 names the URL of the key's windows); on
                                        a versioned store with its timestamp and valid_to, and
                                        with as_of (epoch ms) the version valid then
    GET /stores/{store}/versions/{key}?from=&to=  a versioned store: the key's versions valid
                                        at some time in [from, to] (either bound optional),
                                        oldest first
    GET /stores/{store}/windows/{key}?from=&to=   a window store: the key's windows starting
                                        in [from, to] (either bound optional), in start order
    GET /stores/{store}/windows?from=&to=         every key's windows starting in [from, to]
    GET /stores/{store}/sessions/{key}?earliest_end=&latest_start=
                                        a session store: the key's sessions (those ending at
                                        or after earliest_end and starting at or before
                                        latest_start)
    GET /health                         200 {"status": "running", ...} while the application
                                        runs; 503 with the failure's message once it died
    GET /metrics                        Prometheus text format (see serving.metrics)

Windows and sessions come as ``{"key", "start", "end", "value"}`` objects, versions as
``{"value", "timestamp", "valid_to"}`` (``valid_to`` null for a key's latest version).

Once the application's query has died, the store endpoints answer 503 with its error too: a
dead application must not look like an empty one. Before the application has served its first
micro-batch they answer 503 "no state yet" (a key absent then is not a key that does not
exist); ``/health`` says ``"ready": false`` until then.

Keys in URLs are JSON when they parse as JSON (``42``, ``"a"``), plain text otherwise. Values are
returned as JSON (sets as sorted lists). Start it with ``streamtable run app.py --http-port 8080``
or :func:`serve_queries`.

The server listens on loopback (``127.0.0.1``) unless told otherwise. On any other address it
requires a bearer token (``--http-token`` or the environment variable ``STREAMTABLE_HTTP_TOKEN``)
and refuses to start without one; a request without ``Authorization: Bearer <token>`` gets 401.

>>> api = create_query_api({"counts": view})                      # doctest: +SKIP
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from streamtable.config import ConfigError
from streamtable.errors import ApplicationFailedError, StoreNotReadyError
from streamtable.serving.sqlite import StoreView
from streamtable.state.versioned import ReadOnlyVersionedKeyValueStore, VersionedRecord
from streamtable.state.windowed import MAX_TIME, MIN_TIME, SessionQueries, Windowed, WindowQueries

TOKEN_ENV = "STREAMTABLE_HTTP_TOKEN"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (only this machine can connect).

    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
    (True, True, False)
    """
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name other than localhost may resolve anywhere
        return False


def query_token(host: str, token: str | None = None) -> str | None:
    """The bearer token the query server on ``host`` requires: ``token``, else the environment
    variable ``STREAMTABLE_HTTP_TOKEN``; ``None`` (no authentication) only on loopback.

    >>> query_token("::1", "s3cret"), query_token("0.0.0.0", "s3cret")
    ('s3cret', 's3cret')
    >>> query_token("0.0.0.0", "")                          # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ConfigError: the query server on 0.0.0.0 (not loopback) needs a bearer token: ...
    >>> query_token("0.0.0.0", "s3cret")
    's3cret'
    """
    token = token or os.environ.get(TOKEN_ENV) or None
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"the query server on {host} (not loopback) needs a bearer token: set --http-token "
            f"or the environment variable {TOKEN_ENV}")
    return token


class BearerAuth:
    """ASGI middleware: every request must carry ``Authorization: Bearer <token>`` (compared in
    constant time), else 401 with ``WWW-Authenticate: Bearer``.

    >>> api = BearerAuth(create_query_api({}), "s3cret")             # doctest: +SKIP
    """

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = token.encode()

    def __repr__(self) -> str:
        return f"BearerAuth({self.app!r}, token='********')"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            scheme, _, credentials = given.partition(b" ")
            # the scheme is case-insensitive (RFC 7235); the token is compared in constant time
            if not (hmac.compare_digest(credentials.strip(), self._expected)
                    and scheme.lower() == b"bearer"):
                body = b'{"detail":"missing or wrong bearer token"}'
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="streamtable"')]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _parse_key(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        try:
            return sorted(value)
        except TypeError:
            return list(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {f: _jsonable(getattr(value, f)) for f in value.__dataclass_fields__}
    return value


def create_query_api(stores: Mapping[str, StoreView] | Callable[[str], StoreView],
                     names: list[str] | None = None, *,
                     health: Callable[[], tuple[bool, dict[str, Any]]] | None = None,
                     metrics: Callable[[], str] | None = None) -> Any:
    """A FastAPI app answering queries of ``stores`` (a mapping, or ``app.store`` with the
    store ``names``); ``health`` (``StreamsApp.health``) adds ``/health`` and ``metrics``
    (the text of ``/metrics``) adds ``/metrics``."""
    from fastapi import FastAPI, HTTPException, Query, Request
    from fastapi.responses import JSONResponse, PlainTextResponse

    if callable(stores) and not isinstance(stores, Mapping):
        lookup = stores
        store_names = list(names or [])
    else:
        mapping = dict(stores)
        lookup = mapping.__getitem__
        store_names = sorted(mapping)

    api = FastAPI(title="streamtable interactive queries")
    detail = {"application/json": {"schema": {
        "type": "object", "properties": {"detail": {"type": "string"}}}}}
    not_found: dict[int | str, dict[str, Any]] = {404: {
        "description": "no such store (or key)", "content": detail}}
    # the window and session queries: also 400 for a store of another kind
    not_windowed: dict[int | str, dict[str, Any]] = {**not_found, 400: {
        "description": "the store is not a window (or session) store", "content": detail}}

    @api.exception_handler(ApplicationFailedError)
    async def failed(request: Request, exc: ApplicationFailedError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503)

    @api.exception_handler(StoreNotReadyError)
    async def not_ready(request: Request, exc: StoreNotReadyError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503)

    if health is not None:
        @api.get("/health")
        def get_health() -> JSONResponse:
            healthy, details = health()
            return JSONResponse(details, status_code=200 if healthy else 503)

    if metrics is not None:
        from streamtable.serving.metrics import CONTENT_TYPE

        @api.get("/metrics")
        def get_metrics() -> PlainTextResponse:
            return PlainTextResponse(metrics(), media_type=CONTENT_TYPE)

    def view(store: str) -> StoreView:
        if store not in store_names:
            raise HTTPException(404, f"no queryable store {store!r}; stores: {store_names}")
        return lookup(store)

    @api.get("/stores")
    def list_stores() -> list[str]:
        return store_names

    @api.get("/stores/{store}", responses=not_found)
    def all_entries(store: str, from_: str | None = Query(None, alias="from"),
                    to: str | None = None) -> list[dict[str, Any]]:
        v = view(store)
        items = v.all() if from_ is None and to is None else v.range(
            None if from_ is None else _parse_key(from_), None if to is None else _parse_key(to))
        return [{"key": _jsonable(k), "value": _jsonable(val)} for k, val in items]

    not_versioned: dict[int | str, dict[str, Any]] = {**not_found, 400: {
        "description": "as_of on a store that is not versioned", "content": detail}}

    @api.get("/stores/{store}/keys/{key}", responses=not_versioned)
    def get(store: str, key: str, as_of: int | None = None) -> dict[str, Any]:
        parsed = _parse_key(key)
        v = view(store)
        if isinstance(v, ReadOnlyVersionedKeyValueStore):
            found = v.get_record(parsed, as_of)
            if found is None:
                when = "" if as_of is None else f" as of {as_of}"
                raise HTTPException(404, f"no key {parsed!r} in store {store!r}{when}")
            return {"key": _jsonable(parsed), **_version(found)}
        if as_of is not None:
            raise HTTPException(400, f"store {store!r} is not a versioned store: it has no "
                                "as_of reads")
        value = v.get(parsed)
        if value is None:
            raise HTTPException(404, f"no key {parsed!r} in store {store!r}"
                                + _windows_hint(v, store, parsed, key))
        return {"key": _jsonable(parsed), "value": _jsonable(value)}

    @api.get("/stores/{store}/versions/{key}", responses=not_versioned)
    def key_versions(store: str, key: str, from_: int | None = Query(None, alias="from"),
                     to: int | None = None) -> list[dict[str, Any]]:
        v = view(store)
        if not isinstance(v, ReadOnlyVersionedKeyValueStore):
            raise HTTPException(400, f"store {store!r} is not a versioned store")
        return [_version(r) for r in v.versions(_parse_key(key), from_, to)]

    def windows_of(store: str) -> WindowQueries:
        v = view(store)
        if not isinstance(v, WindowQueries):
            raise HTTPException(400, f"store {store!r} is not a window store")
        return v

    @api.get("/stores/{store}/windows", responses=not_windowed)
    def all_windows(store: str, from_: int | None = Query(None, alias="from"),
                    to: int | None = None) -> list[dict[str, Any]]:
        return _windows(windows_of(store).fetch_all(from_, to))

    @api.get("/stores/{store}/windows/{key}", responses=not_windowed)
    def key_windows(store: str, key: str, from_: int | None = Query(None, alias="from"),
                    to: int | None = None) -> list[dict[str, Any]]:
        return _windows(windows_of(store).fetch_windows(_parse_key(key), from_, to))

    @api.get("/stores/{store}/sessions/{key}", responses=not_windowed)
    def key_sessions(store: str, key: str, earliest_end: int | None = None,
                     latest_start: int | None = None) -> list[dict[str, Any]]:
        v = view(store)
        if not isinstance(v, SessionQueries):
            raise HTTPException(400, f"store {store!r} is not a session store")
        return _windows(v.find_sessions(
            _parse_key(key), MIN_TIME if earliest_end is None else earliest_end,
            MAX_TIME if latest_start is None else latest_start))

    return api


def _windows_hint(view: StoreView, store: str, key: Any, text: str) -> str:
    """What a key lookup in a window or session store should have asked for: its keys are
    windows, so a plain key is never one; where the key has windows, the URL that lists them."""
    from urllib.parse import quote

    if isinstance(view, SessionQueries):
        kind, found = "session", bool(view.fetch(key))
    elif isinstance(view, WindowQueries):
        kind, found = "window", bool(view.fetch_windows(key))
    else:
        return ""
    if not found:
        return f" (a {kind} store: no {kind}s of it either)"
    return (f" (a {kind} store: its keys are {kind}s; the {kind}s of {key!r} are at "
            f"/stores/{quote(store)}/{kind}s/{quote(text)})")


def _version(record: VersionedRecord) -> dict[str, Any]:
    return {"value": _jsonable(record.value), "timestamp": record.timestamp,
            "valid_to": record.valid_to}


def _windows(found: list[tuple[Windowed, Any]]) -> list[dict[str, Any]]:
    return [{"key": _jsonable(w.key), "start": w.start, "end": w.end, "value": _jsonable(v)}
            for w, v in found]


class QueryServer:
    """The query API served by uvicorn in a background thread; off loopback only with a bearer
    token (see :func:`query_token`).

    >>> QueryServer(api, "0.0.0.0", 8080, token="s3cret").start()       # doctest: +SKIP
    """

    def __init__(self, api: Any, host: str = "127.0.0.1", port: int = 8080,
                 token: str | None = None) -> None:
        import uvicorn

        token = query_token(host, token)
        if token is not None:
            api = BearerAuth(api, token)
        self._server = uvicorn.Server(uvicorn.Config(api, host=host, port=port,
                                                     log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, daemon=True,
                                        name="streamtable-queries")
        self.url = f"http://{host}:{port}"

    def start(self, timeout: float = 30.0) -> QueryServer:
        import time

        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the query server did not start on {self.url}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)


def serve_queries(app: Any, host: str = "127.0.0.1", port: int = 8080,
                  token: str | None = None) -> QueryServer:
    """Serve every queryable store of a :class:`~streamtable.runtime.spark.StreamsApp`, its
    health and its metrics."""
    from streamtable.serving.metrics import exposition

    names = sorted(s for s, spec in app.topology.stores.items() if spec.queryable)

    def metrics() -> str:
        return exposition(app.metrics.families(app.state_entries()))

    api = create_query_api(app.ready_store, names, health=app.health, metrics=metrics)
    return QueryServer(api, host, port, token).start()
