"""librdkafka's log lines as Python log records, instead of ``%3|...|FAIL|...`` lines on stderr.

Every Kafka client streamtable makes (admin clients, producers, consumers; on the driver and in
Spark's Python workers) is given :data:`LIBRDKAFKA_LOG` as its ``logger``: librdkafka's messages
become records of the logger ``streamtable.librdkafka`` at the level librdkafka gave them
(``%3`` error, ``%4`` warning, ``%6`` info). Most are a client's account of connections it
retries (a broker that stopped before the client was closed, say); what a user must know comes
as an error of the call that failed. So the logger writes nowhere by itself: the command line
sends its warnings and errors to the application's log file, and everything to the console with
``-v`` (see :mod:`streamtable.logs`). To see them in a program of your own::

    logging.getLogger("streamtable.librdkafka").propagate = True

>>> conf = with_client_log({"bootstrap.servers": "localhost:9092"})
>>> conf["logger"].name
'streamtable.librdkafka'
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

LIBRDKAFKA_LOGGER_NAME = "streamtable.librdkafka"
LIBRDKAFKA_LOG = logging.getLogger(LIBRDKAFKA_LOGGER_NAME)
# nowhere unless configured: a Spark worker, or a program that configured logging for itself,
# prints nothing of it (a NullHandler also keeps logging's last-resort handler off stderr)
if not LIBRDKAFKA_LOG.handlers:
    LIBRDKAFKA_LOG.addHandler(logging.NullHandler())
    LIBRDKAFKA_LOG.propagate = False


def with_client_log(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A Kafka client's settings with librdkafka's log lines sent to :data:`LIBRDKAFKA_LOG`
    (a ``logger`` the settings name already is kept)."""
    routed = dict(conf)
    routed.setdefault("logger", LIBRDKAFKA_LOG)
    return routed
