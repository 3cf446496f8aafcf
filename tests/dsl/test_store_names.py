"""Generated store names: derived from what a store is computed from, not from its position,
so that a change elsewhere in the topology keeps them (Kafka Streams' counters shift)."""

from __future__ import annotations

import re

from streamtable import JoinWindows, StreamsBuilder, TimeWindows


def _app(*, branch_first: bool = False, branch_last: bool = False, filtered: bool = False,
         second_count: bool = False) -> dict[str, str | None]:
    b = StreamsBuilder()
    words = b.stream("words")
    if branch_first:
        words.filter(lambda k, v: v).map_values(str.upper).to("loud")
    upstream = words.filter(lambda k, v: v) if filtered else words
    upstream.group_by_key().count()
    upstream.group_by(lambda k, v: v).windowed_by(TimeWindows.of(1000)).count()
    b.table("users").join(b.table("cities"), lambda u, c: (u, c))
    words.join(b.stream("clicks"), lambda w, c: (w, c),
               JoinWindows.of_time_difference_and_grace(10, 0)).to("joined")
    if second_count:
        words.group_by_key().count()
    if branch_last:
        words.filter(lambda k, v: v).to("kept")
    return {name: spec.legacy_name for name, spec in b.build().stores.items()}


def test_a_branch_added_before_or_after_keeps_every_generated_store_name():
    before = _app()
    assert set(_app(branch_first=True)) == set(before)
    assert set(_app(branch_last=True)) == set(before)
    # Kafka Streams' counter names did shift with the branch added first
    assert (sorted(filter(None, _app(branch_first=True).values()))
            != sorted(filter(None, before.values())))


def test_generated_names_keep_the_kafka_streams_prefix_with_a_digest_and_the_counter_name():
    for name, legacy in _app().items():
        assert legacy is not None
        prefix = re.sub(r"-\d{10}", "", legacy)  # Kafka Streams' name without its counter
        digest = re.sub(r"-[0-9a-f]{10}", "", name)
        assert prefix == digest, (name, legacy)


def test_stateless_operators_upstream_keep_the_name_so_the_change_is_seen_as_a_change():
    # the store is the same store with another upstream: evolution refuses to keep its state
    # rather than silently starting a new one (see topology/evolution.py)
    assert set(_app(filtered=True)) == set(_app())


def test_a_second_store_of_the_same_derivation_gets_a_name_of_its_own():
    names = _app(second_count=True)
    assert len(names) == len(_app()) + 1
    assert set(_app()) <= set(names)  # built after the first: the first keeps its name


def test_named_stores_keep_their_names_and_have_no_legacy_name():
    b = StreamsBuilder()
    b.stream("words").group_by_key().count("counts")
    assert b.build().stores["counts"].legacy_name is None
