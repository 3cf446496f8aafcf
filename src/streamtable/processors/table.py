"""KTable operators: every record they receive and forward carries a Change(new, old)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streamtable.processors._operator import InternalProcessorContext, Operator
from streamtable.processors.api import Change, Record
from streamtable.processors.cache import ChangeForwarder
from streamtable.state.versioned import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    VersionedKeyValueStore,
)

log = logging.getLogger(__name__)

NO_PAIR = "group_by selected no key-value pair"
# a versioned table's update older than its key's latest version: no new join result (KIP-914)
OUT_OF_ORDER = "out-of-order update of a versioned table in a table-table join"


class StoringProcessor(Operator):
    """A processor that keeps a (value, timestamp) store and forwards its changes through a
    ChangeForwarder, so that caching applies to it.

    With ``dsl.store.format=headers`` (``keep_headers``) the store holds ``(value, timestamp,
    headers)``: the headers of the record whose change wrote the value, the ones the change is
    forwarded with. The choice is made once, at ``init``, so the default path pays nothing.

    In a versioned store (KIP-914) each change is put as a version at its timestamp and
    forwarded at once (versioned stores have no cache), marked ``is_latest=False`` when it is
    older than the key's latest version; a put the store refuses as older than its history
    retention is not forwarded. A versioned store keeps values and timestamps, not headers.
    """

    store_name: str | None = None
    forwarder: ChangeForwarder
    keep_headers = False
    versioned: VersionedKeyValueStore | None = None

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        if self.store_name is not None:
            self.store = context.get_state_store(self.store_name)
            self.versioned = context.versioned_store(self.store_name)
            if self.versioned is not None:
                return
            self.forwarder = context.change_forwarder(self, self.store_name)
            self.keep_headers = context.store_headers(self.store_name)
            if self.keep_headers:
                self.emit = self._emit_with_headers  # type: ignore[method-assign]

    def emit(self, key: Any, new: Any, old: Any, record: Record, is_latest: bool = True,
             keep_empty: bool = False) -> None:
        """Write ``new`` to the store (if any) and forward Change(new, old); without a store,
        a change from nothing to nothing is forwarded only with ``keep_empty``."""
        if self.store_name is None:
            if new is None and old is None and not keep_empty:
                return
            self.forward(Record(key, Change(new, old, is_latest), record.timestamp,
                                record.headers))
            return
        if self.versioned is not None:
            put = self.versioned.put(key, new, record.timestamp)
            if put != PUT_RETURN_CODE_NOT_PUT:
                latest = put == PUT_RETURN_CODE_VALID_TO_UNDEFINED
                self.forward(Record(key, Change(new, old, latest), record.timestamp,
                                    record.headers))
            return
        if new is None:
            self.store.delete(key)
        else:
            self.store.put(key, (new, record.timestamp))
        self.forwarder.forward(key, new, old, record.timestamp, record.headers)

    def _emit_with_headers(self, key: Any, new: Any, old: Any, record: Record,
                           is_latest: bool = True, keep_empty: bool = False) -> None:
        """:meth:`emit` into a store that keeps headers (see the class)."""
        if new is None:
            self.store.delete(key)
        else:
            self.store.put(key, (new, record.timestamp, record.headers))
        self.forwarder.forward(key, new, old, record.timestamp, record.headers)


class TableSource(StoringProcessor):
    """Turns a topic's records into table upserts (``None`` value deletes the row)."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def process(self, record: Record) -> None:
        key = record.key
        if key is None:
            self.context.record_dropped(self.name, "null key for a table")
            return
        stored = self.store.get(key)
        old = None
        if stored is not None:
            old = stored[0]
            if record.timestamp < stored[1]:
                log.debug(
                    "out-of-order update of table %s for key %r: %d < %d",
                    self.store_name, key, record.timestamp, stored[1],
                )
        if record.value is None and old is None:
            # deleting an absent row changes nothing, but Kafka Streams forwards it
            self.forward(Record(key, Change(None, None), record.timestamp, record.headers))
            return
        self.emit(key, record.value, old, record)


class VersionedTableSource(StoringProcessor):
    """A table source kept in a versioned store (Kafka Streams' ``KTableSource`` over a
    ``VersionedKeyValueStore``, KIP-914): each record is put as the key's version at its
    timestamp and forwarded as ``Change(value, latest value before it)``; a record older than
    the key's latest version is kept in the history and forwarded with ``is_latest=False``
    (aggregations and table joins skip it), one older than the store's history retention is
    dropped and counted."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def process(self, record: Record) -> None:
        key = record.key
        if key is None:
            self.context.record_dropped(self.name, "null key for a table")
            return
        stored = self.store.get(key)  # the latest version, as a plain store holds it
        self.emit(key, record.value, None if stored is None else stored[0], record)


class TableFilter(StoringProcessor):
    """Keeps rows for which ``predicate(key, value)`` holds; a row that stops matching is
    forwarded as a deletion, a row that never matched is never forwarded."""

    def __init__(
        self,
        predicate: Callable[[Any, Any], bool],
        negate: bool = False,
        store_name: str | None = None,
        versioned_input: bool = False,
    ) -> None:
        self.predicate = predicate
        self.negate = negate
        self.store_name = store_name
        # filtering a versioned table forwards a row that neither was nor is kept (Kafka
        # Streams' KIP-914: the history downstream stays complete)
        self.versioned_input = versioned_input

    def _keep(self, key: Any, value: Any) -> Any:
        if value is None:
            return None
        return value if bool(self.predicate(key, value)) != self.negate else None

    def process(self, record: Record) -> None:
        change: Change[Any] = record.value
        new = self._keep(record.key, change.new)
        if self.store_name is not None:
            stored = self.store.get(record.key)
            old = None if stored is None else stored[0]
        else:
            old = self._keep(record.key, change.old)
        if new is None and old is None and not self.versioned_input:
            return
        self.emit(record.key, new, old, record, change.is_latest, self.versioned_input)


class TableMapValues(StoringProcessor):
    def __init__(self, mapper: Callable[[Any, Any], Any], store_name: str | None = None) -> None:
        self.mapper = mapper
        self.store_name = store_name

    def process(self, record: Record) -> None:
        change: Change[Any] = record.value
        key = record.key
        new = None if change.new is None else self.mapper(key, change.new)
        if self.store_name is not None:
            stored = self.store.get(key)
            old = None if stored is None else stored[0]
        else:
            old = None if change.old is None else self.mapper(key, change.old)
        self.emit(key, new, old, record, change.is_latest)


class TableToStream(Operator):
    """Forwards each change's new value (``None`` for a deletion) as a stream record."""

    def __init__(self, mapper: Callable[[Any, Any], Any] | None = None) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        value = record.value.new
        key = record.key if self.mapper is None else self.mapper(record.key, value)
        self.forward(Record(key, value, record.timestamp, record.headers))


class TableGroupByMap(Operator):
    """Re-keys a table for ``group_by``: the old value is sent to its old group as a
    subtraction, then the new value to its new group as an addition."""

    def __init__(self, selector: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        self.selector = selector

    def process(self, record: Record) -> None:
        change: Change[Any] = record.value
        if not change.is_latest:
            # an out-of-order update of a versioned table: the aggregate keeps the latest
            # version of each row (Kafka Streams' KTableRepartitionMap, KIP-914)
            return
        if change.old is not None:
            pair = self.selector(record.key, change.old)
            if pair is None:
                self.context.record_dropped(self.name, NO_PAIR + " (old value)")
            elif pair[0] is None:
                self.context.record_dropped(self.name, "group_by selected a null key (old value)")
            else:
                self.forward(Record(pair[0], Change(None, pair[1]), record.timestamp,
                                    record.headers))
        if change.new is not None:
            pair = self.selector(record.key, change.new)
            if pair is None:
                self.context.record_dropped(self.name, NO_PAIR)
            elif pair[0] is None:
                self.context.record_dropped(self.name, "group_by selected a null key")
            else:
                self.forward(Record(pair[0], Change(pair[1], None), record.timestamp,
                                    record.headers))
