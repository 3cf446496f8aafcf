"""The share-holders HTTP API (FastAPI).

Writes go to Kafka through the producer; reads come from the queryable stores the streaming
application keeps (``us-share-holders``: client -> set of position ids, ``positions-enriched``:
position id -> position with ``name`` and ``exchange`` from the reference data). The service has
no database of its own, so a write shows in the reads once the streaming application has
processed it: writes answer ``202 Accepted``.

>>> from fastapi.testclient import TestClient                      # doctest: +SKIP
>>> client = TestClient(create_api(producer, app.store))           # doctest: +SKIP
>>> client.put("/positions/1", json={"client": "client1", "ticker": "AAPL",
...                                  "amount": 100}).status_code   # doctest: +SKIP
202
>>> client.get("/share-holders/client1").json()                    # doctest: +SKIP
{'client': 'client1', 'positions': [{'id': 1, 'ticker': 'AAPL', 'amount': 100, ...}]}

Interactive documentation is at ``/docs`` (OpenAPI schema at ``/openapi.json``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, Protocol

from fastapi import FastAPI, HTTPException, Path, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from .emails import HOLDERS_STORE, POSITIONS_STORE, ReadableStore, read_share_holder
from .producer import ProduceError, check_position_id

log = logging.getLogger("share_holders.api")

__all__ = [
    "PositionWriter",
    "RefDataIn",
    "RefData",
    "PositionIn",
    "Position",
    "ShareHolder",
    "Accepted",
    "BodySizeLimit",
    "create_api",
    "resolve_store",
]

TICKER_PATTERN = r"^[A-Z]+$"
EXCHANGE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
# a position or a ticker's reference data is well under a kilobyte: a body larger than this is
# refused with 413 before it is read
MAX_BODY_BYTES = 64 * 1024


class PositionWriter(Protocol):
    """What the API needs to write (``ShareHoldersProducer`` is one)."""

    def put_position(self, position_id: int, client: str, ticker: str, amount: float,
                     exchange: str | None = None) -> dict[str, Any] | None: ...

    def close_position(self, position_id: int) -> None: ...

    def put_ref_data(self, ticker: str, name: str, exchange: str) -> dict[str, str]: ...


# -- models ----------------------------------------------------------------------------------
Ticker = Annotated[str, Path(pattern=TICKER_PATTERN, description="upper-case letters, e.g. AAPL",
                             examples=["AAPL"])]
PositionId = Annotated[int, Path(ge=0, examples=[1],
                                 description="the position id, 0 to 2**63-1 (a signed 64-bit "
                                             "integer, the topic's key)"),
                       AfterValidator(check_position_id)]


def _finite(amount: int | float) -> int | float:
    if not math.isfinite(amount):
        raise ValueError(f"amount must be a finite number, got {amount}")
    return amount


class RefDataIn(BaseModel):
    """A ticker's reference data."""

    model_config = ConfigDict(extra="forbid",
                              json_schema_extra={"examples": [{"name": "Apple Inc.",
                                                               "exchange": "NASDAQ"}]})
    name: str = Field(min_length=1, description="the company's name")
    exchange: str = Field(pattern=EXCHANGE_PATTERN, description="where it trades, e.g. NASDAQ")


class RefData(RefDataIn):
    """Reference data as written."""

    model_config = ConfigDict(extra="forbid")
    ticker: str


