"""The DSL users write topologies with: StreamsBuilder, KStream, KTable and their views."""

from streamtable.dsl.builder import StreamsBuilder
from streamtable.dsl.grouped import KGroupedStream, KGroupedTable, TimeWindowedKStream
from streamtable.dsl.materialized import Materialized
from streamtable.dsl.stream import BranchedKStream, KStream
from streamtable.dsl.table import KTable

__all__ = [
    "BranchedKStream",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "Materialized",
    "StreamsBuilder",
    "TimeWindowedKStream",
]
