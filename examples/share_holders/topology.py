"""The share-holders topology: US share-holders per client, from positions and reference data.

Positions (``share-holders``, key: position id) are joined to the reference data
(``shares-ref-data``, key: ticker) by a foreign-key join on the ticker, so the exchange comes from
the reference data when it is known there (and from the position otherwise). Positions on US
exchanges are grouped by client and reduced to the set of position ids; a client whose last US
position closes is deleted.
"""

from __future__ import annotations

from typing import Any

from streamtable import StreamsBuilder
from streamtable.topology import Topology

POSITIONS_TOPIC = "share-holders"
REF_DATA_TOPIC = "shares-ref-data"
US_SHARE_HOLDERS = "us-share-holders"
POSITIONS_ENRICHED = "positions-enriched"
DEFAULT_US_EXCHANGES = ("NASDAQ", "NYSE")


def enrich(position: dict[str, Any], ref: dict[str, Any] | None) -> dict[str, Any]:
    """The position with ``exchange`` and ``name`` from the reference data when known."""
    enriched = dict(position)
    if ref is not None:
        enriched["exchange"] = ref.get("exchange") or position.get("exchange")
        enriched["name"] = ref.get("name")
    else:
        enriched.setdefault("exchange", None)
        enriched.setdefault("name", None)
    return enriched


def build_topology(us_exchanges: tuple[str, ...] | list[str] = DEFAULT_US_EXCHANGES,
                   positions_topic: str = POSITIONS_TOPIC,
                   ref_data_topic: str = REF_DATA_TOPIC) -> Topology:
    exchanges = frozenset(us_exchanges)
    builder = StreamsBuilder()
    ref_data = builder.table(ref_data_topic, materialized="shares-ref-data-store")
    positions = builder.table(positions_topic, materialized="share-holder-store")
    (positions
        .left_join(ref_data, enrich, foreign_key_extractor=lambda p: p["ticker"],
                   materialized=POSITIONS_ENRICHED)
        .filter(lambda key, p: p["exchange"] in exchanges)
        .group_by(lambda key, p: (p["client"], frozenset([p["id"]])))
        .reduce(adder=lambda a, b: a | b,
                subtractor=lambda a, b: (a - b) or None,
                materialized=US_SHARE_HOLDERS))
    return builder.build()
