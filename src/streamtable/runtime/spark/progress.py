"""Spark's progress reports of the running applications: a log line per micro-batch (records,
rate, lag) and the lag each application's metrics keep; the accumulator of the tasks' counts."""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, Any

from pyspark.accumulators import AccumulatorParam

from streamtable.kafka.ranges import offset_ranges

if TYPE_CHECKING:
    from streamtable.runtime.spark.app import StreamsApp

log = logging.getLogger("streamtable.app")
# a line per micro-batch (records, rate, lag); `streamtable run` on a terminal shows one
# updating line instead
progress_log = logging.getLogger("streamtable.progress")

_LISTENERS: dict[int, Any] = {}
# the running applications by query name, for the progress listener
_APPS: dict[str, StreamsApp] = {}


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
    return sum(end - start for source in progress.sources
               for _, _, start, end in offset_ranges(_offsets_of(source.startOffset),
                                                     _offsets_of(source.endOffset)))


def _offsets_of(text: Any) -> dict[str, dict[str, int]]:
    """A source offset of a progress report (JSON, or absent before the first batch)."""
    import json

    try:
        offsets = json.loads(text) if text else {}
    except (TypeError, ValueError):
        return {}
    return offsets if isinstance(offsets, dict) else {}


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


def remove_progress_listener(spark: Any) -> None:
    listener = _LISTENERS.pop(id(spark), None)
    if listener is not None:
        try:  # let the events already posted reach it first
            spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(5000)
        except Exception as e:
            log.debug("listener bus not drained: %s", e)
        spark.streams.removeListener(listener)


def ensure_progress_listener(spark: Any) -> None:
    """One log line per micro-batch (records in, time taken, rate, lag); the lag goes to the
    application's metrics too."""
    if id(spark) in _LISTENERS:
        return
    from pyspark.sql.streaming import StreamingQueryListener

    class _Progress(StreamingQueryListener):
        @property
        def _jlistener(self) -> Any:
            # PySpark hands the JVM a callback that converts each event from its Java object
            if not hasattr(self, "_jlistenerobj"):
                from pyspark import SparkContext

                jvm: Any = SparkContext._jvm
                self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(
                    json_progress_events(self))
            return self._jlistenerobj

        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            p = event.progress
            app = _APPS.get(p.name)
            lag = None
            if app is not None:
                app._on_progress(p)
                lag = app.metrics.total_lag
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

    listener = _Progress()
    spark.streams.addListener(listener)
    _LISTENERS[id(spark)] = listener
