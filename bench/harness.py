"""Measuring machinery: the broker, loading input, watching an output topic, sampling the memory
of a process tree, starting and stopping contenders, pacing input for the latency runs."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.workloads import Record, normalize_key

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PAGE = os.sysconf("SC_PAGE_SIZE")

# Topic settings for every topic the harness creates. quixstreams refuses topics whose config
# lacks retention.ms (Tansu reports no defaults), so it is always given explicitly.
TOPIC_CONFIG = {"retention.ms": "604800000", "cleanup.policy": "delete"}


def say(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


# --------------------------------------------------------------------------------- topics


def create_topics(bootstrap: str, topics: dict[str, int],
                  config: dict[str, str] | None = None) -> None:
    """Create the missing ``topics`` (name -> partitions) with :data:`TOPIC_CONFIG`, updated
    by ``config``."""
    from streamtable.kafka.admin import ensure_topics

    ensure_topics(bootstrap, topics, {**TOPIC_CONFIG, **(config or {})})


def delete_matching(bootstrap: str, needles: Sequence[str], keep: Sequence[str] = ()) -> list[str]:
    """Delete topics whose name contains one of ``needles`` (frees the broker's memory)."""
    from streamtable.kafka.admin import delete_topics, list_topic_names

    names = [t for t in list_topic_names(bootstrap)
             if any(n in t for n in needles) and t not in keep]
    if names:
        try:
            delete_topics(bootstrap, names, timeout=60)
        except Exception as exc:  # noqa: BLE001 - cleanup only
            say(f"  (could not delete topics {names[:3]}...: {exc})")
    return names


def group_progress(bootstrap: str, group: str, topic: str) -> int | None:
    """Input records a consumer group has committed on ``topic`` (None: no commits)."""
    from streamtable.kafka.admin import partition_counts

    try:
        n = partition_counts(bootstrap, [topic])[topic]
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                      "enable.auto.commit": False})
        try:
            committed = c.committed([TopicPartition(topic, p) for p in range(n)], timeout=10)
        finally:
            c.close()
        offsets = [tp.offset for tp in committed if tp.offset >= 0]
        return sum(offsets) if offsets else None
    except Exception:  # noqa: BLE001 - informational only
        return None


def load_topic(bootstrap: str, topic: str, records: Sequence[Record], partitions: int = 2, *,
               timestamps: Sequence[int] | None = None,
               placement: Sequence[int] | None = None) -> float:
    """Produce ``records`` (keyed ones by murmur2 like the Java client, records without a key
    round-robin: the producer's sticky partitioner would put runs of ~15k lines on one
    partition, and W1's split between the partitions, 58/42 in one run, changed from run to
    run); returns seconds. ``timestamps`` gives each record its timestamp (default: the
    producer's clock), ``placement`` its partition (default: as above)."""
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "partitioner": "murmur2_random",
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 500_000,
        "enable.idempotence": False,
        "acks": 1,
    })
    t0 = time.time()
    produce = producer.produce
    for i, (k, v) in enumerate(records):
        extra: dict[str, int] = {}
        if timestamps is not None:
            extra["timestamp"] = timestamps[i]
        if placement is not None:
            extra["partition"] = placement[i]
        while True:
            try:
                if k is None and placement is None:
                    produce(topic, value=v, partition=i % partitions, **extra)
                else:
                    produce(topic, key=k, value=v, **extra)
                break
            except BufferError:
                producer.poll(0.05)
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} records not delivered to {topic}")
    return time.time() - t0


# --------------------------------------------------------------------------- output watcher


#: how long :func:`read_topic` goes on reading after the end offsets it was told, for what
#: Tansu leaves beyond them
TAIL_S = 2.0


