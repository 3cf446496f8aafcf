"""Errors a user can act on: each names the record, the operator and the reason."""

from __future__ import annotations

from pathlib import Path


class StreamsError(Exception):
    """Base class of every error raised by streamtable.

    >>> issubclass(ProcessingError, StreamsError), issubclass(TopologyError, StreamsError)
    (True, True)
    """


class TopologyError(StreamsError):
    """The topology is invalid (raised while it is built or described).

    >>> from streamtable import StreamsBuilder
    >>> b = StreamsBuilder()
    >>> _ = b.table("users", materialized="users")
    >>> try:
    ...     b.table("accounts", materialized="users")
    ... except TopologyError as e:
    ...     print(e)
    a store named 'users' already exists
    """


class RecordError(StreamsError):
    """A record could not be handled.

    The message names the input record by ``topic``, ``partition``, ``offset`` and ``key``
    (its bytes, shown as text when they are UTF-8) so that it can be found with any Kafka
    tool, and the operator (``processor``) where it failed. For a record that went through a
    repartition (``group_by``, a join of re-keyed streams) that is the input record it came
    from, without its key; after a punctuation no input record caused it and none is named.
    ``advice`` says what a user can do about it.

    >>> print(DeserializationError("cannot decode value", topic="t", partition=0, offset=7,
    ...                            key=b"k1", processor="KSTREAM-SOURCE-0"))
    cannot decode value [topic='t' partition=0 offset=7 key='k1' processor=KSTREAM-SOURCE-0]
    """

    advice = "see the log file for the full error"

    def __init__(
        self,
        reason: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        processor: str | None = None,
        key: bytes | None = None,
    ) -> None:
        self.reason = reason
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.processor = processor
        self.key = key
        where = [] if topic is None else [f"topic={topic!r} partition={partition} offset={offset}"]
        if key is not None:
            where.append(f"key={show_key(key)}")
        if processor:
            where.append(f"processor={processor}")
        super().__init__(f"{reason} [{' '.join(where)}]" if where else reason)


def show_key(key: bytes) -> str:
    """A record key for a message: its text when it is short UTF-8, else its bytes in hex.

    >>> print(show_key(b'"client1"'), show_key(bytes([255, 0])))
    '"client1"' 0xff00
    """
    try:
        text = key.decode()
    except UnicodeDecodeError:
        text = None
    if text is not None and text.isprintable() and len(text) <= 200:
        return repr(text)
    return "0x" + key[:100].hex() + ("..." if len(key) > 100 else "")


class DeserializationError(RecordError):
    """A record's key or value could not be decoded by its serde.

    >>> e = DeserializationError("value is not JSON", topic="clicks", partition=2, offset=41)
    >>> e.topic, e.offset, e.advice.split(",")[0]
    ('clicks', 41, "produce records the topic's serde can read")
    """

    advice = ("produce records the topic's serde can read, or set "
              "default.deserialization.exception.handler=continue to skip such records (counted "
              "and logged), or errors.dead.letter.queue.topic.name=<topic> to set them aside; "
              "a new run resumes at the failed batch")


class ProcessingError(RecordError):
    """A user function (predicate, mapper, aggregator, ...) raised while processing a record.

    >>> from streamtable import StreamsBuilder, TopologyTestDriver
    >>> b = StreamsBuilder()
    >>> b.stream("in").map_values(lambda v: 1 / v).to("out")
    >>> driver = TopologyTestDriver(b.build())
    >>> try:
    ...     driver.create_input_topic("in").pipe_input("k", 0)
    ... except ProcessingError as e:
    ...     print(e.topic, e.offset, type(e.__cause__).__name__)
    in 0 ZeroDivisionError
    """

    advice = ("fix the operator's function for such records, or set "
              "processing.exception.handler=continue to skip them (counted and logged), or "
              "errors.dead.letter.queue.topic.name=<topic> to set them aside; a new run resumes "
              "at the failed batch")


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


class LeaseHeldError(StreamsError):
    """Another run of the application holds its lease (see :mod:`streamtable.storage.lease`):
    two runs must never write at once.

    >>> print(LeaseHeldError("word-count", "host a, pid 7, since 2026-01-01 10:00:00 UTC",
    ...                      30_000))  # doctest: +NORMALIZE_WHITESPACE
    word-count is already running (host a, pid 7, since 2026-01-01 10:00:00 UTC), and two runs
    of one application must not write at once. Stop that run first, or start this one with
    --take-over (StreamsApp.start(take_over=True)) to fence it: it stops at its next commit. A
    run that was killed releases its lease when its heartbeat is 30 s old (lease.timeout.ms), at
    once on the same host.
    """

    def __init__(self, application_id: str, holder: str, timeout_ms: int) -> None:
        super().__init__(
            f"{application_id} is already running ({holder}), and two runs of one application "
            "must not write at once. Stop that run first, or start this one with --take-over "
            "(StreamsApp.start(take_over=True)) to fence it: it stops at its next commit. A run "
            f"that was killed releases its lease when its heartbeat is {timeout_ms / 1000:.0f} s "
            "old (lease.timeout.ms), at once on the same host.")
        self.application_id = application_id
        self.holder = holder


