"""Interactive queries: serving stores that a runtime keeps up to date, queried from Python and
over HTTP.

:func:`serving_store` opens the serving store a location names: PostgreSQL for a
``postgresql://`` (or ``postgres://``) URL, SQLite for a file path (the setting ``serving.url``;
without it, the Spark runtime keeps SQLite in its state directory).

>>> import os, tempfile
>>> store = serving_store(os.path.join(tempfile.mkdtemp(), "serving.db"), "word-count")
>>> type(store).__name__
'SqliteServingStore'
"""

from __future__ import annotations

from pathlib import Path

from streamtable.config import StreamsConfig
from streamtable.serving.base import ServingStore
from streamtable.serving.postgres import PostgresServingStore
from streamtable.serving.sqlite import SqliteServingStore
from streamtable.serving.view import StoreView

__all__ = ["PostgresServingStore", "SqliteServingStore", "StoreView", "configured_serving_store",
           "is_postgres_url", "serving_store"]


def is_postgres_url(location: str | Path) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a file."""
    return str(location).lower().startswith(("postgresql://", "postgres://"))


def configured_serving_store(config: StreamsConfig) -> ServingStore:
    """The application's serving store: where ``serving.url`` says, else SQLite in the
    application's state directory (``<state.dir>/<application.id>/serving.db``)."""
    location = (config.get("serving.url")
                or Path(config["state.dir"]) / config.application_id / "serving.db")
    return serving_store(location, config.application_id)


def serving_store(location: str | Path, application_id: str) -> ServingStore:
    """The serving store of ``application_id`` at ``location``: a :class:`PostgresServingStore`
    for a ``postgresql://`` / ``postgres://`` URL (one database can hold several applications),
    a :class:`SqliteServingStore` for a path (a file of its own per application)."""
    if is_postgres_url(location):
        return PostgresServingStore(str(location), application_id)
    return SqliteServingStore(location)