class PositionIn(BaseModel):
    """A client's position in one stock. ``amount`` 0 closes the position."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"client": "client1", "ticker": "AAPL", "amount": 100}]},
    )
    client: str = Field(min_length=1, description="the client's id")
    ticker: str = Field(pattern=TICKER_PATTERN, description="upper-case letters, e.g. AAPL")
    amount: Annotated[int | float, AfterValidator(_finite),
                      Field(ge=0, description="shares held; 0 closes the position")]
    exchange: str | None = Field(
        default=None, pattern=EXCHANGE_PATTERN,
        description="optional; the reference data's exchange is used when it has one",
    )


class Position(BaseModel):
    """A position as the streaming application sees it (enriched with reference data)."""

    id: int
    client: str | None = None
    ticker: str | None = None
    amount: int | float | None = None
    exchange: str | None = None
    name: str | None = None


class ShareHolder(BaseModel):
    """A client holding at least one US position, with those positions."""

    client: str
    positions: list[Position]


class Accepted(BaseModel):
    """A write accepted by Kafka; the reads show it once the streaming app processed it."""

    topic: str
    key: int | str
    value: dict[str, Any] | None = Field(description="the record value; null closes")
    status: Literal["set", "closed"]


class BodySizeLimit:
    """ASGI middleware answering 413 to a request whose body is over ``max_bytes``: at once
    when its Content-Length says so, else once the bytes read pass the limit (the body, at
    most ``max_bytes``, is read before the endpoint runs).

    >>> api.add_middleware(BodySizeLimit, max_bytes=64 * 1024)        # doctest: +SKIP
    """

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = JSONResponse({"detail": f"request body over the limit of {self.max_bytes} "
                                            f"bytes"},
                                 status_code=status.HTTP_413_CONTENT_TOO_LARGE)
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await too_large(scope, receive, send)
            return
        messages = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await too_large(scope, receive, send)
                return
            if message["type"] != "http.request" or not message.get("more_body"):
                break

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


# -- the app ---------------------------------------------------------------------------------
def resolve_store(stores: Mapping[str, ReadableStore] | Callable[[str], ReadableStore],
                  name: str) -> ReadableStore:
    """A store from a mapping of views or from a function such as ``StreamsApp.store``."""
    if isinstance(stores, Mapping):
        return stores[name]
    return stores(name)


def create_api(producer: PositionWriter,
               stores: Mapping[str, ReadableStore] | Callable[[str], ReadableStore],
               *, title: str = "Share holders") -> FastAPI:
    """The FastAPI application.

    ``stores`` maps ``us-share-holders`` and ``positions-enriched`` to store views (e.g.
    ``{name: app.store(name) ...}``) or is a function of the name (e.g. ``app.store``).

    >>> api = create_api(producer, app.store)                       # doctest: +SKIP
    >>> uvicorn.run(api, port=8000)                                 # doctest: +SKIP
    """
    holders = resolve_store(stores, HOLDERS_STORE)
    positions = resolve_store(stores, POSITIONS_STORE)
    positions_topic = str(getattr(producer, "positions_topic", "share-holders"))
    api = FastAPI(
        title=title,
        description=(
            "Positions and reference data are written to Kafka; US share-holders are read from "
            "the stores of the streaming application (eventually consistent with the writes)."
        ),
        version="1.0",
    )
    api.add_middleware(BodySizeLimit, max_bytes=MAX_BODY_BYTES)

    @api.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # the errors quote the input, which JSON cannot carry when it is NaN or infinite
        return JSONResponse({"detail": _json_safe(exc.errors())},
                            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)

    def write(action: Callable[[], Any]) -> Any:
        try:
            return action()
        except ValueError as exc:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from exc
        except ProduceError as exc:
            log.error("write failed: %s", exc)
            raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc)) from exc

    @api.put("/ref-data/{ticker}", response_model=RefData, tags=["writes"],
             status_code=status.HTTP_202_ACCEPTED,
             responses={422: {"description": "invalid ticker or body"},
                        503: {"description": "Kafka unavailable"}})
    def put_ref_data(ticker: Ticker, body: RefDataIn) -> RefData:
        """Set the name and exchange of a ticker."""
        value = write(lambda: producer.put_ref_data(ticker, body.name, body.exchange))
        return RefData(ticker=ticker, **value)

    @api.put("/positions/{position_id}", response_model=Accepted, tags=["writes"],
             status_code=status.HTTP_202_ACCEPTED,
             responses={422: {"description": "invalid position"},
                        503: {"description": "Kafka unavailable"}})
    def put_position(position_id: PositionId, body: PositionIn) -> Accepted:
        """Open or update a position; ``amount`` 0 closes it."""
        value = write(lambda: producer.put_position(position_id, body.client, body.ticker,
                                                    body.amount, body.exchange))
        return Accepted(topic=positions_topic, key=position_id, value=value,
                        status="closed" if value is None else "set")

    @api.delete("/positions/{position_id}", response_model=Accepted, tags=["writes"],
                status_code=status.HTTP_202_ACCEPTED,
                responses={503: {"description": "Kafka unavailable"}})
    def delete_position(position_id: PositionId) -> Accepted:
        """Close a position (a tombstone; closing an unknown position is harmless)."""
        write(lambda: producer.close_position(position_id))
        return Accepted(topic=positions_topic, key=position_id, value=None,
                        status="closed")

    @api.get("/share-holders", response_model=list[ShareHolder], tags=["reads"])
    def list_share_holders() -> list[ShareHolder]:
        """Every client holding a US stock, with its US positions."""
        out = []
        for client, _ids in holders.all():
            rows = read_share_holder(holders, positions, client)
            if rows is not None:
                out.append(ShareHolder(client=client, positions=[Position(**p) for p in rows]))
        return out

    @api.get("/share-holders/{client}", response_model=ShareHolder, tags=["reads"],
             responses={404: {"description": "not a US share-holder"}})
    def get_share_holder(client: str) -> ShareHolder:
        """One US share-holder; 404 when the client holds no US stock."""
        rows = read_share_holder(holders, positions, client)
        if rows is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND,
                                f"client {client!r} is not a US share-holder")
        return ShareHolder(client=client, positions=[Position(**p) for p in rows])

    @api.get("/positions/{position_id}", response_model=Position, tags=["reads"],
             responses={404: {"description": "no such open position"}})
    def get_position(position_id: PositionId) -> Position:
        """One open position, enriched with its reference data (any exchange)."""
        value = positions.get(position_id)
        if value is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND,
                                f"position {position_id} is not open")
        return Position(**{**_position_fields(value), "id": position_id})

    @api.get("/health", tags=["service"])
    def health() -> dict[str, Any]:
        """Liveness, with the number of entries in each store."""
        return {"status": "ok", "stores": {HOLDERS_STORE: len(holders),
                                           POSITIONS_STORE: len(positions)}}

    return api


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, BaseException):
        return str(value)
    return value


def _position_fields(value: Mapping[str, Any]) -> dict[str, Any]:
    return {k: value.get(k) for k in Position.model_fields if k in value}
