"""The latency mode of ``python -m bench.nexmark`` (``--latency``): how long after its input a
query's result shows, at a fixed input rate, on every contender that reads its input live.

    python -m bench.nexmark --latency --queries q1,q5,q8,q19 --contenders streamtable,bytewax

Per query and contender: empty input topics and output topic; the contender starts
(``Run.live``: it reads the input as it comes, see ``contenders/__init__.py``); once it reports
``started``, a pacer process sends the generated events to their topics, in event order, at
``--latency-rate`` events per second of the wall clock for ``--latency-seconds``, while a
watcher reads the output topic as it comes. The generator's event time advances ``--rate``
events per second, so at the same rate an event's time keeps pace with the wall clock: the
event of time ``e`` is sent at ``t0 + (e - e0) / 1000`` s (:func:`send_time`).

A result's latency is the time from the send of the input event that completed it to the first
receipt of that result (:data:`COMPLETED_BY`):

* q1 (append): every output record is one bid's: from the bid's send to the record's receipt;
* q5, q8, q19 (table): every key's final value, from the send of the last event that value
  depends on to the first receipt of that value: q19's newest bid among its top 10, q5's
  last bid in the window of each hottest auction, q8's person or the seller's first auction
  in the window, whichever came later.

Results completed in the first ``--latency-warmup`` seconds are left out (start-up). Reported:
p50, p99 and the largest latency, how many results they cover, and the pacer's worst lag
behind its schedule (a late send would make a latency look shorter than it is, so a lag above
:data:`MAX_PACER_LAG_S` is flagged). After the pacing, the run waits until the output has been
quiet for a few seconds, stops the contender, and checks the whole output topic against the
reference as a throughput run does: a wrong result is FAILED.

>>> send_time(1_436_918_400_500, t0=100.0, e0=1_436_918_400_000, speed=1.0)
100.5
>>> summarize([0.2, 0.1, 0.4, 0.3])
{'results': 4, 'p50_s': 0.3, 'p99_s': 0.4, 'max_s': 0.4}
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from heapq import merge
from pathlib import Path
from typing import Any

from bench.harness import (
    ROOT,
    TreeSampler,
    create_topics,
    delete_matching,
    launch,
    pace,
    percentile,
)
from bench.nexmark import check
from bench.nexmark.contenders import Contender, Run
from bench.nexmark.events import (
    PARTITIONS,
    SIDE_INPUT_TOPIC,
    TOPIC_CONFIG,
    TOPICS,
    _records,
    create_input_topics,
    output_topic,
)
from bench.nexmark.generator import Generator
from bench.nexmark.queries import QUERIES
from bench.nexmark.reference import EXPECTED, Events
from bench.nexmark.report import _n

log = logging.getLogger("bench.nexmark")

#: the queries of the latency mode by default: stateless, a sliding-window aggregate, a
#: windowed join and a top-N over an updating table
LATENCY_QUERIES = ("q1", "q5", "q8", "q19")
#: a pacer this far behind its schedule is flagged
MAX_PACER_LAG_S = 0.1
#: after the pacing: the output is complete once it has been quiet this long (or after DRAIN_S)
QUIET_S = 10.0
DRAIN_S = 120.0


@dataclass
class LatencyRow:
    """One query on one contender in the latency mode."""

    query: str
    contender: str
    events: int = 0
    rate: int = 0
    status: str = "OK"  # OK, FAILED, UNSUPPORTED
    reason: str = ""
    results: int = 0
    p50_s: float | None = None
    p99_s: float | None = None
    max_s: float | None = None
    pacer_lag_s: float | None = None
    cpu_seconds: float | None = None
    peak_rss_mb: float | None = None
    peak_pss_mb: float | None = None
    output_records: int = 0
    log: str = ""


def send_time(event_time: int, *, t0: float, e0: int, speed: float) -> float:
    """When the pacer sent the event of time ``event_time`` (epoch s): the pacer started at
    ``t0`` with the event of time ``e0``; ``speed`` = wall-clock rate / event-time rate."""
    return t0 + (event_time - e0) / 1000.0 / speed


def summarize(latencies: list[float]) -> dict[str, Any]:
    """Count, p50, p99 and max of ``latencies`` (seconds, rounded to ms)."""
    if not latencies:
        return {"results": 0, "p50_s": None, "p99_s": None, "max_s": None}
    return {"results": len(latencies), "p50_s": round(percentile(latencies, 50), 3),
            "p99_s": round(percentile(latencies, 99), 3), "max_s": round(max(latencies), 3)}


# ------------------------------------------------------------ what completes each result


class EventIndex:
    """What the completion times need of the paced events: each person's time, each seller's
    auction times and each auction's bid times, in order.

    >>> idx = EventIndex(Events(persons=[{"id": 1, "dateTime": 5}],
    ...                         auctions=[{"seller": 1, "dateTime": 7}],
    ...                         bids=[{"auction": 9, "dateTime": 3},
    ...                               {"auction": 9, "dateTime": 8}]))
    >>> idx.person[1], idx.first_auction(1, 0, 10), idx.last_bid(9, 0, 8)
    (5, 7, 3)
    """

    def __init__(self, events: Events) -> None:
        self.person = {p["id"]: p["dateTime"] for p in events.each_person()}
        self.auctions: dict[int, list[int]] = defaultdict(list)
        for a in events.each_auction():
            self.auctions[a["seller"]].append(a["dateTime"])
        self.bids: dict[int, list[int]] = defaultdict(list)
        for b in events.each_bid():
            self.bids[b["auction"]].append(b["dateTime"])

    def first_auction(self, seller: int, start: int, end: int) -> int | None:
        """The time of ``seller``'s first auction in ``[start, end)``."""
        times = self.auctions.get(seller, [])
        i = bisect_left(times, start)
        return times[i] if i < len(times) and times[i] < end else None

    def last_bid(self, auction: int, start: int, end: int) -> int | None:
        """The time of ``auction``'s last bid in ``[start, end)``."""
        times = self.bids.get(auction, [])
        i = bisect_left(times, end) - 1
        return times[i] if i >= 0 and times[i] >= start else None


