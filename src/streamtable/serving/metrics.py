"""An application's metrics, and their Prometheus text exposition (``GET /metrics``).

The runtime adds to an :class:`AppMetrics` after every micro-batch: records read per source
topic, records written per output topic, records dropped (by reason) and dead-lettered (counted
by the tasks), the batch's duration, and the lag per partition (the source's latest offsets
minus the batch's end offsets, from Spark's progress report). :func:`exposition` renders them in
Prometheus' text format (version 0.0.4), with no client library.

>>> m = AppMetrics("word-count")
>>> m.record_batch(0.5, {"records_in:lines": 3, "records_out:counts": 2})
>>> print(exposition(m.families()).splitlines()[2])
streamtable_batches_total{application_id="word-count"} 1
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# the kinds of counts tasks report, as "<kind>:<label value>" keys
RECORDS_IN = "records_in"
RECORDS_OUT = "records_out"
DROPPED = "dropped"
DEAD_LETTERED = "dead_lettered"


@dataclass
class Family:
    """One metric: its name, help, type (counter or gauge) and samples (labels, value)."""

    name: str
    help: str
    type: str
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()
                                  and abs(value) < 2**53):
        return str(int(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def exposition(families: Iterable[Family]) -> str:
    """Prometheus' text format: ``# HELP`` and ``# TYPE`` lines, then one line per sample.

    >>> print(exposition([Family("lag", 'records "behind"\\n', "gauge",
    ...                          [({"topic": 'a"b', "partition": "0"}, 7.0)])]), end="")
    # HELP lag records "behind"\\n
    # TYPE lag gauge
    lag{topic="a\\"b",partition="0"} 7
    """
    lines = []
    for family in families:
        help_text = family.help.replace("\\", "\\\\").replace("\n", "\\n")
        lines.append(f"# HELP {family.name} {help_text}")
        lines.append(f"# TYPE {family.name} {family.type}")
        for labels, value in family.samples:
            rendered = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
            lines.append(f"{family.name}{{{rendered}}} {_number(value)}" if rendered
                         else f"{family.name} {_number(value)}")
    return "\n".join(lines) + "\n"


class AppMetrics:
    """What one application has done so far (thread-safe: batches add, scrapes read)."""

    def __init__(self, application_id: str) -> None:
        self.application_id = application_id
        self._lock = threading.Lock()
        self.batches = 0
        self.batch_seconds_total = 0.0
        self.last_batch_seconds = 0.0
        self.counts: Counter[str] = Counter()  # "<kind>:<label value>" -> total
        self.lag: dict[tuple[str, int], int] = {}
        self.last_batch_records = 0

    def record_batch(self, seconds: float, counts: Mapping[str, int]) -> None:
        """A micro-batch done in ``seconds``, with the counts its tasks reported."""
        with self._lock:
            self.batches += 1
            self.batch_seconds_total += seconds
            self.last_batch_seconds = seconds
            self.counts.update(counts)
            self.last_batch_records = sum(v for k, v in counts.items()
                                          if k.startswith(RECORDS_IN + ":"))

    def record_lag(self, lag: Mapping[tuple[str, int], int]) -> None:
        """Records behind per (topic, partition), after the latest batch."""
        with self._lock:
            self.lag = dict(lag)

    @property
    def records_in(self) -> int:
        return sum(v for k, v in self.counts.items() if k.startswith(RECORDS_IN + ":"))

    @property
    def total_lag(self) -> int | None:
        return sum(self.lag.values()) if self.lag else None

    def families(self, state_entries: Mapping[str, int] | None = None) -> list[Family]:
        """The metrics as :class:`Family` objects; ``state_entries``: entries per queryable
        store, read at scrape time."""
        app = {"application_id": self.application_id}
        with self._lock:
            counts = dict(self.counts)
            out = [
                Family("streamtable_batches_total", "micro-batches completed", "counter",
                       [(app, self.batches)]),
                Family("streamtable_batch_duration_seconds_total",
                       "time spent in micro-batches", "counter",
                       [(app, self.batch_seconds_total)]),
                Family("streamtable_last_batch_duration_seconds",
                       "duration of the latest micro-batch", "gauge",
                       [(app, self.last_batch_seconds)]),
            ]
            lag = sorted(self.lag.items())
        for kind, name, help_text, label in (
                (RECORDS_IN, "streamtable_records_in_total", "records read per source topic",
                 "topic"),
                (RECORDS_OUT, "streamtable_records_out_total",
                 "records written per output topic", "topic"),
                (DROPPED, "streamtable_records_dropped_total",
                 "records dropped (Kafka Streams' rules, or skipped by a handler) per reason",
                 "reason")):
            out.append(Family(name, help_text, "counter", [
                ({**app, label: key.split(":", 1)[1]}, value)
                for key, value in sorted(counts.items()) if key.startswith(kind + ":")]))
        out.append(Family("streamtable_records_dead_lettered_total",
                          "records sent to the dead-letter topic", "counter",
                          [(app, counts.get(DEAD_LETTERED, 0))]))
        out.append(Family("streamtable_lag_records",
                          "records in the partition not yet processed", "gauge",
                          [({**app, "topic": t, "partition": str(p)}, v) for (t, p), v in lag]))
        if state_entries is not None:
            out.append(Family("streamtable_state_entries", "entries per queryable store",
                              "gauge", [({**app, "store": s}, n)
                                        for s, n in sorted(state_entries.items())]))
        return out
