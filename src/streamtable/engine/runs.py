"""Runs of records into a cached table source, applied a key at a time.

A table source whose changes are cached forwards nothing while it processes records: each record
moves its key's row in the store and its key's held change (the value before the first held
change, the newest value, its timestamp, headers and cause), and the commit forwards one change
per key. Processing records one by one therefore ends in the same store, the same held changes
in the same order and the same stream time as applying only the last record of each key, in the
order of the keys' first records. A batch host hands a task runs of records
(:meth:`~streamtable.engine.task.Task.process_run`); a :class:`TableRun` decodes each run, keeps
the newest record of each key, and applies those (:meth:`TableRun.settle`) before anything else
happens in the task: another record, a punctuation, the commit. What a record costs is then
decoding it, not the store and the cache.

It takes a run only when every record of it would take that path, and checks before it keeps
anything: it decodes every key and value (a record that fails still fails, in the record-at-a-
time path the task then takes for the run, with its handler), and it hands the run back when a
record has no valid timestamp or a null key, when a record deletes a row that is absent when it
comes (Kafka Streams forwards that at once, not through the cache) or a row of a table that a
join reads (its cache may forward the row's creation first), when its keys would fill the
cache past its bound (``cache.max.bytes.buffering``: the record-at-a-time path then forwards the
eldest held changes, as a full cache does), or when debug logging of out-of-order updates is on.
"""

from __future__ import annotations

import logging
from itertools import compress, repeat
from operator import is_
from typing import TYPE_CHECKING, Any, cast

from streamtable.processors.io import ManyDecoder, SourceProcessor
from streamtable.processors.table import TableSource
from streamtable.processors.table import log as table_log
from streamtable.records import RawRecord, RecordRun

if TYPE_CHECKING:
    from streamtable.engine.task import Task

_UNKNOWN = object()  # a row's value before a run, when only the store knows it

# key -> (newest value, offset, timestamp, key bytes, value bytes, headers, topic, partition)
Pending = dict[Any, tuple[Any, int, int, bytes | None, bytes | None, Any, str, int]]


class TableRun:
    """Applies runs of one source's records to the cached table source it feeds."""

    __slots__ = ("_task", "_table", "_decode_keys", "_decode_values", "_pending")

    def __init__(self, task: Task, table: TableSource,
                 decoders: tuple[ManyDecoder, ManyDecoder]) -> None:
        self._task = task
        self._table = table
        self._decode_keys, self._decode_values = decoders
        # the newest record of each key, in the order of each key's first pending record
        self._pending: Pending = {}

    @classmethod
    def of(cls, task: Task, source: SourceProcessor) -> TableRun | None:
        """The applier for ``source`` in ``task``, if its records only ever reach a cached
        table source (its one child)."""
        children = source._children
        if len(children) != 1 or type(children[0]) is not TableSource:
            return None
        table = children[0]
        if table.store_name is None or not table.forwarder.caching:
            return None
        decoders = source.run_decoders()
        return None if decoders is None else cls(task, table, decoders)

    def absorb(self, run: RecordRun) -> bool:
        """Take ``run`` (the next records in processing order) as the task would process them
        one by one; False, having kept nothing, if one of them would take another path."""
        n = len(run)
        if not n or None in run.timestamps or table_log.isEnabledFor(logging.DEBUG):
            return False
        timestamps = cast(list[int], run.timestamps)
        if min(timestamps) < 0:
            return False
        forwarder = self._table.forwarder
        pending = self._pending
        # the cache cannot evict while every key of the run is held or pending, or finds room
        might_evict = len(forwarder) + len(pending) + n > forwarder.max_entries
        topic = run.topic
        try:
            keys = self._decode_keys(topic, run.keys)
            values = self._decode_values(topic, run.values)
            if len(keys) != n or len(values) != n:
                raise ValueError(f"a deserializer returned {len(keys)} keys and {len(values)} "
                                 f"values for {n} records")
            if None in keys or (None in values and (forwarder.read_elsewhere
                                                    or not self._deletes_present(keys, values))):
                return False
            newest = zip(values, run.offsets, timestamps, run.keys, run.values, run.headers,
                         repeat(topic), repeat(run.partition), strict=False)
            latest = dict(zip(keys, newest, strict=True))  # the newest record of each key
            if might_evict and self._would_evict(latest):
                return False
        except Exception:
            # an undecodable record, an unhashable key: the record-at-a-time path names the
            # record and applies the handler
            return False
        pending.update(latest)  # a key keeps the place of its first record
        task = self._task
        task.context.advance_stream_time(max(timestamps))
        task.current_raw = run.record(n - 1)
        return True

    def _would_evict(self, latest: Pending) -> bool:
        """Whether holding the keys of ``latest`` after the pending ones fills the cache past
        its bound (the record-at-a-time path would then forward its eldest changes)."""
        forwarder = self._table.forwarder
        pending = self._pending
        held = len(forwarder) + sum(1 for key in pending if key not in forwarder)
        held += sum(1 for key in latest if key not in pending and key not in forwarder)
        return held > forwarder.max_entries

    def _deletes_present(self, keys: list[Any], values: list[Any]) -> bool:
        """Whether every deletion among ``values`` finds its row present when it comes."""
        deleted = set(compress(keys, map(is_, values, repeat(None))))
        pending = self._pending
        before = {key: pending[key][0] if key in pending else _UNKNOWN for key in deleted}
        involved = list(map(deleted.__contains__, keys))
        ask_store = []
        for key, value in zip(compress(keys, involved), compress(values, involved),
                              strict=True):
            if value is None:
                was = before[key]
                if was is None:
                    return False
                if was is _UNKNOWN:
                    ask_store.append(key)
            before[key] = value
        get = self._table.store.get
        return all(get(key) is not None for key in ask_store)

    def settle(self) -> None:
        """Apply the newest pending record of each key: store it and hold its change."""
        pending, self._pending = self._pending, {}
        store = self._table.store
        get = store.get
        hold = self._table.forwarder.hold
        keep_headers = self._table.keep_headers
        for key, (new, offset, ts, raw_key, raw_value, headers, topic, partition) in (
                pending.items()):
            stored = get(key)
            if new is None:
                store.delete(key)
            else:
                store.put(key, (new, ts, headers) if keep_headers else (new, ts))
            hold(key, new, None if stored is None else stored[0], ts, headers,
                 RawRecord(topic, partition, offset, ts, raw_key, raw_value, headers))