def read_topic(bootstrap: str, topic: str, timeout: float = 60.0) -> Iterator[Any]:
    """The messages of every partition of ``topic``, from the start to the end it has when
    called, read by a consumer of its own (at most ``timeout`` seconds).

    The development broker (Tansu) reports as a partition's end the first offset of its newest
    produced batch plus one, not the end of that batch (fetching is right): reading stops only
    once the reported ends are reached and nothing more came for :data:`TAIL_S` seconds, so the
    rest of a last batch is not missed."""
    from streamtable.kafka.admin import partition_counts

    n = partition_counts(bootstrap, [topic])[topic]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-read-{topic}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(n)]
        consumer.assign([TopicPartition(topic, p, 0) for p in range(n)])
        seen = [0] * n
        deadline = time.time() + timeout
        quiet_since: float | None = None
        while time.time() < deadline:
            messages = consumer.consume(num_messages=10_000, timeout=0.2)
            for m in messages:
                if not m.error():
                    seen[m.partition() or 0] = (m.offset() or 0) + 1
                    yield m
            if any(s < e for s, e in zip(seen, ends, strict=True)):
                continue
            if messages:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.time()
            elif time.time() - quiet_since >= TAIL_S:
                break
    finally:
        consumer.close()


class OutputWatcher(threading.Thread):
    """Reads an output topic from the beginning, keeping the last value per key (a tombstone
    removes the key), and runs ``check`` whenever it has caught up with new data.

    ``ok_time`` is the receive time of the last records before the first passing check.
    With ``probe_prefix``, the first receive time of every key starting with it is kept."""

    def __init__(self, bootstrap: str, topic: str, workload: str,
                 check: Callable[[dict[bytes, bytes]], str | None] | None,
                 probe_prefix: bytes | None = None, check_interval: float = 0.5) -> None:
        super().__init__(daemon=True, name=f"watch-{topic}")
        from streamtable.kafka.admin import partition_counts

        self.bootstrap = bootstrap
        self.topic = topic
        self.workload = workload
        self.check = check
        self.check_interval = check_interval
        self.probe_prefix = probe_prefix
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-watch-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 5,
            "isolation.level": "read_uncommitted",
        })
        n = partition_counts(bootstrap, [topic])[topic]
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(n)])
        self.last: dict[bytes, bytes] = {}
        self.messages = 0
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.ok_time: float | None = None
        self.last_diff: str | None = "nothing received"
        self.checks = 0
        self.probes: dict[bytes, float] = {}
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self.errors: list[str] = []

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        dirty = False
        last_check = 0.0
        last = self.last
        prefix = self.probe_prefix
        workload = self.workload
        try:
            while not self._halt.is_set():
                msgs = self.consumer.consume(num_messages=10_000, timeout=0.05)
                now = time.time()
                if msgs:
                    with self._lock:
                        for m in msgs:
                            if m.error():
                                if len(self.errors) < 10:
                                    self.errors.append(str(m.error()))
                                continue
                            k = m.key()
                            v = m.value()
                            if v is None:
                                last.pop(k, None)
                            else:
                                last[k] = v
                            if prefix is not None and k is not None:
                                nk = normalize_key(workload, k)
                                if nk.startswith(prefix) and nk not in self.probes:  # type: ignore[union-attr]
                                    self.probes[nk] = now  # type: ignore[index]
                        self.messages += len(msgs)
                        if self.t_first is None:
                            self.t_first = now
                        self.t_last = now
                    dirty = True
                    continue
                if (dirty and self.check is not None and self.ok_time is None
                        and now - last_check >= self.check_interval):
                    with self._lock:
                        diff = self.check(last)
                    self.checks += 1
                    last_check = time.time()
                    dirty = False
                    self.last_diff = diff
                    if diff is None:
                        self.ok_time = self.t_last
        finally:
            self.consumer.close()

    def reread(self, timeout: float = 60.0) -> tuple[int, str | None]:
        """Read the whole topic again with a fresh consumer (the live one may have been
        handed an incomplete fetch): (messages, the check's verdict on them)."""
        last: dict[Any, bytes] = {}
        count = 0
        for m in read_topic(self.bootstrap, self.topic, timeout):
            count += 1
            key, value = m.key(), m.value()
            if value is None:
                last.pop(key, None)
            else:
                last[key] = value
        return count, (self.check(last) if self.check is not None else None)

    def recheck(self) -> str | None:
        if self.check is None:
            return None
        with self._lock:
            return self.check(self.last)


