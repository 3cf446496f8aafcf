"""Every operator family of the suite, by name, in the order they run."""

from __future__ import annotations

from bench.operators.classic import ShareHolders, WordCount
from bench.operators.family import Family
from bench.operators.joins import (
    ForeignKey,
    GlobalTable,
    StreamStreamInner,
    StreamStreamOuter,
    StreamTable,
    TableTable,
)
from bench.operators.processors import Deduplication
from bench.operators.windows import Hopping, Session, Sliding, Tumbling, TumblingSuppressed

FAMILIES: dict[str, Family] = {f.name: f for f in (
    Tumbling(), TumblingSuppressed(), Hopping(), Sliding(), Session(),
    StreamStreamInner(), StreamStreamOuter(), StreamTable(), GlobalTable(), TableTable(),
    ForeignKey(), Deduplication(), WordCount(), ShareHolders(),
)}

#: short names accepted by ``--family`` besides the families' own
ALIASES = {"tumbling-suppressed": "tumbling-suppress", "suppress": "tumbling-suppress",
           "ss-join": "ss-inner", "global": "global-table", "fk": "fk-join",
           "pk-join": "table-table"}
