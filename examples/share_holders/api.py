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
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, Protocol

from fastapi import FastAPI, HTTPException, Path, status
from pydantic import BaseModel, ConfigDict, Field

from .emails import HOLDERS_STORE, POSITIONS_STORE, ReadableStore, read_share_holder
from .producer import ProduceError

log = logging.getLogger("share_holders.api")

__all__ = [
    "PositionWriter",
    "RefDataIn",
    "RefData",
    "PositionIn",
    "Position",
    "ShareHolder",
    "Accepted",
    "create_api",
    "resolve_store",
]

TICKER_PATTERN = r"^[A-Z]+$"
EXCHANGE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class PositionWriter(Protocol):
    """What the API needs to write (``ShareHoldersProducer`` is one)."""

    def put_position(self, position_id: int, client: str, ticker: str, amount: float,
                     exchange: str | None = None) -> dict[str, Any] | None: ...

    def close_position(self, position_id: int) -> None: ...

    def put_ref_data(self, ticker: str, name: str, exchange: str) -> dict[str, str]: ...


# -- models ----------------------------------------------------------------------------------
Ticker = Annotated[str, Path(pattern=TICKER_PATTERN, description="upper-case letters, e.g. AAPL",
                             examples=["AAPL"])]
PositionId = Annotated[int, Path(ge=0, description="the position id", examples=[1])]


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
    amount: Annotated[int | float, Field(ge=0, allow_inf_nan=False,
                                         description="shares held; 0 closes the position")]
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


def _position_fields(value: Mapping[str, Any]) -> dict[str, Any]:
    return {k: value.get(k) for k in Position.model_fields if k in value}
