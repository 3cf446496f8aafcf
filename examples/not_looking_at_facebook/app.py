"""The "not looking at Facebook" notifier (Kafka Streams, Austin Kafka meetup, 2016).

A table of who has Facebook open (topic ``open``: user -> "Open" / "Closed") is joined to a
stream of ticks (topic ``tick``, keyed by user): every tick of a user whose Facebook is closed
becomes the notification "You are not currently viewing Facebook." on ``notifications``. For the
analytics, the notifications per user are counted in 10-minute windows hopping every minute,
and every update of a window's count goes to ``notification-counts`` keyed by the user.

    streamtable broker &
    streamtable run examples/not_looking_at_facebook/app.py --development-broker
"""

from __future__ import annotations

from streamtable import StreamsBuilder, TimeWindows
from streamtable.topology import Topology

MESSAGE = "You are not currently viewing Facebook."
MINUTE = 60_000

config = {
    "application.id": "not-looking-at-facebook",
    "bootstrap.servers": "localhost:9092",
    "default.key.serde": "string",
    "default.value.serde": "string",
}


def build_topology(window_ms: int = 10 * MINUTE, advance_ms: int = MINUTE,
                   grace_ms: int = 0) -> Topology:
    builder = StreamsBuilder()
    ticks = builder.stream("tick")
    open_ = builder.table("open", materialized="open-store")
    notifications = (
        ticks.left_join(open_, lambda tick, state: state)
        .filter(lambda user, state: state == "Closed")
        .map_values(lambda state: MESSAGE)
    )
    notifications.to("notifications")
    (notifications.group_by_key()
        .windowed_by(TimeWindows.of(window_ms).advance_by(advance_ms).with_grace(grace_ms))
        .count("notification-counts-store")
        .to_stream(lambda windowed, count: windowed.key)
        .to("notification-counts", value_serde="long"))
    return builder.build()