def _q1(idx: EventIndex, key: Any, value: Any) -> int | None:
    return int(value["dateTime"])


def _q5(idx: EventIndex, key: Any, value: Any) -> int | None:
    start, end = key
    times = [idx.last_bid(auction, start, end) for auction, _ in value]
    return None if not times or None in times else max(t for t in times if t is not None)


def _q8(idx: EventIndex, key: Any, value: Any) -> int | None:
    person, start = key
    auction = idx.first_auction(person, start, start + 10_000)
    born = idx.person.get(person)
    return None if auction is None or born is None else max(auction, born)


def _q19(idx: EventIndex, key: Any, value: Any) -> int | None:
    return max((int(bid["dateTime"]) for bid in value), default=None)


#: query -> the event time of the input event that completed a result (its key and value,
#: decoded JSON), or None when the paced events do not complete it (a wrong result)
COMPLETED_BY: dict[str, Callable[[EventIndex, Any, Any], int | None]] = {
    "q1": _q1, "q5": _q5, "q8": _q8, "q19": _q19}


def latencies(query: str, idx: EventIndex, received: Mapping[str, Any], *, t0: float,
              e0: int, speed: float, warmup_s: float) -> tuple[list[float], int]:
    """The latencies of ``query``'s results (see the module's doc) from what the watcher
    ``received``, and how many results no paced event completes."""
    completed_by = COMPLETED_BY[query]
    out: list[float] = []
    unexplained = 0
    for key, value, seen in _results(received):
        done = completed_by(idx, key, value)
        if done is None:
            unexplained += 1
            continue
        sent = send_time(done, t0=t0, e0=e0, speed=speed)
        if sent - t0 >= warmup_s:
            out.append(seen - sent)
    return out, unexplained


def _results(received: Mapping[str, Any]) -> Iterator[tuple[Any, Any, float]]:
    """``(key, value, first receipt)`` of every appended record, or of every key's final
    value (a deleted key has none)."""
    for key, value, seen in received["appended"]:
        yield json.loads(key), json.loads(value), seen
    for key, (value, seen) in received["table"].items():
        if value is not None:
            yield json.loads(key), json.loads(value), seen


