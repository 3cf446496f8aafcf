"""What a Spark contender (streamtable, spark-sql) has read of its input, for
``Status.progress``: a listener that adds up its micro-batches' source offset ranges."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.contenders.common import Status
from streamtable.runtime.spark.progress import JsonProgressListener, records_by_topic


def records_read(sources: Any, topics: Mapping[str, int]) -> dict[str, int]:
    """The records of ``topics`` a micro-batch read, by topic, from its sources' offsets.

    >>> class Source:
    ...     startOffset, endOffset = '{"bids": {"0": 5, "1": 0}}', '{"bids": {"0": 9, "1": 2}}'
    >>> records_read([Source()], {"bids": 100})
    {'bids': 6}
    """
    return {topic: n for topic, n in records_by_topic(sources).items() if topic in topics}


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
