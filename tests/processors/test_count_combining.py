"""A count after a repartition combines records per key before the shuffle when its store
caches: invisible to users (same table, same emitted changes and timestamps), fewer records."""

from __future__ import annotations

import random

import pytest

from streamtable import StreamsBuilder, TopologyTestDriver


def _topology(counting: str):
    b = StreamsBuilder()
    grouped = (b.stream("lines")
               .flat_map_values(lambda line: line.split())
               .group_by(lambda k, word: word))
    if counting == "count":
        table = grouped.count(materialized="counts")
    else:  # the same numbers through an aggregate, which never combines
        table = grouped.aggregate(lambda: 0, lambda k, v, n: n + 1, materialized="counts")
    table.to_stream().to("out")
    return b.build()


def _lines(seed: int, n: int) -> list[tuple[str, str, int]]:
    rng = random.Random(seed)
    words = ["a", "b", "c", "d", "e"]
    out = []
    for i in range(n):
        line = " ".join(rng.choice(words) for _ in range(rng.randint(0, 6)))
        out.append((f"k{rng.randint(0, 3)}", line, 1000 + rng.randint(-50, 50) + 10 * i))
    return out


def _run(counting: str, lines, cache: bool, batch_mode: bool, cuts=()):
    config = {"cache.max.bytes.buffering": 10_000_000 if cache else 0}
    driver = TopologyTestDriver(_topology(counting), config, batch_mode=batch_mode)
    topic = driver.create_input_topic("lines", partitions=2)
    for i, (k, line, ts) in enumerate(lines):
        if batch_mode and i in cuts:
            driver.run_batch()
        topic.pipe_input(k, line, timestamp=ts, partition=i % 2)
    if batch_mode:
        driver.run_batch()
    out = [(r.key, r.value, r.timestamp) for r in driver.create_output_topic("out").read_records()]
    repartitioned = sum(len(driver.topic_records(t)) for t in driver._logs
                        if t.endswith("-repartition"))
    return driver, out, repartitioned


def _per_key(out: list[tuple[str, int, int]]) -> dict[str, list[tuple[int, int]]]:
    changes: dict[str, list[tuple[int, int]]] = {}
    for key, value, timestamp in out:
        changes.setdefault(key, []).append((value, timestamp))
    return changes


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("batch_mode", [False, True])
def test_combined_count_emits_what_counting_one_by_one_emits(seed, batch_mode):
    lines = _lines(seed, 80)
    cuts = set(random.Random(seed).sample(range(1, 80), 3))
    d1, combined, n_combined = _run("count", lines, True, batch_mode, cuts)
    d2, reference, n_reference = _run("aggregate", lines, True, batch_mode, cuts)
    if batch_mode:
        # the counting tasks merge what the two upstream tasks wrote by timestamp, so keys
        # first reach a task in another order when records were combined: each key's changes
        # (what Kafka orders, within its partition) are the same, in the same order
        assert _per_key(combined) == _per_key(reference)
    else:
        assert combined == reference
    assert d1.get_key_value_store("counts").to_dict() == d2.get_key_value_store("counts").to_dict()
    assert n_combined < n_reference


def test_without_caching_every_record_is_counted_on_its_own():
    lines = _lines(7, 40)
    _, combined, n_combined = _run("count", lines, False, batch_mode=True)
    _, reference, n_reference = _run("aggregate", lines, False, batch_mode=True)
    assert combined == reference
    assert n_combined == n_reference == sum(len(line.split()) for _, line, _ in lines)


def test_null_values_are_dropped_and_counted_before_combining():
    b = StreamsBuilder()
    b.stream("in").group_by(lambda k, v: k).count(materialized="counts")
    driver = TopologyTestDriver(b.build())
    topic = driver.create_input_topic("in")
    topic.pipe_input("a", None)
    topic.pipe_input("a", 1)
    assert driver.get_key_value_store("counts").to_dict() == {"a": 1}
    assert driver.dropped_records == {"null key or value in an aggregation": 1}