# ------------------------------------------------------------------------ process memory


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may contain spaces, split after the last ')'
        rest = stat[stat.rfind(b")") + 2:].split()
        children.setdefault(int(rest[1]), []).append(int(entry))
    return children


def process_tree(root: int) -> list[int]:
    children = _children_map()
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _pss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_cpu_seconds(stat_path: str) -> float | None:
    """User + system CPU seconds from a ``/proc`` ``stat`` file (a process's or a thread's);
    None when it is gone."""
    try:
        with open(stat_path, "rb") as fh:
            stat = fh.read()
        rest = stat[stat.rfind(b")") + 2:].split()
        return (int(rest[11]) + int(rest[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    return _stat_cpu_seconds(f"/proc/{pid}/stat") or 0.0


def _read_comm(proc_path: str) -> str | None:
    """The name (``comm``) of the process or thread at ``proc_path``; None when it is gone."""
    try:
        with open(f"{proc_path}/comm", "rb") as fh:
            return fh.read().decode(errors="replace").strip()
    except OSError:
        return None


def _comm(pid: int) -> str:
    name = _read_comm(f"/proc/{pid}")
    return "?" if name is None else name


#: the JVM's threads by what they do, from the start of their names (``/proc``'s ``comm``,
#: cut at 15 characters): Spark's task threads (reading and writing the Python workers' Arrow
#: batches, the shuffles), the JIT compilers, the garbage collector; the rest is "other"
JVM_THREAD_GROUPS = (("Executor task", "tasks"), ("C1 Compiler", "JIT compiler"),
                     ("C2 Compiler", "JIT compiler"), ("VM Thread", "GC"), ("GC Thread", "GC"),
                     ("G1 ", "GC"))


def jvm_thread_group(name: str) -> str:
    """What a JVM thread named ``name`` does (see :data:`JVM_THREAD_GROUPS`).

    >>> jvm_thread_group("Executor task l"), jvm_thread_group("C1 CompilerThre")
    ('tasks', 'JIT compiler')
    >>> jvm_thread_group("dag-scheduler-e")
    'other'
    """
    return next((group for start, group in JVM_THREAD_GROUPS if name.startswith(start)),
                "other")


def thread_cpu_seconds(pid: int) -> dict[int, tuple[str, float]]:
    """Each thread of a process: its id, its name and its user + system CPU seconds so far."""
    out: dict[int, tuple[str, float]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        path = f"/proc/{pid}/task/{tid}"
        name, secs = _read_comm(path), _stat_cpu_seconds(f"{path}/stat")
        if name is not None and secs is not None:  # else the thread ended
            out[int(tid)] = (name, secs)
    return out


SPARK_JVM = "java (Spark JVM)"


def _kind(pid: int) -> str:
    """A short name for a process: its command, with the Python module or script it runs."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        return _comm(pid)
    if not argv:
        return _comm(pid)
    exe = os.path.basename(argv[0])
    if exe.startswith("python"):
        if "-m" in argv:
            i = argv.index("-m")
            mod = " ".join(argv[i + 1:i + 3]) if argv[i + 1:i + 2] == ["pyspark.daemon"] else (
                argv[i + 1] if len(argv) > i + 1 else "")
            return f"python -m {mod}"
        script = next((a for a in argv[1:] if a.endswith(".py")), "")
        return f"python {os.path.basename(script)}"
    if exe == "java":
        return SPARK_JVM if any("SparkSubmit" in a for a in argv) else "java"
    return exe


def is_python_worker(kind: str) -> bool:
    """Whether a process of this :func:`_kind` is one of Spark's Python workers: the daemon
    (streamtable's or PySpark's) and the workers it forks, which have its command line."""
    return (kind.endswith(("pyspark.daemon", "streamtable.runtime.spark.process.daemon"))
            or "pyspark.daemon " in kind)


@dataclass(frozen=True)
class TreeSample:
    """One sample of a process tree: when (epoch s), its RSS and PSS summed (bytes), and the
    PSS of its Python workers (:func:`is_python_worker`)."""

    t: float
    rss: int
    pss: int
    workers_pss: int


class TreeSampler(threading.Thread):
    """Samples the RSS (and PSS) of a process and all its descendants; keeps the peaks, and
    every sample in ``timeline`` (memory over time)."""

    def __init__(self, root: int, interval: float = 0.5) -> None:
        super().__init__(daemon=True, name=f"rss-{root}")
        self.root = root
        self.interval = interval
        self.peak_rss = 0
        self.peak_pss = 0
        self.peak_workers_pss = 0
        self.peak_procs: dict[str, int] = {}
        self.max_nprocs = 0
        self.samples = 0
        self.timeline: list[TreeSample] = []
        self.cpu: dict[int, tuple[str, float]] = {}  # pid -> (kind, cpu seconds last seen)
        # (pid, thread id) of a Spark JVM -> (thread group, cpu seconds last seen)
        self.jvm_threads: dict[tuple[int, int], tuple[str, float]] = {}
        self._halt = threading.Event()

    def sample(self) -> None:
        pids = process_tree(self.root)
        for p in pids:
            prev = self.cpu.get(p)
            kind = prev[0] if prev and prev[0] not in ("bash", "sh") else _kind(p)
            self.cpu[p] = (kind, _cpu_seconds(p))
            if kind == SPARK_JVM:
                for tid, (name, secs) in thread_cpu_seconds(p).items():
                    self.jvm_threads[(p, tid)] = (jvm_thread_group(name), secs)
        rss = {p: _rss_bytes(p) for p in pids}
        total = sum(rss.values())
        pss_of = {p: _pss_bytes(p) for p in pids}
        pss = sum(pss_of.values())
        workers = sum(v for p, v in pss_of.items() if is_python_worker(self.cpu[p][0]))
        self.timeline.append(TreeSample(time.time(), total, pss, workers))
        self.peak_workers_pss = max(self.peak_workers_pss, workers)
        self.samples += 1
        self.max_nprocs = max(self.max_nprocs, len(pids))
        if total > self.peak_rss:
            self.peak_rss = total
            by_comm: dict[str, int] = {}
            for p, r in rss.items():
                c = self.cpu[p][0]
                by_comm[c] = by_comm.get(c, 0) + r
            self.peak_procs = by_comm
        self.peak_pss = max(self.peak_pss, pss)

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of every process of the tree so far (as last sampled; a
        process that ended counts with what it had used at the last sample)."""
        return sum(secs for _, secs in self.cpu.values())

    def cpu_by_kind(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for kind, secs in self.cpu.values():
            out[kind] = out.get(kind, 0.0) + secs
        return {k: round(v, 1) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}

    def cpu_by_jvm_thread(self) -> dict[str, float]:
        """The Spark JVMs' CPU seconds by thread group (:func:`jvm_thread_group`), largest
        first: a thread that ended counts with what it had used at the last sample."""
        out: dict[str, float] = {}
        for group, secs in self.jvm_threads.values():
            out[group] = out.get(group, 0.0) + secs
        return {k: round(v, 1) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}

    def run(self) -> None:
        while not self._halt.is_set():
            self.sample()
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()


class JvmSampler(threading.Thread):
    """With --profile: ``jstack`` the Spark JVMs of a process tree every few seconds and count
    the top frames of busy (RUNNABLE, not waiting on I/O) threads — py-spy sees only Python."""

    IDLE = ("socketAccept", "epollWait", "EPoll.wait", "accept0", "socketRead0", "Net.poll",
            "readBytes", "waitForProcessExit", "waitForReferencePendingList", "Net.accept",
            "SocketDispatcher.read", "FileDispatcherImpl.read")

    def __init__(self, root: int, out: Path, interval: float = 1.0, depth: int = 10) -> None:
        super().__init__(daemon=True, name=f"jstack-{root}")
        self.root = root
        self.out = out
        self.interval = interval
        self.depth = depth
        self.samples = 0
        self.stacks: dict[tuple[str, ...], int] = {}
        self.threads: dict[str, int] = {}
        self.thread_cpu: dict[tuple[int, str], float] = {}  # (pid, thread) -> cpu ms so far
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def _record_cpu(self, pid: int, text: str) -> None:
        import re

        for m in re.finditer(r'^"([^"]+)".*?\bcpu=([0-9.]+)ms', text, re.M):
            name = re.sub(r"\d+", "#", m.group(1))
            key = (pid, m.group(1))
            self.thread_cpu[key] = max(self.thread_cpu.get(key, 0.0), float(m.group(2)))
            self.thread_cpu[(pid, "\0" + name)] = 0.0  # remember the grouped name

    def cpu_by_thread_group(self) -> dict[str, float]:
        import re

        out: dict[str, float] = {}
        for (_pid, name), ms in self.thread_cpu.items():
            if name.startswith("\0"):
                continue
            group = re.sub(r"\d+", "#", name)
            out[group] = out.get(group, 0.0) + ms / 1000
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def _sample(self) -> None:
        import shutil

        jstack = shutil.which("jstack")
        if jstack is None:
            return
        for pid in process_tree(self.root):
            if _comm(pid) != "java":
                continue
            try:
                text = subprocess.run([jstack, str(pid)], capture_output=True, text=True,
                                      timeout=20).stdout
            except Exception:  # noqa: BLE001
                continue
            self.samples += 1
            self._record_cpu(pid, text)
            for block in text.split("\n\n"):
                lines = block.strip().splitlines()
                if len(lines) < 3 or "java.lang.Thread.State: RUNNABLE" not in block:
                    continue
                frames = [ln.strip()[3:] for ln in lines if ln.strip().startswith("at ")]
                if not frames or any(i in frames[0] for i in self.IDLE):
                    continue
                name = lines[0].split('"')[1] if '"' in lines[0] else lines[0]
                name = "Executor task" if name.startswith("Executor task launch") else name
                self.threads[name] = self.threads.get(name, 0) + 1
                key = tuple(f.split("(")[0] for f in frames[: self.depth])
                self.stacks[key] = self.stacks.get(key, 0) + 1

    def run(self) -> None:
        while not self._halt.wait(self.interval):
            self._sample()
        self.write()

    def write(self, top: int = 15) -> str:
        text = self.render(top)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(text + "\n")
        return text

    def render(self, top: int = 15) -> str:
        lines = [f"{self.samples} jstack samples. JVM CPU seconds by thread (group), as of the "
                 "last sample:"]
        for name, secs in list(self.cpu_by_thread_group().items())[:top]:
            lines.append(f"  {secs:8.1f}  {name}")
        lines.append("")
        lines.append("busy (RUNNABLE, not in I/O) threads by name:")
        for name, n in sorted(self.threads.items(), key=lambda kv: -kv[1])[:top]:
            lines.append(f"  {n:5d}  {name}")
        lines.append("")
        lines.append(f"top {top} busy stacks (innermost {self.depth} frames):")
        for stack, n in sorted(self.stacks.items(), key=lambda kv: -kv[1])[:top]:
            lines.append(f"  {n} samples:")
            lines.extend(f"      {f}" for f in stack)
        return "\n".join(lines)


# ------------------------------------------------------------------------------ contenders


@dataclass
class Launched:
    name: str
    proc: subprocess.Popen[bytes]
    status_path: Path
    log_path: Path
    t_launch: float
    _log: Any = None

    def _status_lines(self) -> Iterator[dict[str, Any]]:
        """The status file's events, in order (lines that are not JSON left out)."""
        try:
            lines = self.status_path.read_text().splitlines()
        except FileNotFoundError:
            return
        for line in lines:
            try:
                yield json.loads(line)
            except ValueError:
                continue

    def events(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for ev in self._status_lines():
            out.setdefault(ev["event"], ev)
        return out

    def last_event(self, name: str) -> dict[str, Any] | None:
        """The newest event called ``name`` (``events()`` keeps the first of each)."""
        last = None
        for ev in self._status_lines():
            if ev.get("event") == name:
                last = ev
        return last

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM the contender's process group (it runs in its own session), then SIGKILL."""
        proc = self.proc
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        # whatever the group left behind (e.g. a JVM still shutting down)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        if self._log is not None:
            self._log.close()
            self._log = None
        return proc.returncode


def launch(name: str, cmd: list[str], log_path: Path, status_path: Path,
           env: dict[str, str] | None = None) -> Launched:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    status_path.parent.mkdir(parents=True, exist_ok=True)
    if status_path.exists():
        status_path.unlink()
    full_env = dict(os.environ)
    full_env["PYTHONUNBUFFERED"] = "1"
    full_env.update(env or {})
    logf = open(log_path, "ab")
    logf.write(("$ " + " ".join(cmd) + "\n").encode())
    logf.flush()
    proc = subprocess.Popen(cmd, cwd=str(ROOT), stdout=logf, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env=full_env, start_new_session=True)
    return Launched(name, proc, status_path, log_path, time.time(), logf)


# ---------------------------------------------------------------------------- latency pacer


@dataclass(frozen=True)
class RateSchedule:
    """An input rate over time: ``phases`` of (seconds, records/s) one after the other; the
    last phase goes on until the records run out (its seconds only count for
    :attr:`total_records`). Record ``i`` is due at :meth:`time_of` ``(i)`` seconds after the
    start: the first at 0, then evenly spaced within each phase.

    >>> s = RateSchedule(((2.0, 10.0), (1.0, 100.0), (3.0, 10.0)))
    >>> s.total_records, s.first_index(1), s.first_index(2)
    (150, 20, 120)
    >>> s.time_of(20), s.time_of(70), s.records_by(2.5)
    (2.0, 2.5, 70.0)
    >>> RateSchedule.constant(1000.0).time_of(2500)
    2.5
    """

    phases: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        if not self.phases or any(sec < 0 or rate <= 0 for sec, rate in self.phases):
            raise ValueError(f"phases must be (seconds >= 0, rate > 0) pairs: {self.phases}")

    @classmethod
    def constant(cls, rate: float) -> RateSchedule:
        """One rate for as long as there are records."""
        return cls(((float("inf"), rate),))

    def starts(self) -> list[float]:
        """The second each phase starts at."""
        out, t = [], 0.0
        for seconds, _ in self.phases:
            out.append(t)
            t += seconds
        return out

    def records_by(self, t: float) -> float:
        """Records scheduled in the first ``t`` seconds (fractional)."""
        done = 0.0
        last = len(self.phases) - 1
        for k, (seconds, rate) in enumerate(self.phases):
            if t <= seconds or k == last:
                return done + max(0.0, t) * rate
            done += seconds * rate
            t -= seconds
        return done  # pragma: no cover - the last phase returns

    def time_of(self, i: int) -> float:
        """The second record ``i`` is due at."""
        t, rest = 0.0, float(i)
        last = len(self.phases) - 1
        for k, (seconds, rate) in enumerate(self.phases):
            n = seconds * rate
            if rest < n or k == last:
                return t + rest / rate
            rest -= n
            t += seconds
        return t  # pragma: no cover - the last phase returns

    def first_index(self, phase: int) -> int:
        """The index of the first record of ``phase`` (= the records of the phases before)."""
        return math.ceil(round(sum(sec * rate for sec, rate in self.phases[:phase]), 6))

    @property
    def total_records(self) -> int:
        """The records of every phase (infinite phases: not allowed here)."""
        if any(math.isinf(sec) for sec, _ in self.phases):
            raise ValueError("a schedule with an endless phase has no total")
        return self.first_index(len(self.phases))


@dataclass
class PacerResult:
    sent: int = 0
    seconds: float = 0.0
    started: float = 0.0  # epoch s of the pacer's start (record 0 is due then)
    send_times: dict[int, float] = field(default_factory=dict)  # record index -> send time
    max_lag: float = 0.0  # worst delay of a send behind its schedule


def pace(bootstrap: str, topic: str, records: Sequence[Any], rate: float | RateSchedule,
         probe_indices: set[int], stop: threading.Event | None = None,
         linger_ms: int = 20, *, producer: Any = None,
         send: Callable[[Any, Any], None] | None = None,
         clock: Callable[[], float] = time.time,
         sleep: Callable[[float], None] = time.sleep) -> PacerResult:
    """Send ``records`` at ``rate`` per second, or on a :class:`RateSchedule`; the send time of
    every index in ``probe_indices`` is kept. A pacer behind its schedule sends what is due at
    once and reports its worst delay as ``max_lag``. A record is a ``(key, value)`` for
    ``topic``, or anything ``send(producer, record)`` produces (records for several topics,
    with timestamps). ``producer``, ``clock`` and ``sleep`` replace the Kafka producer and the
    time (tests)."""
    schedule = rate if isinstance(rate, RateSchedule) else RateSchedule.constant(rate)
    if producer is None:
        producer = Producer({
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "linger.ms": linger_ms,
            "enable.idempotence": False,
            "acks": 1,
        })
    res = PacerResult()
    if send is None:
        produce = producer.produce

        def send(_: Any, record: Any) -> None:
            produce(topic, key=record[0], value=record[1])
    n = len(records)
    t0 = res.started = clock()
    i = 0
    send_times = res.send_times
    due_at = schedule.time_of
    while i < n:
        if stop is not None and stop.is_set():
            break
        now = clock()
        # floor + 1: record 0 is due at once; the epsilon keeps an exact due time due
        due = min(n, int(schedule.records_by(now - t0) + 1e-9) + 1)
        if due > i:
            res.max_lag = max(res.max_lag, now - (t0 + due_at(i)))
        first = i
        while i < due:
            try:
                send(producer, records[i])
            except BufferError:
                producer.poll(0.01)
                continue
            if i in probe_indices:
                send_times[i] = clock()
            i += 1
        if i > first:
            # the last record sent waited the longest when sending what was due took a while
            res.max_lag = max(res.max_lag, clock() - (t0 + due_at(i - 1)))
        producer.poll(0)
        sleep(0.001)
    res.seconds = clock() - t0  # to the last produce() call
    producer.flush(30)
    res.sent = i
    return res


def _pace_child(conn: Any, bootstrap: str, topic: str, records: list[Record],
                rate: float | RateSchedule, probe_indices: set[int]) -> None:
    conn.send(pace(bootstrap, topic, records, rate, probe_indices))
    conn.close()


def pace_in_subprocess(bootstrap: str, topic: str, records: list[Record],
                       rate: float | RateSchedule, probe_indices: set[int]) -> PacerResult:
    """:func:`pace` in its own process, so the harness's watcher thread cannot delay it (and
    it cannot delay the watcher's receive times) through the GIL."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_pace_child, args=(child, bootstrap, topic, records, rate,
                                                 probe_indices), daemon=True)
    proc.start()
    child.close()
    try:
        result: PacerResult = parent.recv()
    finally:
        proc.join(30)
    return result


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    idx = min(len(s) - 1, max(0, int(round(q / 100.0 * (len(s) - 1)))))
    return s[idx]
