"""The built-in operators' side of a task: :class:`Operator`, the base of every DSL operator,
and :class:`InternalProcessorContext`, what the engine gives it (Kafka Streams' internal
``InternalProcessorContext``: record caches, the record collector, the nodes' wiring, dropped
record counts). Users' processors never see it: theirs is the narrow
:class:`~streamtable.processors.api.ProcessorContext`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from streamtable.processors.api import (
    Cancellable,
    NodeWiring,
    Processor,
    PunctuationType,
    Punctuator,
    RecordMetadata,
)
from streamtable.records import Headers

if TYPE_CHECKING:
    from streamtable.processors.cache import ChangeForwarder
    from streamtable.state.versioned import VersionedKeyValueStore


class InternalProcessorContext(Protocol):
    """What a built-in operator may ask of the task it runs in (Kafka Streams'
    ``InternalProcessorContext``): the task's stores, stream time, the record being processed,
    its record caches, the record collector and each node's wiring.

    Example:
        >>> class CountDrops(Operator):
        ...     def process(self, record):
        ...         if record.value is None:
        ...             self.context.record_dropped(self.name, "null value")
        ...         else:
        ...             self.forward(record)
    """

    @property
    def application_id(self) -> str: ...

    @property
    def task_id(self) -> int:
        """The partition this task processes."""
        ...

    @property
    def stream_time(self) -> int:
        """The largest timestamp this task has seen (-1 before the first record)."""
        ...

    def advance_stream_time(self, timestamp: int) -> None:
        """Called by sources with each record's event time; stream time never goes back."""
        ...

    def record_metadata(self) -> RecordMetadata | None:
        """Topic, partition and offset of the input record being processed (None at a cache
        flush that no record caused)."""
        ...

    def get_state_store(self, name: str) -> Any: ...

    def internal_store(self, name: str) -> Any:
        """A task store the topology does not declare (task state kept on behalf of other
        stores, e.g. the stream time of window stores), created on first use."""
        ...

    def versioned_store(self, name: str) -> VersionedKeyValueStore | None:
        """Store ``name`` as a versioned store, if it is one (``None`` otherwise): one view per
        task, shared by every operator that writes or reads it."""
        ...

    def change_forwarder(self, processor: Processor, store_name: str) -> ChangeForwarder:
        """The forwarder of ``store_name``'s changes, cached or not as the store says."""
        ...

    def caching_enabled(self, store_name: str) -> bool:
        """Whether ``store_name`` caches (forwards only the last change per key per commit)."""
        ...

    def store_headers(self, store_name: str) -> bool:
        """Whether ``store_name`` keeps each value with the headers of the record that wrote
        it: ``(value, timestamp, headers)`` (``dsl.store.format=headers``), else
        ``(value, timestamp)``."""
        ...

    def register_flush(self, flush: Callable[[], bool]) -> None:
        """Have ``flush()`` called at every commit, with the caches, until none of them holds
        anything (it returns whether it forwarded anything)."""
        ...

    def wiring(self, node: str) -> NodeWiring:
        """The resolved wiring of a source or sink node."""
        ...

    def partitions_of(self, topic: str) -> int:
        """Partition count of a (real) topic as this run knows it."""
        ...

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
             headers: Headers, partition: int | None) -> None:
        """Hand a serialized record to the task's record collector."""
        ...

    def record_dropped(self, processor: str, reason: str) -> None:
        """Count and log a record dropped by Kafka Streams' rules (null keys, late records)."""
        ...

    def schedule(self, processor: Processor, interval_ms: int, punctuation_type: PunctuationType,
                 punctuator: Punctuator) -> Cancellable:
        """Call ``punctuator(time)`` every ``interval_ms`` of stream time or wall-clock time, on
        behalf of ``processor`` (whose name any error of the punctuator carries)."""
        ...

    def current_system_time_ms(self) -> int:
        """The task's wall-clock time: the host's clock, fixed for one commit interval."""
        ...

    def request_commit(self) -> None:
        """Ask the host to commit soon (every host commits at least once per batch/record)."""
        ...


class Operator(Processor[InternalProcessorContext]):
    """Base of the built-in operators: the engine initialises them with the task's
    :class:`InternalProcessorContext`."""
