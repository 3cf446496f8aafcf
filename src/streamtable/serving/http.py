"""Interactive queries over HTTP: every queryable store of a running application.

    GET /stores                         the queryable stores
    GET /stores/{store}?from=&to=       all entries (or a key range), in key order
    GET /stores/{store}/keys/{key}      one entry (404 when absent)
    GET /health                         200 {"status": "running", ...} while the application
                                        runs; 503 with the failure's message once it died
    GET /metrics                        Prometheus text format (see serving.metrics)

Once the application's query has died, the store endpoints answer 503 with its error too: a
dead application must not look like an empty one.

Keys in URLs are JSON when they parse as JSON (``42``, ``"a"``), plain text otherwise. Values are
returned as JSON (sets as sorted lists). Start it with ``streamtable run app.py --http-port 8080``
or :func:`serve_queries`.

>>> api = create_query_api({"counts": view})                      # doctest: +SKIP
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from streamtable.errors import ApplicationFailedError
from streamtable.serving.sqlite import StoreView


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

    @api.exception_handler(ApplicationFailedError)
    async def failed(request: Request, exc: ApplicationFailedError) -> JSONResponse:
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

    @api.get("/stores/{store}")
    def all_entries(store: str, from_: str | None = Query(None, alias="from"),
                    to: str | None = None) -> list[dict[str, Any]]:
        v = view(store)
        items = v.all() if from_ is None and to is None else v.range(
            None if from_ is None else _parse_key(from_), None if to is None else _parse_key(to))
        return [{"key": _jsonable(k), "value": _jsonable(val)} for k, val in items]

    @api.get("/stores/{store}/keys/{key}")
    def get(store: str, key: str) -> dict[str, Any]:
        parsed = _parse_key(key)
        value = view(store).get(parsed)
        if value is None:
            raise HTTPException(404, f"no key {parsed!r} in store {store!r}")
        return {"key": _jsonable(parsed), "value": _jsonable(value)}

    return api


class QueryServer:
    """The query API served by uvicorn in a background thread."""

    def __init__(self, api: Any, host: str = "127.0.0.1", port: int = 8080) -> None:
        import uvicorn

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


def serve_queries(app: Any, host: str = "127.0.0.1", port: int = 8080) -> QueryServer:
    """Serve every queryable store of a :class:`~streamtable.runtime.spark.StreamsApp`, its
    health and its metrics."""
    from streamtable.serving.metrics import exposition

    names = sorted(s for s, spec in app.topology.stores.items() if spec.queryable)

    def metrics() -> str:
        return exposition(app.metrics.families(app.state_entries()))

    api = create_query_api(app.store, names, health=app.health, metrics=metrics)
    return QueryServer(api, host, port).start()
