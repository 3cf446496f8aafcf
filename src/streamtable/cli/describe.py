"""``streamtable describe app.py [--format text|mermaid|dot]``: what an application reads,
writes and keeps, under its real names; ``streamtable describe --diff OLD.py NEW.py``: what
deploying NEW over OLD's state keeps, rebuilds and drops (see docs/upgrading.md).

    streamtable describe examples/word_count/app.py
    streamtable describe examples/share_holders/app.py --format mermaid
    streamtable describe --diff app-v1.py app-v2.py
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


def upgrade_text(old_file: str, new_file: str, args: argparse.Namespace) -> tuple[str, bool]:
    """What deploying ``new_file`` over the state of ``old_file`` does, and whether the start
    would be refused."""
    from streamtable.cli import _settings, app_topology, load_app
    from streamtable.topology.evolution import plan_upgrade
    from streamtable.topology.fingerprint import topology_fingerprint

    old = topology_fingerprint(app_topology(load_app(old_file)))
    module = load_app(new_file)
    config = StreamsConfig(_settings(module, argparse.Namespace(**{**vars(args),
                                                                   "app": new_file})))
    plan = plan_upgrade(old, topology_fingerprint(app_topology(module)))
    start = str(config["upgrade.new.state.from"])
    lines = [f"Upgrading {config.application_id} from {old_file} to {new_file} "
             f"(new state from: {start}):", plan.text(start).rstrip("\n")]
    refused = bool(plan.refused or plan.refused_whole)
    if refused:
        lines.append(f"The start would be refused: {plan.refusal(config.application_id, new_file)}")
    lines.append("(At the start a store is also refused when the partition counts of its input "
                 "topics changed.)")
    return "\n".join(lines) + "\n", refused


def cmd_describe(args: argparse.Namespace) -> int:
    from streamtable.cli import _settings, app_topology, load_app
    from streamtable.topology.diagram import dot, mermaid

    if args.diff:
        text, refused = upgrade_text(args.diff[0], args.diff[1], args)
        print(text, end="")
        return 1 if refused else 0
    if args.app is None:
        raise SystemExit("streamtable: describe needs an application file, or --diff OLD NEW")
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
