"""What a Spark contender (streamtable, spark-sql) has read of its input, for
``Status.progress``: a listener that adds up its micro-batches' source offset ranges."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bench.contenders.common import Status
from streamtable.runtime.spark.progress import JsonProgressListener


def _offsets(text: Any) -> dict[str, dict[str, int]]:
    """A source offset of a progress report (JSON; ``null`` before the first batch)."""
    try:
        offsets = json.loads(text) if text else {}
    except (TypeError, ValueError):
        return {}
    return offsets if isinstance(offsets, dict) else {}


def records_read(sources: Any, topics: Mapping[str, int]) -> dict[str, int]:
    """The records of ``topics`` a micro-batch read, by topic, from its sources' offsets.

    >>> class Source:
    ...     startOffset, endOffset = '{"bids": {"0": 5, "1": 0}}', '{"bids": {"0": 9, "1": 2}}'
    >>> records_read([Source()], {"bids": 100})
    {'bids': 6}
    """
    read: dict[str, int] = {}
    for source in sources:
        start, end = _offsets(source.startOffset), _offsets(source.endOffset)
        for topic, parts in end.items():
            if topic in topics:
                begun = start.get(topic, {})
                read[topic] = read.get(topic, 0) + sum(
                    int(e) - int(begun.get(p, 0)) for p, e in parts.items())
    return read


class InputProgress(JsonProgressListener):
    """``status.progress(records read, records of the topics read)`` after every micro-batch;
    ``input_counts``: the records of every input topic. Its reports come as JSON, as
    streamtable's own listener's do: PySpark's conversion of each report costs the batch CPU."""

    def __init__(self, status: Status, input_counts: Mapping[str, int]) -> None:
        self.status, self.counts = status, dict(input_counts)
        self.read: dict[str, int] = {}

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        for topic, n in records_read(event.progress.sources, self.counts).items():
            self.read[topic] = self.read.get(topic, 0) + n
        if self.read:
            self.status.progress(sum(self.read.values()),
                                 sum(self.counts[t] for t in self.read), every=0)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass
