"""Interactive queries: serving stores that a runtime keeps up to date, queried from Python and
over HTTP."""

from streamtable.serving.sqlite import SqliteServingStore, StoreView

__all__ = ["SqliteServingStore", "StoreView"]
