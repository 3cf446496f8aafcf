"""Stream-table joins: each stream record looks up the table's current row for its key."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtable.processors.api import Processor, ProcessorContext, Record


class StreamTableJoin(Processor):
    """``joiner(stream_value, table_value)``; an inner join skips records without a row, a left
    join joins them with ``None``. The result keeps the stream record's timestamp."""

    def __init__(self, store_name: str, joiner: Callable[[Any, Any], Any], left: bool) -> None:
        self.store_name = store_name
        self.joiner = joiner
        self.left = left

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)

    def process(self, record: Record) -> None:
        if record.key is None or record.value is None:
            self.context.record_dropped(self.name, "null key or value in a stream-table join")
            return
        stored = self.store.get(record.key)
        if stored is None and not self.left:
            return
        table_value = None if stored is None else stored[0]
        self.forward(record.with_value(self.joiner(record.value, table_value)))
