"""Word count, the Kafka Streams way: lines in, a table of counts per word out.

    streamtable broker &                                    # a development broker on :9092
    streamtable topics create streams-plaintext-input
    streamtable produce streams-plaintext-input examples/word_count/app.py \
        --file examples/word_count/sample.txt
    streamtable run examples/word_count/app.py --development-broker --until-caught-up
    streamtable consume streams-wordcount-output examples/word_count/app.py --from-beginning
    streamtable query examples/word_count/app.py counts-store kafka
"""

from __future__ import annotations

import re

from streamtable import StreamsBuilder
from streamtable.topology import Topology

WORD = re.compile(r"\W+")

config = {
    "application.id": "wordcount",
    "bootstrap.servers": "localhost:9092",
    "default.key.serde": "string",
    "default.value.serde": "string",
}


def split_words(line: str) -> list[str]:
    return [w for w in WORD.split(line.lower()) if w]


def build_topology(input_topic: str = "streams-plaintext-input",
                   output_topic: str = "streams-wordcount-output") -> Topology:
    builder = StreamsBuilder()
    counts = (
        builder.stream(input_topic)
        .flat_map_values(split_words)
        .group_by(lambda key, word: word)
        .count(materialized="counts-store")
    )
    counts.to_stream().to(output_topic, value_serde="long")
    return builder.build()
