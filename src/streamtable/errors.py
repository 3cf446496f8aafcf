"""Errors a user can act on: each names the record, the operator and the reason."""

from __future__ import annotations


class StreamsError(Exception):
    """Base class of every error raised by streamtable."""


class TopologyError(StreamsError):
    """The topology is invalid (raised while it is built or described)."""


class RecordError(StreamsError):
    """A record could not be handled.

    The message names the record by ``topic``, ``partition`` and ``offset`` so that it can be
    found with any Kafka tool, and the operator (``processor``) where it failed.
    """

    def __init__(
        self,
        reason: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        processor: str | None = None,
    ) -> None:
        self.reason = reason
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.processor = processor
        where = f"topic={topic!r} partition={partition} offset={offset}"
        if processor:
            where += f" processor={processor}"
        super().__init__(f"{reason} [{where}]")


class DeserializationError(RecordError):
    """A record's key or value could not be decoded by its serde."""


class ProcessingError(RecordError):
    """A user function (predicate, mapper, aggregator, ...) raised while processing a record."""


class StorageError(StreamsError, OSError):
    """Durable storage (task state, batch markers) could not be read or written; the message
    names the path and the operating system's error. Nothing of the batch is committed: once
    the cause is fixed, a restart replays it.

    >>> str(StorageError("write", "/state/t/0.delta", PermissionError(13, "Permission denied")))
    'cannot write /state/t/0.delta: [Errno 13] Permission denied'
    """

    def __init__(self, action: str, path: str, error: OSError) -> None:
        super().__init__(f"cannot {action} {path}: {error}")
        self.path = path
        self.errno = error.errno
