"""Log lines with time, level and logger name, on the console and in an application's log file.

``streamtable run`` logs to the console and to ``<state.dir>/<application.id>/streamtable.log``;
Spark's own messages (the JVM's, see ``runtime/spark/process/log4j2.properties``) go to that
file too, and to the console only with ``-v`` (one line per error otherwise).

>>> configure_logging(verbose=False)                                 # doctest: +SKIP
>>> log_to_file(Path(".streamtable/word-count/streamtable.log"))     # doctest: +SKIP
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, TextIO

from streamtable.kafka.client_log import LIBRDKAFKA_LOGGER_NAME

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_FILE_NAME = "streamtable.log"
# the Python side of Spark's JVM bridge: its errors repeat the JVM's stack traces; librdkafka's
# lines (kafka/client_log.py): connections its clients retry, on every broker restart or stop
NOISY_LOGGERS = ("py4j", LIBRDKAFKA_LOGGER_NAME)


def configure_worker_logging(level: str | None = None) -> None:
    """A Spark Python process's logging (the workers' daemon, the source's planner): warnings
    and errors on stderr, reading like the application's own lines, and streamtable's own
    lines from ``level`` on (a level name: the driver's, passed along); nothing when the
    process has a configuration already (the driver's).

    >>> configure_worker_logging()  # a no-op where logging is configured
    """
    if logging.getLogger().handlers:
        return
    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    if level and isinstance(logging.getLevelName(level), int):
        logging.getLogger("streamtable").setLevel(level)


def configure_logging(verbose: bool = False) -> None:
    """Our loggers at INFO (DEBUG when ``verbose``) on stderr; py4j's and librdkafka's only with
    ``verbose``."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format=LOG_FORMAT)
    for name in NOISY_LOGGERS:
        noisy = logging.getLogger(name)
        noisy.setLevel(logging.DEBUG if verbose else logging.CRITICAL)
        noisy.propagate = True


def log_to_file(path: Path) -> logging.Handler:
    """Append every log line (py4j's and librdkafka's warnings and errors included) to ``path``
    too; returns the handler."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logging.getLogger().addHandler(handler)
    for name in NOISY_LOGGERS:
        noisy = logging.getLogger(name)
        if noisy.level > logging.WARNING:  # quiet on the console, complete in the file
            noisy.setLevel(logging.WARNING)
            noisy.propagate = False
            noisy.addHandler(handler)
    return handler


class ProgressLine:
    """A single updating line on a terminal for ``streamtable run --until-caught-up``: batches,
    records, rate and what is still to read. The per-batch log lines (logger
    ``streamtable.progress``) stay in the log file; on a terminal they would scroll past it.

    >>> line = ProgressLine(app.metrics, sys.stderr)                  # doctest: +SKIP
    >>> line.update(); line.done()                                     # doctest: +SKIP
    """

    def __init__(self, metrics: Any, stream: TextIO) -> None:
        self.metrics = metrics
        self.stream = stream
        self.shown = ""
        self._rate = ""
        console = [h for h in logging.getLogger().handlers
                   if isinstance(h, logging.StreamHandler)
                   and not isinstance(h, logging.FileHandler)]
        self._quiet = _NotProgress()
        for handler in console:
            handler.addFilter(self._quiet)

    def text(self) -> str:
        m = self.metrics
        # the rate of the last batch that read records (none before the first one)
        if m.last_batch_records and m.last_batch_seconds:
            self._rate = f" ({m.last_batch_records / m.last_batch_seconds:.0f} records/s)"
        lag = m.total_lag
        return (f"{m.application_id}: {m.batches} batch{'' if m.batches == 1 else 'es'}, "
                f"{m.records_in} record{'' if m.records_in == 1 else 's'}{self._rate}"
                + ("" if lag is None else f", {lag} behind"))

    def update(self) -> None:
        text = self.text()
        if text != self.shown:
            self.stream.write("\r\033[K" + text)
            self.stream.flush()
            self.shown = text

    def done(self) -> None:
        self.update()
        self.stream.write("\n")
        self.stream.flush()
        for handler in logging.getLogger().handlers:
            handler.removeFilter(self._quiet)


class _NotProgress(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.name != "streamtable.progress"
