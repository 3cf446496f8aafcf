"""The Nexmark queries in streamtable's DSL, each a function ``qN(params, output_topic)``
returning its topology, with the nexmark/nexmark SQL it implements in its docstring.

====================  ==========================================================
module                queries
====================  ==========================================================
``stateless.py``      q0 pass through, q1 currency conversion, q2 selection,
                      q14 calculation, q21 channel id, q22 URL directories
``joins.py``          q3 local item suggestion (foreign-key table join),
                      q13 side input (GlobalKTable), q20 bid with auction
``winning_bids.py``   q4 average price per category, q6 per seller, q9 winning
                      bids: the retraction queries (table aggregates with a
                      subtractor)
``windows.py``        q5 hot items (hopping), q7 highest bid (tumbling),
                      q8 new users (tumbling join), q11 sessions
``aggregates.py``     q17 auction statistics, q18 last bid, q19 top-10
``reports.py``        q15, q16 bidding statistics per day and per channel:
                      every figure as counted rows of a table
====================  ==========================================================

Not implemented: q10 (writes files partitioned by time: a sink, not a query), q12 (windows in
processing time: its result depends on the run, so nothing can check it) and q23 (not in the
required set).
"""

from __future__ import annotations

from bench.nexmark.queries import aggregates, joins, reports, stateless, windows, winning_bids
from bench.nexmark.queries.base import Params, Query

QUERIES: dict[str, Query] = {
    q.name: q
    for module in (stateless, joins, winning_bids, windows, aggregates, reports)
    for q in module.QUERIES
}
ORDER = sorted(QUERIES, key=lambda name: int(name[1:]))

__all__ = ["ORDER", "QUERIES", "Params", "Query"]