class LeaseLostError(StreamsError):
    """Another run of the application took over its lease: this run is fenced and writes no
    more state or output.

    >>> print(LeaseLostError("word-count", 3, "host b, pid 9, since 2026-01-01 10:05:00 UTC"))
    ... # doctest: +NORMALIZE_WHITESPACE
    word-count was taken over by another run (host b, pid 9, since 2026-01-01 10:05:00 UTC):
    this run (lease epoch 3) is fenced and stopped without committing its batch; the new run
    goes on from the last committed one.
    """

    advice = ("nothing if the take-over was meant; otherwise stop the other run before starting "
              "this one again")

    def __init__(self, application_id: str, epoch: int, holder: str | None) -> None:
        by = f"another run ({holder})" if holder else "another run (its lease was deleted)"
        super().__init__(
            f"{application_id} was taken over by {by}: this run (lease epoch {epoch}) is fenced "
            "and stopped without committing its batch; the new run goes on from the last "
            "committed one.")
        self.application_id = application_id
        self.epoch = epoch


class ApplicationFailedError(StreamsError):
    """The application's query died; what it serves is no longer kept up to date.

    The message is one paragraph: what failed (the streamtable error inside Spark's, which
    names the record by topic, partition, offset and key, and the operator), what to do, and
    where Spark's full error is (``log_file``).

    The record and the operator are attributes too (``topic``, ``partition``, ``offset``,
    ``processor``; None when the error names none), and the exception it was made from (Spark's,
    with the whole trace) is its ``__cause__`` when there is one.

    >>> e = ApplicationFailedError("word-count", "...\\nstreamtable.errors.DeserializationError:"
    ...     " cannot decode value [topic='lines' partition=0 offset=1 key='k']\\n  at org...")
    >>> e.cause
    "DeserializationError: cannot decode value [topic='lines' partition=0 offset=1 key='k']"
    >>> e.advice.startswith("produce records the topic's serde can read")
    True
    >>> e.topic, e.partition, e.offset, e.processor
    ('lines', 0, 1, None)
    """

    def __init__(self, application_id: str, error: str, log_file: Path | str | None = None
                 ) -> None:
        import re

        self.application_id = application_id
        self.log_file = log_file
        found = re.findall(r"streamtable\.errors\.(\w+): (.+)", error)
        if found:
            name, message = found[-1]
            self.cause = f"{name}: {message.strip()}"
            kind = globals().get(name)
            advice = getattr(kind, "advice", None)
        else:
            self.cause = "The error: " + (error.strip().splitlines() or ["(none)"])[0]
            advice = None
        place = re.search(r"\[topic='(.*?)' partition=(-?\d+) offset=(-?\d+)", self.cause)
        self.topic = place.group(1) if place else None
        self.partition = int(place.group(2)) if place else None
        self.offset = int(place.group(3)) if place else None
        operator = re.search(r" processor=(\S+?)\]", self.cause)
        self.processor = operator.group(1) if operator else None
        where = f"Spark's full error is in {log_file}" if log_file else (
            "Spark's full error is in its driver log")
        self.advice = advice or "see Spark's full error"
        super().__init__(
            f"{application_id} has stopped: its query failed, so its stores are no longer "
            f"updated. {self.cause.rstrip('.')}. What to do: {self.advice}. {where}.")


class StoreNotReadyError(StreamsError):
    """A store was read through ``StreamsApp.ready_store`` (the HTTP API answers 503 with it)
    before the application's first micro-batch was served: it holds no state yet, and an absent
    key would look like a key that does not exist. Wait with ``app.wait_until_ready()``.

    >>> print(StoreNotReadyError("word-count", "counts"))  # doctest: +NORMALIZE_WHITESPACE
    store 'counts' of word-count has no state yet: the application has not finished its first
    micro-batch; wait for it with app.wait_until_ready(timeout=...)
    """

    def __init__(self, application_id: str, store: str) -> None:
        super().__init__(
            f"store {store!r} of {application_id} has no state yet: the application has not "
            "finished its first micro-batch; wait for it with app.wait_until_ready(timeout=...)")
        self.application_id = application_id
        self.store = store
