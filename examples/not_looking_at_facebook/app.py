"""The "not looking at Facebook" notifier (Kafka Streams, Austin Kafka meetup, 2016).

A table of who has Facebook open (topic ``open``: user -> "Open" / "Closed", the store
``open-store``) is joined to a tick every wall-clock minute: a processor of the Processor API
connected to the table's store schedules a wall-clock punctuation, and on each tick it forwards
"You are not currently viewing Facebook." for every user whose Facebook is closed, to
``notifications``. The article's ticker process is this punctuator: nobody produces ticks. For
the analytics, the notifications per user are counted in 10-minute windows hopping every minute,
and ``suppress(Suppressed.until_window_closes())`` writes one final count per closed window to
``notification-counts`` (key: the user; value: ``{"start", "end", "notifications"}``).

Run it (a development broker, then the application on Spark; a window closes 10 minutes after
it starts, so ``notification-counts`` fills after that):

    streamtable broker &
    streamtable run examples/not_looking_at_facebook/app.py --development-broker

or run ``python examples/not_looking_at_facebook/app.py``: it starts the broker and the
application itself, closes Facebook for a few users, and prints the notifications as they arrive
(with ticks every 2 seconds and 20-second windows hopping every 2 seconds, so that final counts
appear within a minute).
"""

from __future__ import annotations

from typing import Any

from streamtable import (
    Processor,
    PunctuationType,
    Record,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
)
from streamtable.topology import Topology

MESSAGE = "You are not currently viewing Facebook."
MINUTE = 60_000

config = {
    "application.id": "not-looking-at-facebook",
    "bootstrap.servers": "localhost:9092",
    "default.key.serde": "string",
    "default.value.serde": "string",
}


class NotLookingTicker(Processor):
    """Every ``tick_ms`` of wall-clock time, a notification for each user whose Facebook is
    closed in the table's store (the tick joined to the table), stamped with the tick's time."""

    def __init__(self, store: str, tick_ms: int) -> None:
        self.store_name = store
        self.tick_ms = tick_ms

    def init(self, context: Any) -> None:
        self.context = context
        self.states = context.get_state_store(self.store_name)
        context.schedule(self.tick_ms, PunctuationType.WALL_CLOCK_TIME, self.tick)

    def process(self, record: Record) -> None:
        pass  # the table keeps the store up to date; only the ticks notify

    def tick(self, now: int) -> None:
        for user, state in self.states.all():
            if state == "Closed":
                self.context.forward(Record(user, MESSAGE, now))


def build_topology(window_ms: int = 10 * MINUTE, advance_ms: int = MINUTE, grace_ms: int = 0,
                   tick_ms: int = MINUTE) -> Topology:
    builder = StreamsBuilder()
    open_ = builder.table("open", materialized="open-store")
    notifications = open_.to_stream().process(
        lambda: NotLookingTicker("open-store", tick_ms), "open-store", named="ticker")
    notifications.to("notifications")
    (notifications.group_by_key()
        .windowed_by(TimeWindows.of(window_ms).advance_by(advance_ms).with_grace(grace_ms))
        .count("notification-counts-store")
        .suppress(Suppressed.until_window_closes())
        .to_stream()
        .map(lambda w, count: (w.key, {"start": w.start, "end": w.end, "notifications": count}))
        .to("notification-counts", value_serde="json"))
    return builder.build()


def main() -> None:
    """Start the development broker and the application, close Facebook for two users, and
    print what arrives on ``notifications`` and ``notification-counts`` until a notification
    and a final count of each of them have arrived (at most 90 seconds)."""
    import json
    import logging
    import tempfile
    import time

    from confluent_kafka import Consumer, Producer

    from streamtable.kafka.admin import ensure_topics
    from streamtable.kafka.broker import EmbeddedBroker
    from streamtable.kafka.sink import close_producers
    from streamtable import StreamsApp

    logging.basicConfig(level=logging.WARNING)
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        ensure_topics(bootstrap, {"open": 1, "notifications": 1, "notification-counts": 1})
        settings = dict(config, **{"bootstrap.servers": bootstrap, "commit.interval.ms": 1000})
        app = StreamsApp(build_topology(window_ms=20_000, advance_ms=2_000, tick_ms=2_000),
                         config=settings, state_dir=tempfile.mkdtemp(),
                         development_broker=True)
        producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
        for user, state in [("mark", "Open"), ("sheryl", "Closed"), ("chris", "Closed")]:
            producer.produce("open", key=user.encode(), value=state.encode())
        producer.flush(30)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "facebook-demo",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["notifications", "notification-counts"])
        app.start()
        closed = {"sheryl", "chris"}
        seen: dict[str, set[str]] = {"notifications": set(), "notification-counts": set()}
        try:
            deadline = time.monotonic() + 90  # Spark starts, then 20-second windows close
            while time.monotonic() < deadline and any(s != closed for s in seen.values()):
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                value = msg.value().decode()
                if msg.topic() == "notification-counts":
                    value = json.dumps(json.loads(value))
                seen[msg.topic()].add(msg.key().decode())
                print(f"{msg.topic()}: {msg.key().decode()}: {value}", flush=True)
        finally:
            consumer.close()
            app.stop()
            close_producers()  # the application's producers, while the broker is still up


if __name__ == "__main__":
    main()
