"""topology.describe(): sub-topologies, processors, stores and internal topics."""

from __future__ import annotations

import re

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
    topology = b.build()
    text = topology.describe()
    assert "   Sub-topology: 1" not in text  # both sides in one sub-topology (co-partitioned)
    # generated store names: Kafka Streams' prefixes with a digest of the join's inputs in
    # place of the counter, which was their name before (legacy_name)
    names = {spec.legacy_name: name for name, spec in topology.stores.items()}
    this, other, shared = (names["KSTREAM-OUTERTHIS-0000000004-store"],
                           names["KSTREAM-OUTEROTHER-0000000005-store"],
                           names["KSTREAM-OUTERSHARED-0000000004-store"])
    assert re.fullmatch(r"KSTREAM-OUTERTHIS-[0-9a-f]{10}-store", this)
    assert ("    Processor: KSTREAM-WINDOWED-0000000002 "
            f"(stores: [{this}])\n"
            "      --> KSTREAM-OUTERTHIS-0000000004\n") in text
    assert ("    Processor: KSTREAM-OUTERTHIS-0000000004 (stores: "
            f"[{other}, {shared}])\n") in text
    assert ("    Processor: KSTREAM-MERGE-0000000006 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000007\n"
            "      <-- KSTREAM-OUTERTHIS-0000000004, KSTREAM-OUTEROTHER-0000000005\n") in text
    assert f"    changelog: {shared}-changelog (store: {shared})\n" in text


def _word_count():
    b = StreamsBuilder()
    (b.stream("lines", named="lines").flat_map_values(lambda v: v.split(), named="split")
        .group_by(lambda k, w: w).count("counts")
        .to_stream().to("word-counts", value_serde="long", named="write"))
    return b.build()


def test_describe_with_the_application_id_names_the_real_internal_topics():
    text = _word_count().describe("wc")
    assert "    Sink: KSTREAM-SINK-0000000002 (topic: wc-counts-repartition)\n" in text
    assert "    Source: KSTREAM-SOURCE-0000000003 (topics: [wc-counts-repartition])\n" in text
    assert text.endswith("Internal topics:\n    repartition: wc-counts-repartition\n"
                         "    changelog: wc-counts-changelog (store: counts)\n")
    assert "<application.id>" not in text


def test_mermaid_of_a_word_count():
    from streamtable.topology.diagram import mermaid

    assert mermaid(_word_count(), "wc") == """\
---
title: wc
---
flowchart LR
  t0[/"lines"/]
  t1[/"word-counts"/]
  subgraph st0["Sub-topology 0"]
    n0["lines"]
    n1["split"]
    n2["KSTREAM-KEY-SELECT-0000000000"]
    n3["KSTREAM-FILTER-0000000001"]
    n4["KSTREAM-SINK-0000000002"]
  end
  subgraph st1["Sub-topology 1"]
    n5["KSTREAM-SOURCE-0000000003"]
    n6["KSTREAM-AGGREGATE-0000000004"]
    n7["KTABLE-TOSTREAM-0000000005"]
    n8["write"]
    s0[("counts")]
  end
  t0 --> n0
  n0 --> n1
  n1 --> n2
  n2 --> n3
  n3 --> n4
  n4 -->|"wc-counts-repartition"| n5
  n5 --> n6
  n6 --> n7
  n7 --> n8
  n8 --> t1
  n6 -.- s0"""


def test_a_foreign_key_join_is_one_box_per_subtopology_and_its_own_stores_are_hidden():
    from streamtable.topology.diagram import dot, mermaid

    b = StreamsBuilder()
    ref = b.table("ref", materialized="ref-store")
    b.table("positions", materialized="positions-store").left_join(
        ref, lambda p, r: p, foreign_key_extractor=lambda p: p["ticker"],
        materialized="enriched")
    topology = b.build()
    assert len(topology.nodes) == 15 and len(topology.stores) == 5
    text = mermaid(topology, "app")
    boxes = [line.strip() for line in text.splitlines() if "foreign-key join" in line]
    # the join's 11 generated nodes: one box in each of the three sub-topologies it spans
    assert len(boxes) == 3
    assert all(line.endswith('[["foreign-key join enriched"]]') for line in boxes)
    assert "SUBSCRIPTION" not in text and "MIRROR" not in text
    assert '-->|"app-enriched-subscription-registration"|' in text
    assert '-->|"app-enriched-subscription-response"|' in text
    assert '-->|"app-enriched-subscription-mirror"|' in text
    stores = sorted(line.strip().split('[("')[1][:-3] for line in text.splitlines()
                    if '[("' in line)
    assert stores == ["enriched", "positions-store", "ref-store"]
    graph = dot(topology, "app")
    assert graph.count("shape=box3d") == 3 and graph.count("shape=cylinder") == 3
    assert graph.count("subgraph cluster_") == 3


def test_the_describe_command_shows_application_serdes_and_stores(capsys):
    from pathlib import Path

    from streamtable.cli import main

    app = str(Path(__file__).resolve().parents[2] / "examples" / "word_count" / "app.py")
    assert main(["describe", app]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Application: wordcount\nTopologies:\n")
    assert "    repartition: wordcount-counts-store-repartition\n" in out
    assert out.endswith(
        "Input topics:\n    streams-plaintext-input (key: string, value: string)\n"
        "Output topics:\n    streams-wordcount-output (key: string, value: long)\n"
        f"Queryable stores:\n    counts-store (streamtable query {app} counts-store [KEY])\n")
    assert main(["describe", app, "--format", "mermaid"]) == 0
    assert capsys.readouterr().out.startswith("---\ntitle: wordcount\n---\nflowchart LR\n")


def test_the_readme_diagram_is_what_describe_draws():
    """The ```mermaid block of the README's share-holders example is the command's output."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    text = (root / "README.md").read_text()
    start = text.index("\n### Share-holders\n")
    pasted = text[start:].split("```mermaid\n", 1)[1].split("```", 1)[0]
    drawn = subprocess.run(
        [sys.executable, "-m", "streamtable.cli", "describe", "examples/share_holders/app.py",
         "--format", "mermaid"], cwd=root, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=str(root / "src")))
    assert drawn.returncode == 0, drawn.stderr
    assert pasted == drawn.stdout
