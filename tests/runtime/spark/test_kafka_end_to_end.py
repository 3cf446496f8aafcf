"""The Spark runtime against a real broker: word count through Kafka, restart from checkpoint."""

from __future__ import annotations

import struct
from collections import Counter

import pytest
from tests.runtime.spark.kafka_util import new_topics, produce, read_all

from streamtable.cli import load_app

pytestmark = pytest.mark.spark

LINES_1 = ["all streams lead to kafka", "hello kafka streams", "join kafka summit"]
LINES_2 = ["kafka streams on spark", "streams and tables"]


def expected_counts(lines):
    wc = load_app("examples/word_count/app.py")
    return Counter(w for line in lines for w in wc.split_words(line))


def output_counts(bootstrap, topic):
    per_word: dict[str, list[int]] = {}
    for msg in read_all(bootstrap, topic):
        per_word.setdefault(msg.key().decode(), []).append(struct.unpack(">q", msg.value())[0])
    return per_word


def test_word_count_through_kafka_and_restart_from_checkpoint(spark, bootstrap, tmp_path):
    from streamtable.runtime.spark import StreamsApp

    wc = load_app("examples/word_count/app.py")
    src, out = new_topics(bootstrap, 2, "lines", "counts")
    topology = wc.build_topology(src, out)
    config = dict(wc.config, **{"bootstrap.servers": bootstrap, "application.id": f"wc-{src}"})
    produce(bootstrap, src, [(None, line.encode()) for line in LINES_1])
    app = StreamsApp(topology, config=config, state_dir=tmp_path, spark=spark,
                     development_broker=True)
    app.run_until_caught_up(timeout=120)
    expected = expected_counts(LINES_1)
    assert app.store("counts-store").to_dict() == dict(expected)

    produce(bootstrap, src, [(None, line.encode()) for line in LINES_2])
    again = StreamsApp(topology, config=config, state_dir=tmp_path, spark=spark,
                       development_broker=True)
    again.run_until_caught_up(timeout=120)
    expected = expected_counts(LINES_1 + LINES_2)
    assert again.store("counts-store").to_dict() == dict(expected)
    per_word = output_counts(bootstrap, out)
    assert {w: seq[-1] for w, seq in per_word.items()} == dict(expected)
    for word, seq in per_word.items():
        assert seq == sorted(set(seq)), f"{word}: counts repeat or go back: {seq}"
