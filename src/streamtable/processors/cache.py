"""Forwarding of table changes, with or without Kafka Streams' record cache.

Without caching every change is forwarded at once. With caching, changes are held per key until
the task commits (or the cache is full): the forwarded Change carries the newest value and the
value the key had before the first held change, so intermediate updates disappear — the reason an
update of a share-holders position is one emission with caching and subtract-then-add without.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Protocol

from streamtable.processors.api import Change, Record
from streamtable.records import Headers, RawRecord

if TYPE_CHECKING:
    from streamtable.processors.api import Processor


class FlushHost(Protocol):
    """What a cache needs from the task it runs in: the input record being processed (the
    cause of each held change) and where a failure while forwarding a held change goes."""

    current_raw: RawRecord | None

    def handle_failure(self, raw: RawRecord | None, error: Exception) -> None: ...


class ChangeForwarder:
    """Forwards ``Change(new, old)`` records of one stateful table operator.

    A held change remembers the input record that caused it: when the operators it is
    forwarded to fail at a commit, the error names that record and goes through the task's
    processing exception handler like any other.

    A table whose store other operators read (a join looks rows up in it) never lets a row
    that was created and deleted within one commit vanish unseen: a join may have joined it, so
    its deletion forwards the creation and then the deletion at once (as if the cache had
    evicted each), and the deletion retracts what was joined while the other side still holds
    what it was joined with. Kafka Streams' cache drops such a row, and a join result made from
    it stays (e.g. a foreign-key join's row for a customer that no longer exists). Any deletion
    in such a table is forwarded at once, not at the commit: when both rows of a join result
    are deleted within one commit, the first deletion must reach the join while the other row
    is still there to retract the result with (at the commit both are gone, and a join forwards
    nothing for a row whose other side is absent).
    """

    __slots__ = ("_processor", "caching", "max_entries", "_dirty", "_host", "read_elsewhere")

    def __init__(self, processor: Processor, caching: bool, max_entries: int,
                 host: FlushHost, read_elsewhere: bool = False) -> None:
        self._processor = processor
        self.caching = caching
        self.max_entries = max(1, max_entries)
        self._host = host
        self.read_elsewhere = read_elsewhere
        # key -> [first old value, newest value, timestamp, headers, cause]; insertion ordered
        # (an OrderedDict: evicting the eldest of a plain dict gets slower with every deletion)
        self._dirty: OrderedDict[Any, list[Any]] = OrderedDict()

    def forward(self, key: Any, new: Any, old: Any, timestamp: int, headers: Headers = ()) -> None:
        if not self.caching:
            self._processor.forward(Record(key, Change(new, old), timestamp, headers))
            return
        entry = self._dirty.get(key)
        if entry is not None and new is not None:  # hold(), for the common case: a held key
            entry[1] = new
            entry[2] = timestamp
            entry[3] = headers
            entry[4] = self._host.current_raw
            return
        self.hold(key, new, old, timestamp, headers, self._host.current_raw)
        if len(self._dirty) > self.max_entries:  # only a new key adds an entry
            self._evict_eldest()

    def hold(self, key: Any, new: Any, old: Any, timestamp: int, headers: Headers,
             cause: RawRecord | None) -> None:
        """Hold a change caused by ``cause``: the key's first held change keeps ``old``, a later
        one replaces the newest value, timestamp, headers and cause (for several records of
        ``key`` applied at once, ``old`` is the value before the first of them). Never
        evicts: the caller checks the room. A deletion in a table whose store other operators
        read is not held but forwarded at once, after the key's held change (see the class)."""
        entry = self._dirty.get(key)
        if new is None and self.read_elsewhere:
            if entry is None:
                self._emit(key, None, old, timestamp, headers, cause)
                return
            del self._dirty[key]
            # such a table holds no deletion: a held change without an old value created the row
            if entry[0] is None:
                created = entry[1]
                self._emit(key, created, None, entry[2], entry[3], entry[4])
                self._emit(key, None, created, timestamp, headers, cause)
            else:
                self._emit(key, None, entry[0], timestamp, headers, cause)
        elif entry is None:
            self._dirty[key] = [old, new, timestamp, headers, cause]
        else:
            entry[1] = new
            entry[2] = timestamp
            entry[3] = headers
            entry[4] = cause

    def _evict_eldest(self) -> None:
        key, (old, new, ts, headers, cause) = self._dirty.popitem(last=False)
        self._emit(key, new, old, ts, headers, cause)

    def _emit(self, key: Any, new: Any, old: Any, ts: int, headers: Headers,
              cause: RawRecord | None) -> None:
        if new is None and old is None:
            return  # created and deleted within one commit: nothing happened downstream
        host = self._host
        processing = host.current_raw
        host.current_raw = cause
        try:
            self._processor.forward(Record(key, Change(new, old), ts, headers))
        except Exception as e:
            host.handle_failure(cause, e)
        finally:
            host.current_raw = processing

    def flush(self) -> bool:
        """Forward every held change; True if anything was held."""
        if not self._dirty:
            return False
        dirty, self._dirty = self._dirty, OrderedDict()
        for key, (old, new, ts, headers, cause) in dirty.items():
            self._emit(key, new, old, ts, headers, cause)
        return True

    def __len__(self) -> int:
        return len(self._dirty)

    def __contains__(self, key: Any) -> bool:
        """Whether a change of ``key`` is held."""
        return key in self._dirty
