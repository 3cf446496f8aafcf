"""Table-table foreign-key join (Kafka Streams' KIP-213), as three sub-topologies.

Left side (the table with the foreign key): every change sends a *subscription* to the right
side, keyed by the foreign key and partitioned like the right table's topic, and a *mirror* of the
new left value, keyed by the primary key. Each carries a hash of the new left value.

Right side: keeps the subscriptions ``(foreign key, primary key) -> hash`` next to the right
table. A subscription is answered with the current right value; a change of a right row answers
every subscription of its key again. Answers (*responses*) go back keyed by the primary key.

Join output: keeps the mirrored left values and joins each response with the left value, if the
response's hash is still the hash of the current left value (otherwise it answers an older left
value, and a newer response is on its way). The result is a materialized KTable.

Kafka Streams answers on the left side itself, which makes its sub-topologies a cycle; the mirror
keeps ours a chain that runs in one pass per micro-batch. When the result meets the left table
again (joined back to it, or a second foreign-key join to the same right table), the join output
shares a sub-topology with the left or the right side and the cycle is back, as in Kafka Streams:
hosts run it in rounds within a batch (``engine.wiring.stage_groups``). An answer must not
overtake the left
value it answers (a record cache upstream flushes out of timestamp order), so the Spark runtime
processes a batch's mirror records before its answers; an answer about an older left value is
then dropped, and within one micro-batch only the join results of the latest left values are
emitted (per-batch compaction of the join output, with or without caching).
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable
from typing import Any

from streamtable.processors._operator import InternalProcessorContext, Operator
from streamtable.processors.api import Change, Record
from streamtable.processors.table import OUT_OF_ORDER, StoringProcessor

# Subscription instructions (Kafka Streams' names)
DELETE_KEY_NO_PROPAGATE = 0
DELETE_KEY_AND_PROPAGATE = 1
PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE = 2
PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE = 3


def value_hash(value: Any) -> bytes | None:
    if value is None:
        return None
    return hashlib.blake2b(pickle.dumps(value, protocol=5), digest_size=16).digest()


class SubscriptionSend(Operator):
    """Left side: subscriptions to the right side and mirrors to the join output."""

    forwards_by_name = True

    def __init__(self, foreign_key: Callable[[Any], Any], left_join: bool,
                 subscription_child: str, mirror_child: str) -> None:
        self.foreign_key = foreign_key
        self.left_join = left_join
        self.subscription_child = subscription_child
        self.mirror_child = mirror_child

    def process(self, record: Record) -> None:
        change: Change[Any] = record.value
        if not change.is_latest:
            self.context.record_dropped(self.name, OUT_OF_ORDER)
            return
        new, old = change.new, change.old
        if new is None and old is None:
            return
        pk = record.key
        h = value_hash(new)
        self.forward(record.with_value((new, h)), child=self.mirror_child)
        old_fk = None if old is None else self.foreign_key(old)
        new_fk = None if new is None else self.foreign_key(new)

        def send(fk: Any, instruction: int) -> None:
            self.forward(Record(fk, (h, instruction, pk), record.timestamp, record.headers),
                         child=self.subscription_child)

        if self.left_join:
            if old_fk is not None and old_fk != new_fk:
                send(old_fk, DELETE_KEY_NO_PROPAGATE)
            send(new_fk, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)
            return
        if new is not None:
            if new_fk is None:
                self.context.record_dropped(self.name, "null foreign key")
                if old_fk is not None:
                    send(old_fk, DELETE_KEY_AND_PROPAGATE)
            elif old_fk is not None and old_fk != new_fk:
                send(old_fk, DELETE_KEY_NO_PROPAGATE)
                send(new_fk, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)
            else:
                send(new_fk, PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)
        elif old_fk is not None:
            send(old_fk, DELETE_KEY_AND_PROPAGATE)


class SubscriptionReceive(Operator):
    """Right side: record or drop a subscription, and answer it with the right value."""

    def __init__(self, subscription_store: str, right_store: str) -> None:
        self.subscription_store = subscription_store
        self.right_store = right_store

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        self.subs = context.get_state_store(self.subscription_store)
        self.right = context.get_state_store(self.right_store)

    def process(self, record: Record) -> None:
        fk = record.key
        h, instruction, pk = record.value
        if fk is not None:
            if instruction in (DELETE_KEY_NO_PROPAGATE, DELETE_KEY_AND_PROPAGATE):
                self.subs.delete((fk, pk))
            else:
                self.subs.put((fk, pk), (h, record.timestamp))
        if instruction == DELETE_KEY_NO_PROPAGATE:
            return
        stored = None if fk is None else self.right.get(fk)
        right = None if stored is None else stored[0]
        ts = record.timestamp if stored is None else max(record.timestamp, stored[1])
        if instruction == DELETE_KEY_AND_PROPAGATE:
            right = None
        elif instruction == PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE and right is None:
            return
        self.forward(Record(pk, (h, right), ts, record.headers))


class ForeignTableChange(Operator):
    """Right side: a changed right row answers every subscription of its key again."""

    def __init__(self, subscription_store: str) -> None:
        self.subscription_store = subscription_store

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        self.subs = context.get_state_store(self.subscription_store)

    def process(self, record: Record) -> None:
        change: Change[Any] = record.value
        if not change.is_latest:
            self.context.record_dropped(self.name, OUT_OF_ORDER)
            return
        if change.new is None and change.old is None:
            return
        for key in self.subs.keys_with_first(record.key):
            h, sub_ts = self.subs.get(key)
            self.forward(Record(key[1], (h, change.new), max(record.timestamp, sub_ts),
                                record.headers))


class LeftMirror(Operator):
    """Join output: the latest left value and its hash, per primary key."""

    def __init__(self, mirror_store: str) -> None:
        self.mirror_store = mirror_store

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        self.mirror = context.get_state_store(self.mirror_store)

    def process(self, record: Record) -> None:
        value, h = record.value
        if value is None:
            self.mirror.delete(record.key)
        else:
            self.mirror.put(record.key, (value, h))


class ResponseJoin(StoringProcessor):
    """Join output: join a response with the current left value unless it is stale."""

    def __init__(self, mirror_store: str, store_name: str,
                 joiner: Callable[[Any, Any], Any], left_join: bool) -> None:
        self.mirror_store = mirror_store
        self.store_name = store_name
        self.joiner = joiner
        self.left_join = left_join

    def init(self, context: InternalProcessorContext) -> None:
        super().init(context)
        self.mirror = context.get_state_store(self.mirror_store)

    def process(self, record: Record) -> None:
        h, right = record.value
        current = self.mirror.get(record.key)
        if h != (None if current is None else current[1]):
            return  # answers an older left value
        left = None if current is None else current[0]
        if right is None and (not self.left_join or left is None):
            result = None
        else:
            result = self.joiner(left, right)
        stored = self.store.get(record.key)
        old = None if stored is None else stored[0]
        # A tombstone even for a key that never joined, as Kafka Streams (which cannot know
        # whether a result was emitted) forwards it; a record cache drops it (nothing changed).
        self.emit(record.key, result, old, record)
