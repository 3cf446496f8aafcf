"""The engine: tasks, the context processors see, and the ports every host plugs into.

A host (the TopologyTestDriver, a Spark stage) builds :class:`Task` objects, feeds them records
in the order a :class:`~streamtable.engine.ports.RecordOrdering` gives, and commits them; the
ports in :mod:`streamtable.engine.ports` are everything a host provides.
"""

from streamtable.engine.ordering import PartitionGroupOrdering
from streamtable.engine.ports import (
    KeyValueStore,
    OutputWriter,
    QueryableStore,
    RecordCollector,
    RecordOrdering,
    ServingStore,
    StoreBackend,
    TaskStatePersistence,
)
from streamtable.engine.task import Task, TaskContext
from streamtable.engine.wiring import Wiring, wire

__all__ = [
    "KeyValueStore",
    "OutputWriter",
    "PartitionGroupOrdering",
    "QueryableStore",
    "RecordCollector",
    "RecordOrdering",
    "ServingStore",
    "StoreBackend",
    "Task",
    "TaskContext",
    "TaskStatePersistence",
    "Wiring",
    "wire",
]