# -------------------------------------------------------------------------- the pacer


def paced_events(generator: Generator, events: int
                 ) -> Iterator[tuple[str, bytes, bytes, int]]:
    """``(topic, key, value, timestamp)`` of the first ``events`` events, in event order."""
    for batch in generator.batches(events):
        streams = []
        for kind, (topic, key_field) in TOPICS.items():
            records, stamps = _records(getattr(batch, f"{kind}s"), key_field)
            streams.append([(ts, topic, k, v) for (k, v), ts in zip(records, stamps, strict=True)])
        for ts, topic, k, v in merge(*streams, key=lambda r: r[0]):
            yield topic, k, v, ts


def _send_event(producer: Any, record: tuple[str, bytes, bytes, int]) -> None:
    topic, key, value, timestamp = record
    producer.produce(topic, key=key, value=value, timestamp=timestamp)


def _pace(conn: Any, bootstrap: str, seed: int, gen_rate: int, events: int,
          rate: float) -> None:
    """The pacer process: sends the events at ``rate`` per second (``bench.harness.pace``);
    reports ``(t0, sent, seconds, worst lag)`` through ``conn``."""
    records = list(paced_events(Generator(seed, rate=gen_rate), events))
    res = pace(bootstrap, "", records, rate, set(), linger_ms=1, send=_send_event)
    conn.send((res.started, res.sent, res.seconds, res.max_lag))
    conn.close()


