"""``streamtable describe app.py [--format text|mermaid|dot]``: what an application reads,
writes and keeps, under its real names.

    streamtable describe examples/word_count/app.py
    streamtable describe examples/share_holders/app.py --format mermaid
"""

from __future__ import annotations

import argparse

from streamtable.config import StreamsConfig
from streamtable.engine.wiring import external_topic_serdes
from streamtable.topology.graph import Topology


def summary(topology: Topology, config: StreamsConfig, app_file: str) -> str:
    """The application id, input and output topics with their serdes, and the queryable stores
    with the command that reads each."""
    serdes = external_topic_serdes(topology, config)

    def topic_line(t: str) -> str:
        key, value = serdes[t]
        return f"    {t} (key: {key.name}, value: {value.name})"

    lines = ["Input topics:", *(topic_line(t) for t in topology.source_topics)]
    if topology.sink_topics:
        lines += ["Output topics:", *(topic_line(t) for t in topology.sink_topics)]
    queryable = sorted(n for n, s in topology.stores.items() if s.queryable)
    if queryable:
        lines.append("Queryable stores:")
        lines += [f"    {name} (streamtable query {app_file} {name} [KEY])" for name in queryable]
    return "\n".join(lines) + "\n"


def cmd_describe(args: argparse.Namespace) -> int:
    from streamtable.cli import _settings, app_topology, load_app
    from streamtable.topology.diagram import dot, mermaid

    module = load_app(args.app)
    topology = app_topology(module)
    config = StreamsConfig(_settings(module, args))
    app_id = config.application_id
    if args.format == "mermaid":
        print(mermaid(topology, app_id))
    elif args.format == "dot":
        print(dot(topology, app_id))
    else:
        print(f"Application: {app_id}")
        print(topology.describe(app_id))
        print(summary(topology, config, args.app), end="")
    return 0
