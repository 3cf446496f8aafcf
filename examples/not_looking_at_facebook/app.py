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
application itself, closes Facebook for two users, and prints the notifications as they arrive
(with ticks every 2 seconds: from the first micro-batch on, each tick notifies each of them) and
the final count of each 20-second window (hopping every 2 seconds) as it closes, until each user
has had the count of a window seen whole (about a minute).
"""

from __future__ import annotations

from datetime import datetime
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
        # a table's store gives each row as ValueAndTimestamp(value, timestamp)
        for user, state in self.states.all():
            if state.value == "Closed":
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


def _clock(ms: int) -> str:
    """A record's time of day, as the notifications and windows are shown."""
    return datetime.fromtimestamp(ms / 1000).strftime("%H:%M:%S")


def main(max_seconds: float = 150.0) -> None:
    """Start the development broker and the application, close Facebook for two users, and print
    what arrives: on every tick (2 seconds) a notification for each of them, and per user the
    final count of each 20-second window as it closes. Stops once each of them has had the final
    count of a window that opened after its first notification (a window seen whole), or after
    ``max_seconds``."""
    import json
    import logging
    import tempfile
    import time

    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    from streamtable import StreamsApp
    from streamtable.kafka.admin import ensure_topics
    from streamtable.kafka.broker import EmbeddedBroker
    from streamtable.kafka.client_log import with_client_log
    from streamtable.kafka.sink import close_producers

    logging.basicConfig(level=logging.WARNING)
    tick_ms, window_ms = 2_000, 20_000
    print("starting a development broker and the application on Spark (its first micro-batch "
          "comes some 20 seconds from now) ...", flush=True)
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        ensure_topics(bootstrap, {"open": 1, "notifications": 1, "notification-counts": 1})
        settings = dict(config, **{"bootstrap.servers": bootstrap, "commit.interval.ms": 1000})
        app = StreamsApp(build_topology(window_ms=window_ms, advance_ms=tick_ms, tick_ms=tick_ms),
                         config=settings, state_dir=tempfile.mkdtemp(),
                         development_broker=True)
        producer = Producer(with_client_log({"bootstrap.servers": bootstrap,
                                             "partitioner": "murmur2_random"}))
        for user, state in [("mark", "Open"), ("sheryl", "Closed"), ("chris", "Closed")]:
            producer.produce("open", key=user.encode(), value=state.encode())
        producer.flush(30)
        del producer  # closed while the broker is up
        # read both topics from their start, assigned: no consumer group to join first
        consumer = Consumer(with_client_log({"bootstrap.servers": bootstrap,
                                             "group.id": "facebook-demo",
                                             "enable.auto.commit": False}))
        consumer.assign([TopicPartition("notifications", 0, OFFSET_BEGINNING),
                         TopicPartition("notification-counts", 0, OFFSET_BEGINNING)])
        app.start()
        closed = {"sheryl", "chris"}
        print(f"Facebook is closed for {' and '.join(sorted(closed))} (open for mark): a "
              f"notification each every {tick_ms // 1000} seconds, and per user the count of "
              f"each {window_ms // 1000}-second window once it has closed", flush=True)
        first_tick: dict[str, int] = {}
        notified: dict[str, int] = {user: 0 for user in closed}
        seen_whole: set[str] = set()
        drain_to = None  # once done: the notifications' end then, so that all are shown
        try:
            deadline = time.monotonic() + max_seconds
            while time.monotonic() < deadline:
                if seen_whole == closed and drain_to is None:
                    drain_to = consumer.get_watermark_offsets(
                        TopicPartition("notifications", 0), timeout=10)[1]
                # a tick's notifications are one transaction, but the broker's end offset
                # can fall inside it: end on a whole tick, every closed user notified alike
                if drain_to is not None and consumer.position(
                        [TopicPartition("notifications", 0)])[0].offset >= drain_to \
                        and len(set(notified.values())) == 1:
                    break
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                user = msg.key().decode()
                if msg.topic() == "notifications":
                    at = msg.timestamp()[1]
                    first_tick.setdefault(user, at)
                    notified[user] = notified.get(user, 0) + 1
                    print(f"{_clock(at)} notifications: {user}: {msg.value().decode()}",
                          flush=True)
                    continue
                count = json.loads(msg.value())
                print(f"notification-counts: {user}: {count['notifications']} in "
                      f"[{_clock(count['start'])}, {_clock(count['end'])})", flush=True)
                if count["start"] >= first_tick.get(user, count["start"] + 1):
                    seen_whole.add(user)
        finally:
            consumer.close()
            app.stop()
            close_producers()  # the application's producers, while the broker is still up


if __name__ == "__main__":
    main()
