"""A contender running live (latency mode) on a fresh topic pair: launched with its memory
sampled and its output topic watched, primed until its output shows (it is live end to end),
then its probes' latencies and its final result read off the output topic.

The latency runs of ``python -m bench`` (``runner.py``) and ``python -m bench.burst`` both
run a contender this way::

    live = LiveRun.launch("streamtable", cmd, "w1", bootstrap, out_topic, log_path, status)
    try:
        live.prime(in_topic, expected, start_timeout=240)   # adds the primes to expected
        ...                                                 # pace the input
        live.wait_for(probe_keys, drain=30)
        verdict, reread_ok = live.check_result(expected)
    finally:
        live.stop()
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import Launched, OutputWatcher, TreeSampler, launch, read_topic
from bench.workloads import (
    W1_PROBE_PREFIX,
    W2_PROBE_ID_BASE,
    W2_PROBE_PREFIX,
    make_checker,
    normalize_key,
)


def prime_record(wl: str, n: int) -> tuple[bytes | None, bytes | None, bytes, Any]:
    """A record whose effect is a new output key (for waiting until a contender is live):
    (key, value, output key, (result key, result value))."""
    if wl == "w1":
        word = f"zzprime{n:05d}"
        return None, word.encode(), word.encode(), (word, 1)
    pid = W2_PROBE_ID_BASE * 2 + n
    client = f"prime{n:05d}"
    value = {"client": client, "id": pid, "ticker": "AAPL", "amount": 1, "exchange": "NASDAQ"}
    return (str(pid).encode(), json.dumps(value, separators=(",", ":")).encode(),
            client.encode(), (client, frozenset([pid])))


def probe_latencies(probe_keys: Mapping[int, bytes], send_times: Mapping[int, float],
                    seen: Mapping[bytes, float]) -> dict[int, float | None]:
    """Each probe's latency in seconds (first receive time of its output key - its send time),
    None for a probe not seen; probes never sent are left out."""
    return {i: (seen[key] - send_times[i] if key in seen else None)
            for i, key in probe_keys.items() if i in send_times}


@dataclass
class LiveRun:
    """A contender launched in latency mode: its process, the sampler of its process tree's
    memory, and two watchers of its output topic (one for the probes' keys, one for the
    primes')."""

    proc: Launched
    sampler: TreeSampler
    watcher: OutputWatcher
    prime_watch: OutputWatcher
    workload: str
    bootstrap: str
    out_topic: str

    @classmethod
    def launch(cls, name: str, cmd: list[str], wl: str, bootstrap: str, out_topic: str,
               log_path: Path, status: Path, sample_interval: float = 0.5) -> LiveRun:
        """Start watching ``out_topic``, then launch ``cmd`` and sample its memory."""
        prefix = (W1_PROBE_PREFIX if wl == "w1" else W2_PROBE_PREFIX).encode()
        prime_prefix = b"zzprime" if wl == "w1" else b"prime"
        watcher = OutputWatcher(bootstrap, out_topic, wl, None, probe_prefix=prefix)
        # the primes' keys do not start with the probes' prefix: a watcher of their own
        prime_watch = OutputWatcher(bootstrap, out_topic, wl, None, probe_prefix=prime_prefix)
        watcher.start()
        prime_watch.start()
        proc = launch(name, cmd, log_path, status)
        sampler = TreeSampler(proc.proc.pid, sample_interval)
        sampler.start()
        return cls(proc, sampler, watcher, prime_watch, wl, bootstrap, out_topic)

    def prime(self, in_topic: str, expected: dict[Any, Any], start_timeout: float) -> float:
        """Wait for the contender's ``started`` mark, then send one priming record a second
        until its effect shows on the output topic; each prime's result goes into
        ``expected``. Returns the seconds from the first prime to its output; raises when the
        contender exits or ``start_timeout`` passes first."""
        from confluent_kafka import Producer

        proc = self.proc
        deadline = time.time() + start_timeout
        while "started" not in proc.events():
            if proc.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"contender did not start: {proc.log_tail(8)}")
            time.sleep(0.2)
        producer = Producer({"bootstrap.servers": self.bootstrap,
                             "partitioner": "murmur2_random", "linger.ms": 0})
        n = 0
        t_prime = time.time()
        while True:
            key, value, _, (ek, ev) = prime_record(self.workload, n)
            expected[ek] = ev
            producer.produce(in_topic, key=key, value=value)
            producer.flush(10)
            n += 1
            for _ in range(10):
                time.sleep(0.1)
                if self.prime_watch.probes:
                    return round(time.time() - t_prime, 1)
            if proc.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"no output within {start_timeout:.0f}s: "
                                   f"{proc.log_tail(8)}")

    def wait_for(self, keys: Collection[bytes], drain: float) -> bool:
        """Wait until every probe key in ``keys`` has been seen, at most ``drain`` seconds;
        whether they all were."""
        t_end = time.time()
        while True:
            if all(k in self.watcher.probes for k in keys):
                return True
            if time.time() - t_end >= drain:
                return False
            time.sleep(0.2)

    def written(self, keys: Collection[bytes]) -> int:
        """How many of ``keys`` a fresh consumer finds in the output topic: the live one may
        have been handed an incomplete fetch (see :meth:`OutputWatcher.reread`), which tells a
        probe the contender never wrote from one the watcher missed."""
        found = {normalize_key(self.workload, m.key())
                 for m in read_topic(self.bootstrap, self.out_topic, 60.0) if m.key() is not None}
        return len(set(keys) & found)

    def check_result(self, expected: dict[Any, Any],
                     timeout: float = 30.0) -> tuple[str, bool | None]:
        """The output topic (last value per key) against ``expected``, waiting up to
        ``timeout`` seconds for it to match: ("ok" or the differences, None); when it does not
        match, the topic is read again by a fresh consumer, and the second value says whether
        that read was right (the live consumer missed records) or not (records lost)."""
        check = make_checker(self.workload, expected)
        self.watcher.check = check
        diff: str | None = "not checked"
        t_check = time.time()
        while time.time() - t_check < timeout:
            diff = self.watcher.recheck()
            if diff is None:
                return "ok", None
            time.sleep(0.5)
        count, again = self.watcher.reread()
        verdict = (f"{diff} for the live consumer; the topic read again ({count:,} "
                   + ("records) is right: the live consumer missed records" if again is None
                      else f"records): {again}: records lost"))
        return verdict, again is None

    def stop(self) -> None:
        """Stop the sampler, the contender and the watchers."""
        self.sampler.stop()
        self.sampler.join(5)
        self.proc.stop()
        self.watcher.stop()
        self.prime_watch.stop()
        self.watcher.join(5)
        self.prime_watch.join(5)