def start_pacer(bootstrap: str, seed: int, gen_rate: int, events: int, rate: float) -> Any:
    """The pacer in a process of its own (the watcher's receive times and the pacer's send
    times do not wait on each other's GIL): ``(process, connection)``."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_pace, args=(child, bootstrap, seed, gen_rate, events, rate),
                       daemon=True)
    proc.start()
    child.close()
    return proc, parent


# ------------------------------------------------------------------------ the watcher


class Watcher(threading.Thread):
    """Reads an output topic from its beginning as it comes: every record of an append query
    with its receive time, the latest value of every key of a table query with the time it
    first had it."""

    def __init__(self, bootstrap: str, topic: str, kind: str) -> None:
        super().__init__(daemon=True, name=f"latency-{topic}")
        from confluent_kafka import Consumer, TopicPartition

        self.kind = kind
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"latency-{topic}",
                                  "enable.auto.commit": False, "fetch.wait.max.ms": 5,
                                  "auto.offset.reset": "earliest"})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self.appended: list[tuple[bytes | None, bytes | None, float]] = []
        self.table: dict[bytes | None, tuple[bytes | None, float]] = {}
        self.messages = 0
        self.t_last = time.time()
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                msgs = self.consumer.consume(num_messages=10_000, timeout=0.05)
                if not msgs:
                    continue
                now = time.time()
                for m in msgs:
                    if not m.error():
                        self.add(m.key(), m.value(), now)
                self.messages += len(msgs)
                self.t_last = now
        finally:
            self.consumer.close()

    def add(self, key: bytes | None, value: bytes | None, now: float) -> None:
        """A record received at ``now``: kept (append), or its key's value with the time it
        first had it (table: a repeat of the same value keeps the earlier time)."""
        if self.kind == "append":
            self.appended.append((key, value, now))
            return
        held = self.table.get(key)
        if held is None or held[0] != value:
            self.table[key] = (value, now)

    def stop(self) -> dict[str, Any]:
        self._halt.set()
        self.join(10)
        return {"appended": self.appended, "table": self.table}


# --------------------------------------------------------------------------- one run


def input_counts(events: int) -> dict[str, int]:
    """Records per input topic among the first ``events`` events (event ``i`` by ``i % 50``)."""
    whole, rest = divmod(events, 50)
    persons = whole + min(rest, 1)
    auctions = 3 * whole + max(0, min(rest, 4) - 1)
    counts = {TOPICS["person"][0]: persons, TOPICS["auction"][0]: auctions,
              TOPICS["bid"][0]: events - persons - auctions}
    return {**counts, SIDE_INPUT_TOPIC: 0}


def run_latency(query: str, contender: Contender, args: Any, bootstrap: str,
                run_dir: Path) -> LatencyRow:
    """One query on one contender in the latency mode (see the module's doc)."""
    events = int(args.latency_rate * args.latency_seconds)
    row = LatencyRow(query, contender.name, events=events, rate=args.latency_rate)
    if query not in COMPLETED_BY:
        row.status, row.reason = "UNSUPPORTED", f"no latency rule for {query}"
        return row
    if not contender.supports(query):
        row.status, row.reason = "UNSUPPORTED", f"{contender.name} has no {query}"
        return row
    if not contender.live:
        row.status, row.reason = "UNSUPPORTED", f"{contender.name} does not read live input"
        return row
    output = output_topic(query)
    run_id = f"{run_dir.name}-latency-{contender.name}-{query}"
    inputs = [topic for topic, _ in TOPICS.values()] + [SIDE_INPUT_TOPIC]
    delete_matching(bootstrap, [*inputs, output])
    create_input_topics(bootstrap)
    create_topics(bootstrap, {output: PARTITIONS}, TOPIC_CONFIG)
    status = run_dir / "status" / f"{run_id}.jsonl"
    log_path = run_dir / "logs" / f"{run_id}.log"
    row.log = str(log_path.relative_to(ROOT))
    run = Run(query=query, output=output, bootstrap=bootstrap, run_id=run_id,
              state_dir=run_dir / "state" / run_id, status=status, events=events,
              rate=args.rate, seed=args.seed, grace_ms=args.grace_ms,
              input_counts=input_counts(events), extra=tuple(args.config), live=True)
    cmd, env = contender.command(run)
    proc = launch(f"{contender.name}-{query}-latency", cmd, log_path, status, env)
    tree = TreeSampler(proc.proc.pid)
    tree.start()
    log.info("%s on %s (latency, %s events/s for %ss): starting, log %s", query,
             contender.name, f"{args.latency_rate:,}", args.latency_seconds, row.log)
    watcher: Watcher | None = None
    try:
        deadline = time.time() + 300
        while "started" not in proc.events():
            if proc.proc.poll() is not None or time.time() > deadline:
                row.status, row.reason = "FAILED", "did not start"
                log.error("%s on %s: did not start; log tail:\n%s", query, contender.name,
                          proc.log_tail(15))
                return row
            time.sleep(0.2)
        watcher = Watcher(bootstrap, output, QUERIES[query].kind)
        watcher.start()
        tree.sample()
        cpu_at_start = tree.cpu_seconds()
        pacer, conn = start_pacer(bootstrap, args.seed, args.rate, events, args.latency_rate)
        t0, sent, seconds, lag = conn.recv()
        pacer.join(30)
        # the output is complete once it has been quiet a while after the last send
        give_up = time.time() + DRAIN_S
        while time.time() < give_up and time.time() - max(watcher.t_last, t0 + seconds) < QUIET_S:
            time.sleep(0.5)
        tree.sample()
        row.cpu_seconds = round(tree.cpu_seconds() - cpu_at_start, 1)
        alive = proc.proc.poll() is None
    finally:
        received = watcher.stop() if watcher is not None else None
        tree.stop()
        tree.join(5)
        proc.stop()
        delete_matching(bootstrap, [run_id])  # the contender's own topics
        if not args.keep_state:
            shutil.rmtree(run.state_dir, ignore_errors=True)
    row.peak_rss_mb = round(tree.peak_rss / 2**20, 1)
    row.peak_pss_mb = round(tree.peak_pss / 2**20, 1)
    row.pacer_lag_s = round(lag, 3)
    if sent < events:
        row.status, row.reason = "FAILED", f"the pacer sent {sent:,} of {events:,} events"
        return row
    if not alive and contender.name == "streamtable":
        row.status, row.reason = "FAILED", "stopped before the end of the run"
        return row
    assert received is not None
    generator = Generator(args.seed, rate=args.rate)
    source = Events(generator=generator, count=events)
    speed = args.latency_rate / args.rate
    values, unexplained = latencies(query, EventIndex(source), received, t0=t0,
                                    e0=generator.timestamp(0), speed=speed,
                                    warmup_s=args.latency_warmup)
    for name, value in summarize(values).items():
        setattr(row, name, value)
    diff, row.output_records = check.check_topic(
        bootstrap, output, QUERIES[query].kind, lambda: EXPECTED[query](source), timeout=600)
    if diff is not None:
        row.status, row.reason = "FAILED", diff
    elif unexplained:
        row.status = "FAILED"
        row.reason = f"{unexplained} results that no paced event completes"
    if lag > MAX_PACER_LAG_S:
        row.reason = (row.reason + "; " if row.reason else "") + (
            f"the pacer fell {lag:.2f}s behind its schedule")
    log.info("%s on %s (latency): %s", query, contender.name, one_line(row))
    return row


# ------------------------------------------------------------------------------ report


def one_line(row: LatencyRow) -> str:
    if row.status != "OK" and row.p50_s is None:
        return f"{row.status}: {row.reason}"
    text = (f"{row.status}, p50 {_n(row.p50_s, 3)} s, p99 {_n(row.p99_s, 3)} s, max "
            f"{_n(row.max_s, 3)} s over {row.results:,} results, peak RSS "
            f"{_n(row.peak_rss_mb, 0)} MB")
    return text + (f" ({row.reason})" if row.reason else "")


def table(rows: list[LatencyRow], base: str = "streamtable") -> str:
    """The latency rows as a Markdown table, with each p50 and p99 as a ratio to ``base``'s
    on the same query (above 1: slower than ``base``)."""
    ours = {r.query: r for r in rows if r.contender == base and r.status == "OK"}
    lines = ["| query | contender | events | events/s | results | p50 s | p99 s | max s | "
             "p50 / streamtable's | p99 / streamtable's | CPU s | peak RSS MB | pacer lag s "
             "| check |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.status == "UNSUPPORTED":
            continue
        b = ours.get(r.query)

        def ratio(mine: float | None, theirs: float | None) -> str:
            return "–" if not mine or not theirs else f"{mine / theirs:.2f}"

        verdict = "ok" if r.status == "OK" else f"**{r.status}**: {r.reason}"
        lines.append(
            f"| {r.query} | {r.contender} | {r.events:,} | {r.rate:,} | {r.results:,} | "
            f"{_n(r.p50_s, 3)} | {_n(r.p99_s, 3)} | {_n(r.max_s, 3)} | "
            f"{ratio(r.p50_s, b.p50_s if b else None)} | "
            f"{ratio(r.p99_s, b.p99_s if b else None)} | {_n(r.cpu_seconds, 1)} | "
            f"{_n(r.peak_rss_mb, 0)} | {_n(r.pacer_lag_s, 3)} | {verdict} |")
    return "\n".join(lines)


def section(rows: list[LatencyRow], command: str, machine: Mapping[str, Any],
            args: Any) -> str:
    """A Markdown section of the latency run."""
    skipped = [f"{r.query} on {r.contender} ({r.reason})" for r in rows
               if r.status == "UNSUPPORTED"]
    lines = [f"## Latency at {args.latency_rate:,} events/s ({time.strftime('%Y-%m-%d %H:%M')}"
             " UTC)", "", f"`{command}`", "",
             "Machine: " + ", ".join(f"{k} {v}" for k, v in machine.items()), "",
             f"Each query on each contender, alone: {args.latency_rate:,} events/s paced for "
             f"{args.latency_seconds}s into empty input topics while the contender runs "
             f"(results completed in the first {args.latency_warmup}s left out); a result's "
             "latency is from the send of the event that completed it to the first receipt of "
             "it (see `bench/nexmark/latency.py`). Every output is checked against the "
             "reference.", "", table(rows)]
    if skipped:
        lines += ["", "Not run: " + "; ".join(skipped) + "."]
    return "\n".join(lines) + "\n"


