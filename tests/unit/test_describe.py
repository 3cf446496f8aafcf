"""topology.describe(): sub-topologies, processors, stores and internal topics."""

from __future__ import annotations

from streamtable import StreamsBuilder


def test_describe_share_holders_shows_two_subtopologies_and_internal_topics():
    b = StreamsBuilder()
    (b.table("share-holders", materialized="share-holder-store")
        .filter(lambda k, p: True)
        .group_by(lambda k, p: (p["client"], {p["id"]}))
        .reduce(lambda a, v: a | v, lambda a, v: (a - v) or None, "us-share-holders"))
    text = b.build().describe()
    assert text.startswith("Topologies:\n   Sub-topology: 0\n")
    assert "    Source: KSTREAM-SOURCE-0000000000 (topics: [share-holders])\n" in text
    assert "    Processor: KTABLE-SOURCE-0000000001 (stores: [share-holder-store])\n" in text
    assert "    Sink: KSTREAM-SINK-0000000004 (topic: us-share-holders-repartition)\n" in text
    assert "   Sub-topology: 1\n" in text
    # the same processor name Kafka Streams logs in the seed
    assert "    Processor: KTABLE-REDUCE-0000000006 (stores: [us-share-holders])\n" in text
    assert "    repartition: us-share-holders-repartition\n" in text
    assert "    changelog: us-share-holders-changelog (store: us-share-holders)\n" in text
    assert "      <-- KTABLE-FILTER-0000000002\n" in text


def test_describe_lists_children_and_parents():
    b = StreamsBuilder()
    b.stream("in", named="source").filter(lambda k, v: v, named="keep").to("out", named="sink")
    text = b.build().describe()
    assert "    Source: source (topics: [in])\n      --> keep\n" in text
    assert "    Processor: keep (stores: [])\n      --> sink\n      <-- source\n" in text
    assert "    Sink: sink (topic: out)\n      <-- keep\n" in text
    assert "Internal topics" not in text


def test_describe_stream_stream_join_shows_its_windowed_and_join_nodes_and_stores():
    from streamtable import JoinWindows

    b = StreamsBuilder()
    left, right = b.stream("left"), b.stream("right")
    left.outer_join(right, lambda a, c: (a, c),
                    JoinWindows.of_time_difference_and_grace(100, 10)).to("out")
    text = b.build().describe()
    assert "   Sub-topology: 1" not in text  # both sides in one sub-topology (co-partitioned)
    assert ("    Processor: KSTREAM-WINDOWED-0000000002 "
            "(stores: [KSTREAM-OUTERTHIS-0000000004-store])\n"
            "      --> KSTREAM-OUTERTHIS-0000000004\n") in text
    assert ("    Processor: KSTREAM-OUTERTHIS-0000000004 (stores: "
            "[KSTREAM-OUTEROTHER-0000000005-store, KSTREAM-OUTERSHARED-0000000004-store])\n"
            ) in text
    assert ("    Processor: KSTREAM-MERGE-0000000006 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000007\n"
            "      <-- KSTREAM-OUTERTHIS-0000000004, KSTREAM-OUTEROTHER-0000000005\n") in text
    assert ("    changelog: KSTREAM-OUTERSHARED-0000000004-store-changelog "
            "(store: KSTREAM-OUTERSHARED-0000000004-store)\n") in text
