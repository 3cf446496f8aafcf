"""The check that every executor reaches the application's shared location.

On a cluster Spark runs task 3 of one batch on machine A and of the next on machine B. If the
task state were on A's local disk, B would find nothing and silently start from empty tables.
So before the first batch, on any master that is not ``local[...]``, the driver writes a token
to the shared location and a small Spark job reads it back on every executor; an executor that
cannot see it (a worker-local path, a mount missing on one machine, missing credentials) stops
the start with an error saying what to configure.
"""

from __future__ import annotations

import logging
import secrets
import socket
import time
from typing import Any

from streamtable.errors import StreamsError
from streamtable.storage import is_local, storage_at

log = logging.getLogger(__name__)


class SharedLocationError(StreamsError):
    """The executors cannot all reach the application's shared location."""


def is_local_master(master: str) -> bool:
    """``local``, ``local[4]``, ``local[*, 2]``...: one process, one machine."""
    return master == "local" or master.startswith("local[")


def _probe(location: str, token: str) -> Any:
    def probe(_index: int, _rows: Any) -> Any:
        import os

        host = socket.gethostname()
        try:
            seen = storage_at(location).read(f"reach/{token}").decode() == token
            reason = "" if seen else "another token"
        except Exception as e:  # the reason goes into the error on the driver
            seen, reason = False, f"{type(e).__name__}: {e}"
        time.sleep(0.2)  # long enough that the tasks spread over the executors
        yield (host, os.getpid(), seen, reason)

    return probe


def check_shared_location(spark: Any, location: str) -> None:
    """Fail unless every executor of ``spark`` can read what the driver writes to
    ``location``. Does nothing on a local master."""
    master = spark.sparkContext.master
    if is_local_master(master):
        return
    started = time.monotonic()
    storage = storage_at(location)
    token = secrets.token_hex(8)
    storage.write(f"reach/{token}", token.encode())
    try:
        sc = spark.sparkContext
        slots = max(2, sc.defaultParallelism) * 2
        results = (sc.parallelize(range(slots), slots)
                   .mapPartitionsWithIndex(_probe(location, token)).collect())
    finally:
        storage.delete(f"reach/{token}")
    blind = sorted({(host, reason) for host, _pid, seen, reason in results if not seen})
    if blind:
        hosts = ", ".join(f"{h} ({r})" if r else h for h, r in blind)
        hint = (" It is a path on the driver's machine: on a cluster, set state.location to a "
                "URL every executor reaches (s3://bucket/prefix, gs://..., hdfs://...) or to a "
                "directory on a mount all machines share." if is_local(location)
                else " Check that every executor has the location's credentials and network "
                "access (spark.executorEnv.* for environment variables).")
        raise SharedLocationError(
            f"the executors on {hosts} cannot read the application's shared location "
            f"{location!r}, where tasks keep their state between batches (master {master}): "
            f"a task moved between machines would start from empty state.{hint}")
    log.info("shared location %s reached from %d executor processes on %s (%.1f s)", location,
             len({(h, p) for h, p, _s, _r in results}), sorted({h for h, *_ in results}),
             time.monotonic() - started)
