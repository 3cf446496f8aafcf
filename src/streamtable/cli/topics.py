"""``streamtable topics create | list | describe``: the topics of a broker, without Kafka's tools.

    streamtable topics create streams-plaintext-input --partitions 2
    streamtable topics list
    streamtable topics describe streams-plaintext-input
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

log = logging.getLogger("streamtable")

DEFAULT_BOOTSTRAP = "localhost:9092"


def create_command(topics: Iterable[str], bootstrap_servers: str) -> str:
    """The command line that creates ``topics`` (what an error about a missing topic suggests).

    >>> create_command(["lines"], "localhost:9092")
    'streamtable topics create lines --bootstrap-servers localhost:9092'
    """
    return f"streamtable topics create {' '.join(topics)} --bootstrap-servers {bootstrap_servers}"


def require_topics(bootstrap_servers: str, topics: Iterable[str],
                   hint: str = "", client_config: Mapping[str, Any] | None = None
                   ) -> dict[str, int]:
    """The partition count of each topic; raises ``TopicNotFoundError`` naming the missing ones
    and the command that creates them (then ``hint``). Looked up with a full metadata request,
    so a broker that creates topics when asked about them (Tansu) does not create them here.
    ``client_config``: the application's Kafka client settings (security, ...)."""
    from streamtable.kafka.admin import TopicNotFoundError, list_topic_names, partition_counts

    wanted = list(dict.fromkeys(topics))
    existing = list_topic_names(bootstrap_servers, client_config=client_config)
    missing = [t for t in wanted if t not in existing]
    if missing:
        others = f" (nor {', '.join(repr(t) for t in missing[1:])})" if missing[1:] else ""
        create = create_command(missing, bootstrap_servers)
        raise TopicNotFoundError(
            missing[0], bootstrap_servers,
            f"{others}; create {'them' if others else 'it'} with: {create}{hint}")
    return partition_counts(bootstrap_servers, wanted, client_config=client_config)


def _topic_config(items: list[str] | None) -> dict[str, str]:
    config: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"streamtable: --config expects key=value, got {item!r}")
        config[key.strip()] = value.strip()
    return config


def cmd_topics_create(args: argparse.Namespace) -> int:
    from streamtable.kafka.admin import (
        check_reachable,
        ensure_topics,
        list_topic_names,
        partitions_text,
    )

    check_reachable(args.bootstrap_servers)
    existing = list_topic_names(args.bootstrap_servers)
    for name in args.names:
        if name in existing:
            log.info("topic %r exists already; left as it is", name)
    new = [n for n in args.names if n not in existing]
    ensure_topics(args.bootstrap_servers, {n: args.partitions for n in new},
                  _topic_config(args.config))
    for name in new:
        print(f"created topic {name} ({partitions_text(args.partitions)})")
    return 0


def cmd_topics_list(args: argparse.Namespace) -> int:
    from streamtable.kafka.admin import admin_client, check_reachable

    check_reachable(args.bootstrap_servers)
    metadata = admin_client(args.bootstrap_servers).list_topics(timeout=10)
    for name in sorted(metadata.topics):
        if args.all or not name.startswith("__"):
            print(f"{name}\t{len(metadata.topics[name].partitions)}")
    return 0


def _configs(admin: Any, topic: str) -> dict[str, str]:
    """The topic's settings that differ from the broker's defaults (none when the broker cannot
    say: Tansu answers DescribeConfigs only partly)."""
    from confluent_kafka.admin import ConfigResource

    try:
        futures = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
        entries = next(iter(futures.values())).result(10)
    except Exception as e:
        log.debug("describe_configs of %r failed: %s", topic, e)
        return {}
    return {k: str(v.value) for k, v in sorted(entries.items())
            if not v.is_default and v.value is not None}


def cmd_topics_describe(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, TopicPartition

    from streamtable.kafka.admin import admin_client, check_reachable, partitions_text
    from streamtable.kafka.client_log import with_client_log

    check_reachable(args.bootstrap_servers)
    require_topics(args.bootstrap_servers, [args.name])
    admin = admin_client(args.bootstrap_servers)
    topic = admin.list_topics(timeout=10).topics[args.name]
    print(f"topic {args.name}: {partitions_text(len(topic.partitions))}")
    consumer = Consumer(with_client_log({
        "bootstrap.servers": args.bootstrap_servers, "group.id": "streamtable-topics-describe",
        "enable.auto.commit": False}))
    try:
        for p in sorted(topic.partitions):
            meta = topic.partitions[p]
            low, high = consumer.get_watermark_offsets(TopicPartition(args.name, p), timeout=10)
            print(f"  partition {p}: leader {meta.leader}, replicas {list(meta.replicas)}, "
                  f"offsets {low}..{high}")
    finally:
        consumer.close()
    for key, value in _configs(admin, args.name).items():
        print(f"  {key}={value}")
    return 0


def add_parsers(sub: Any) -> None:
    """The ``topics`` command group."""
    p = sub.add_parser("topics", help="create, list and describe topics")
    group = p.add_subparsers(dest="topics_command", required=True)

    def bootstrap(q: argparse.ArgumentParser) -> None:
        from streamtable.cli import BOOTSTRAP_ENV

        q.add_argument("--bootstrap-servers",
                       default=os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP,
                       help=f"Kafka bootstrap servers (default: ${BOOTSTRAP_ENV}, else "
                            f"{DEFAULT_BOOTSTRAP})")

    q = group.add_parser("create", help="create topics (existing ones are left as they are)")
    q.add_argument("names", nargs="+", metavar="NAME", help="topic name")
    q.add_argument("--partitions", type=int, default=1, help="partition count (default: 1)")
    q.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="a topic setting, e.g. cleanup.policy=compact (repeatable)")
    bootstrap(q)
    q.set_defaults(func=cmd_topics_create)
    q = group.add_parser("list", help="topic names and partition counts")
    q.add_argument("--all", action="store_true", help="include internal topics (__...)")
    bootstrap(q)
    q.set_defaults(func=cmd_topics_list)
    q = group.add_parser("describe", help="partitions, offsets and settings of a topic")
    q.add_argument("name", help="topic name")
    bootstrap(q)
    q.set_defaults(func=cmd_topics_describe)
