"""The Nexmark contenders: one module per engine, each a :class:`Contender`.

A contender is a process the runner starts once per query (``command``), in its own session so
that it and all its children can be measured (CPU, RSS, PSS) and stopped together. It reads the
input topics of ``README.md`` from the beginning, writes the query's result to its output topic
in the documented format, and appends JSON lines ``{"event": ..., "t": <epoch s>}`` to the
status file (``bench/contenders/common.py``'s ``Status``): ``started`` when it begins consuming
(after imports and engine start-up: the measured time starts there) and ``caught_up`` when it
has processed every input record (the measured time ends there); it may then exit. On the way
it reports how much of its input it has read (``Status.progress``: records read of the records
of its input topics). The runner stops a contender that has not caught up within ``--timeout``
(600 s) and shows it as TIMEOUT, with the rate its last progress event shows: the share of its
input it had read, of the run's events, per second since it started.

A contender that can read its input as it arrives (``live``) also runs the latency mode
(``latency.py``): given ``Run.live`` it starts on empty input topics, consumes what the
runner paces into them until it has ``input_counts`` records (or until it is stopped), and
does not stop at the topics' current end.

Adding an engine is adding a module here with a ``CONTENDER`` and naming it in
:data:`CONTENDERS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Run:
    """What a contender's process needs to know about one query's run."""

    query: str
    output: str
    bootstrap: str
    #: a fresh name for this run (application id, consumer group)
    run_id: str
    state_dir: Path
    status: Path
    events: int
    rate: int
    seed: int
    grace_ms: int
    #: number of records per input topic (a contender may stop when it has read them all)
    input_counts: dict[str, int] = field(default_factory=dict)
    extra: tuple[str, ...] = ()
    #: the latency mode: the input arrives while the contender runs (see the module's doc)
    live: bool = False


class Contender(Protocol):
    """An engine that runs Nexmark queries."""

    @property
    def name(self) -> str:
        """How the runner's ``--contenders`` and the results name it."""
        ...

    @property
    def live(self) -> bool:
        """Whether it can read input that arrives while it runs (the latency mode)."""
        ...

    def supports(self, query: str) -> bool:
        """Whether this engine has an implementation of ``query``."""
        ...

    def command(self, run: Run) -> tuple[list[str], dict[str, str]]:
        """The command line of the measured process and its extra environment."""
        ...


def contenders() -> dict[str, Contender]:
    from bench.nexmark.contenders import (
        bare_loop,
        bytewax_flow,
        flink_sql,
        pathway_tables,
        quix_streams,
        spark_sql,
        streamtable,
    )

    return {c.name: c for c in (streamtable.CONTENDER, spark_sql.CONTENDER,
                                bytewax_flow.CONTENDER, quix_streams.CONTENDER,
                                pathway_tables.CONTENDER, flink_sql.CONTENDER,
                                bare_loop.CONTENDER)}
