"""Page views per user, in Avro through a Schema Registry.

Topic ``page-views`` (key: session id as a string; value: a ``PageView`` record in Avro,
``page_view.avsc``, in Confluent's wire format) is counted per user into the queryable store
``pages-per-user``; every new count goes to ``pages-per-user`` as a ``PageCount`` record
(``page_count.avsc``). The serdes find the registry at ``$STREAMTABLE_SCHEMA_REGISTRY``
(default ``http://localhost:8081``: ``streamtable registry``).

    streamtable broker &
    streamtable registry &
    streamtable topics create page-views
    streamtable produce page-views examples/page_views/app.py --file examples/page_views/sample.jsonl
    streamtable run examples/page_views/app.py --development-broker --until-caught-up
    streamtable consume pages-per-user examples/page_views/app.py --from-beginning
"""

from __future__ import annotations

import os
from pathlib import Path

from streamtable import StreamsBuilder
from streamtable.serde import AvroSerde
from streamtable.topology import Topology

HERE = Path(__file__).resolve().parent
SCHEMA_REGISTRY = os.environ.get("STREAMTABLE_SCHEMA_REGISTRY", "http://localhost:8081")

config = {
    "application.id": "page-views",
    "bootstrap.servers": "localhost:9092",
    "default.key.serde": "string",
    "default.value.serde": AvroSerde(HERE / "page_view.avsc", SCHEMA_REGISTRY),
}


def build_topology(source: str = "page-views", output: str = "pages-per-user") -> Topology:
    builder = StreamsBuilder()
    (builder.stream(source)
        .group_by(lambda session, view: view["user"])
        .count(materialized="pages-per-user")
        .to_stream()
        .map_values(lambda user, pages: {"user": user, "pages": pages})
        .to(output, value_serde=AvroSerde(HERE / "page_count.avsc", SCHEMA_REGISTRY)))
    return builder.build()
