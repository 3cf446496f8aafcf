"""Spark's progress reports of the running queries: a log line per micro-batch (records, rate,
lag), and each report handed to the callback of whoever started the query (the application
keeps the lag in its metrics); the accumulator of the tasks' counts.

>>> listen_to_progress(spark, "word-count", app_callback)       # doctest: +SKIP
>>> stop_listening(spark, "word-count", app_callback)           # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from pyspark.accumulators import AccumulatorParam
from pyspark.sql.streaming import StreamingQueryListener

from streamtable.kafka.ranges import offset_ranges

log = logging.getLogger("streamtable.app")
# a line per micro-batch (records, rate, lag); `streamtable run` on a terminal shows one
# updating line instead
progress_log = logging.getLogger("streamtable.progress")

#: Called with each progress report of a query (PySpark's ``StreamingQueryProgress``); returns
#: the records the query is behind, for the report's log line (None: not known).
ProgressCallback = Callable[[Any], int | None]

# the listener of each SparkSession (by id) that has one
_LISTENERS: dict[int, ProgressListener] = {}


class CountsParam(AccumulatorParam):
    """Tasks' counts (``Counter``) summed on the driver."""

    def zero(self, value: Any) -> Counter[str]:
        return Counter()

    def addInPlace(self, value1: Any, value2: Any) -> Any:
        value1.update(value2)
        return value1


def records_in(progress: Any) -> int:
    """The records a micro-batch read, from its sources' offsets: Spark's ``numInputRows`` counts
    the offset ranges the stages were handed (``read.mode=ranges``), not the records in them."""
    return sum(records_by_topic(progress.sources).values())


def records_by_topic(sources: Any) -> Counter[str]:
    """The records a micro-batch's sources (its progress report's ``sources``) read, by topic.

    >>> from types import SimpleNamespace
    >>> source = SimpleNamespace(startOffset='{"bids": {"0": 5, "1": 0}}',
    ...                          endOffset='{"bids": {"0": 9, "1": 2}, "people": {"0": 3}}')
    >>> sorted(records_by_topic([source]).items())
    [('bids', 6), ('people', 3)]
    """
    read: Counter[str] = Counter()
    for source in sources or ():
        for topic, _, start, end in offset_ranges(_offsets_of(source.startOffset),
                                                  _offsets_of(source.endOffset)):
            read[topic] += end - start
    return read


def _offsets_of(text: Any) -> dict[str, dict[str, int]]:
    """A source offset of a progress report (JSON, or absent before the first batch)."""
    import json

    try:
        offsets = json.loads(text) if text else {}
    except (TypeError, ValueError):
        return {}
    return offsets if isinstance(offsets, dict) else {}


def partition_lag(progress: Any) -> dict[tuple[str, int], int]:
    """Records behind per (topic, partition) after a micro-batch: its sources' latest offsets
    less the batch's end offsets.

    >>> from types import SimpleNamespace
    >>> source = SimpleNamespace(latestOffset='{"t": {"0": 10, "1": 4}}',
    ...                          endOffset='{"t": {"0": 7}}')
    >>> partition_lag(SimpleNamespace(sources=[source]))
    {('t', 0): 3, ('t', 1): 4}
    """
    import json

    lag: dict[tuple[str, int], int] = {}
    for source in progress.sources or ():
        try:
            latest = json.loads(source.latestOffset or "null") or {}
            end = json.loads(source.endOffset or "null") or {}
        except (TypeError, ValueError):
            continue
        for topic, partitions in latest.items():
            for partition, offset in partitions.items():
                done = end.get(topic, {}).get(partition, 0)
                lag[(topic, int(partition))] = max(0, int(offset) - int(done))
    return lag


def json_progress_events(listener: Any) -> Any:
    """The JVM's callback for ``listener`` (a PySpark ``StreamingQueryListener``), which reads
    each progress report from its JSON: one call into the JVM per report. PySpark's own callback
    walks each of the report's Java maps through py4j and ends every walk with an exception it
    converts by looking exception classes up by name, each failed lookup a search of every jar:
    measured at ~20 ms of the driver's Python per batch, and a JVM thread searching jars through
    most of each batch, CPU taken from the batch that runs meanwhile on a 2-core machine."""
    import json

    from pyspark.sql.streaming.listener import JStreamingQueryListener, QueryProgressEvent

    class JsonEvents(JStreamingQueryListener):
        def onQueryProgress(self, jevent: Any) -> None:
            self.pylistener.onQueryProgress(QueryProgressEvent.fromJson(
                {"progress": json.loads(jevent.progress().json())}))

    return JsonEvents(listener)


class JsonProgressListener(StreamingQueryListener):
    """A PySpark ``StreamingQueryListener`` whose progress reports reach it as JSON
    (:func:`json_progress_events`): subclass it for any listener of a query that should not
    pay PySpark's own conversion of each report."""

    @property
    def _jlistener(self) -> Any:
        # PySpark hands the JVM a callback that converts each event from its Java object
        if not hasattr(self, "_jlistenerobj"):
            from pyspark import SparkContext

            jvm: Any = SparkContext._jvm
            self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(
                json_progress_events(self))
        return self._jlistenerobj


class ProgressListener(JsonProgressListener):
    """Logs one line per micro-batch (records in, time taken, rate, lag) and hands each report
    to the callback registered for its query's name (see :func:`listen_to_progress`)."""

    def __init__(self) -> None:
        super().__init__()
        self.callbacks: dict[str, ProgressCallback] = {}

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        p = event.progress
        callback = self.callbacks.get(p.name)
        lag = callback(p) if callback is not None else None
        rows = records_in(p)
        if rows == 0:
            return
        ms = p.batchDuration or 1
        progress_log.info("%s batch %d: %d records in %.2f s (%.0f records/s)%s",
                          p.name, p.batchId, rows, ms / 1000, rows * 1000 / ms,
                          "" if lag is None else f", {lag} behind")
        progress_log.debug("%s batch %d: durations (ms) %s", p.name, p.batchId,
                           dict(p.durationMs))

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        if event.exception:
            # StreamsApp.raise_if_failed (the CLI, the query server) reports it in full
            log.debug("query %s failed: %s", event.id, event.exception)


def listen_to_progress(spark: Any, query_name: str, callback: ProgressCallback) -> None:
    """Hand the progress reports of query ``query_name`` to ``callback``, and log a line per
    micro-batch of every query of ``spark`` (one listener per session, added on first use)."""
    listener = _LISTENERS.get(id(spark))
    if listener is None:
        listener = ProgressListener()
        spark.streams.addListener(listener)
        _LISTENERS[id(spark)] = listener
    listener.callbacks[query_name] = callback


def stop_listening(spark: Any, query_name: str, callback: ProgressCallback) -> None:
    """Stop handing ``query_name``'s reports to ``callback`` (unless another callback has taken
    its place), then remove the session's listener if no query of it is active."""
    listener = _LISTENERS.get(id(spark))
    # == rather than is: a bound method is a new object at each access
    if listener is not None and listener.callbacks.get(query_name) == callback:
        del listener.callbacks[query_name]
    if not spark.streams.active:
        # no query left to report on: a Python listener still registered when the JVM shuts
        # down would be called after Python's side is gone
        _remove_listener(spark)


def _remove_listener(spark: Any) -> None:
    listener = _LISTENERS.pop(id(spark), None)
    if listener is not None:
        try:  # let the events already posted reach it first
            spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(5000)
        except Exception as e:
            log.debug("listener bus not drained: %s", e)
        spark.streams.removeListener(listener)
