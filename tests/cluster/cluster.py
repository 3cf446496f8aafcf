"""A real Spark standalone cluster whose workers share no local disk, and a local S3 server.

``spark_cluster`` starts a master and N workers from the pyspark wheel (``spark-class``, the
wheel has no ``start-*.sh``). Each worker runs in its own mount namespace (``unshare``, needs
root) with private tmpfs mounts over ``/tmp`` and over :attr:`SparkCluster.node_dir`, so the
workers share no local disk, as two machines would not (what they run from ``/tmp``, a clone
and its virtual environment there, is bound back over the private ``/tmp``, as the same code
installed on every machine; :func:`private_tmp_script`): the same path (``node_dir``) is a
different, empty directory on each worker and on the driver. Under ``node_dir`` each worker has
``work`` (its work dir: executor logs, fetched files), ``spark-local`` (``SPARK_LOCAL_DIRS``:
shuffle and blocks) and ``state`` (the worker-local state directory an application may use).
Each worker (and its executors) also has a loopback address of its own, ``127.0.0.<i+2>``
(:func:`worker_host`): Spark takes executors with one host name for executors sharing a disk.

``s3_server`` runs moto's S3 server in its own process (Spark executors, other processes, must
reach it) and creates a bucket.

Both are context managers; ``tests/cluster/conftest.py`` wraps them in fixtures.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SPARK_HOME = Path(str(__import__("pyspark").__file__)).resolve().parent
"""The installed ``pyspark`` package: it holds ``bin/spark-class`` and ``jars``."""

LOCALHOST = "127.0.0.1"
"""The master, the driver and the S3 server listen here."""


def worker_host(i: int) -> str:
    """Worker ``i``'s address: a loopback address of its own (``127.0.0.<i+2>``), as if
    every worker were a machine of its own. Spark treats executors on one host as sharing a
    disk (``spark.shuffle.readHostLocalDisk``: a reducer reads another executor's shuffle
    files straight from its directories), which private disks would break."""
    if not 0 <= i < 250:
        raise ValueError(f"no loopback address for worker {i}")
    return f"127.0.0.{i + 2}"


def free_port() -> int:
    """A TCP port nobody listens on right now, on any address (it may be taken again before
    it is used)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def wait_until(predicate: Any, timeout: float, what: str, interval: float = 0.2) -> Any:
    """Poll ``predicate()`` until it returns something truthy; return it. ``TimeoutError``
    naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def _process_table() -> dict[int, tuple[int, int, str, str]]:
    """pid -> (ppid, pgid, mount namespace, command line) of every live process, from /proc."""
    table: dict[int, tuple[int, int, str, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            mnt_ns = os.readlink(f"/proc/{entry}/ns/mnt")
        except OSError:
            continue
        # the command name (field 2) may hold spaces and parentheses: split after its last ')'
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] == "Z":  # zombies hold no memory and no ports; their parent reaps them
            continue
        table[int(entry)] = (int(fields[1]), int(fields[2]), mnt_ns,
                             cmdline.replace(b"\0", b" ").decode(errors="replace").strip())
    return table


def mount_namespace(pid: int) -> str | None:
    """The mount namespace of a process (``mnt:[inode]``), None when it is gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def namespace_processes(mnt_ns: str) -> dict[int, str]:
    """The live processes in a mount namespace: pid -> command line."""
    return {pid: cmd for pid, (_, _, ns, cmd) in _process_table().items() if ns == mnt_ns}


def process_group(pgid: int) -> dict[int, str]:
    """The live processes of a process group: pid -> command line."""
    return {pid: cmd for pid, (_, g, _, cmd) in _process_table().items() if g == pgid}


def rss_bytes(pid: int) -> int:
    """Resident memory of one process (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def describe(cmd: str) -> str:
    """A short name for a cluster process: master, worker, executor, python daemon..."""
    if "deploy.master.Master" in cmd:
        return "master"
    if "deploy.worker.Worker" in cmd:
        return "worker"
    if "CoarseGrainedExecutorBackend" in cmd:
        return "executor"
    if "pyspark.daemon" in cmd or "streamtable.runtime.spark.process.daemon" in cmd:
        return "python-daemon"  # PySpark's daemon or streamtable's, and the workers it forks
    if "pyspark.worker" in cmd or "python" in cmd:
        return "python"
    return cmd.split(" ", 1)[0]


def _terminate_group(pgid: int, grace: float) -> None:
    """SIGTERM a process group, SIGKILL what is left after ``grace`` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        try:
            wait_until(lambda: not process_group(pgid), wait, f"process group {pgid} to exit")
            return
        except TimeoutError:
            log.warning("process group %d still alive after %s", pgid, sig.name)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "<no log>"


@dataclass
class WorkerProcess:
    """One worker: its JVM (the process the launcher ``exec``\\ s into) leads its own process
    group and its own mount namespace. The executors it starts inherit both; their Python
    daemons (``pyspark.daemon`` calls ``setpgid``) lead process groups of their own but stay
    in the namespace, so the namespace is what identifies a worker's processes."""

    index: int
    name: str
    host: str
    process: subprocess.Popen[bytes]
    webui_port: int
    log_path: Path
    node_dir: Path
    started_at: float
    mnt_ns: str | None = None
    killed_at: float | None = None
    frozen: bool = False
    gone: bool = False

    @property
    def pid(self) -> int:
        """The worker JVM's pid (also its process group id)."""
        return self.process.pid

    def processes(self) -> dict[int, str]:
        """Live processes of this worker: the worker JVM, its executors and their Python
        daemons and workers (pid -> command line)."""
        if self.gone:  # its pid and namespace inode may belong to new processes by now
            return {}
        procs = process_group(self.pid)
        if self.mnt_ns is not None:
            procs.update(namespace_processes(self.mnt_ns))
        return procs

    def executor_pids(self) -> list[int]:
        """pids of the executor JVMs this worker runs."""
        return [p for p, cmd in self.processes().items() if describe(cmd) == "executor"]

    def memory(self) -> dict[int, tuple[str, int]]:
        """pid -> (kind, resident bytes) for every process of this worker."""
        return {p: (describe(cmd), rss_bytes(p)) for p, cmd in self.processes().items()}

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a command inside this worker's mount namespace (sees its private dirs)."""
        return subprocess.run(
            ["nsenter", f"--target={self.pid}", "--mount", "--", *argv],
            capture_output=True, text=True, check=check, timeout=60,
        )

    def read_text(self, path: str | Path) -> str:
        """A file's text as this worker sees it (e.g. executor logs under ``work``)."""
        return self.run("cat", str(path)).stdout

    def exists(self, path: str | Path) -> bool:
        """Whether ``path`` exists in this worker's view of the file system."""
        return self.run("test", "-e", str(path), check=False).returncode == 0

    def executor_logs(self) -> str:
        """Every executor's stderr in this worker's work dir (while the worker lives)."""
        r = self.run("sh", "-c", f"cat {shlex.quote(str(self.node_dir))}/work/*/*/stderr",
                     check=False)
        return r.stdout


@dataclass
class SparkCluster:
    """A running standalone cluster: see :func:`spark_cluster`."""

    master_url: str
    master_webui_url: str
    master: subprocess.Popen[bytes]
    workers: list[WorkerProcess]
    base_dir: Path
    node_dir: Path
    cores_per_worker: int
    worker_memory: str = "2g"
    private_tmp: bool = True
    worker_opts: dict[str, str] = field(default_factory=dict)
    worker_env: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def state_dir(self) -> Path:
        """The worker-local state directory: the same path on every worker, a different
        (private) directory on each; exists, empty, on the driver too."""
        return self.node_dir / "state"

    def status(self) -> dict[str, Any]:
        """The master's status (its web UI's ``/json/``): workers, alive workers, apps..."""
        with urllib.request.urlopen(self.master_webui_url + "/json/", timeout=5) as r:
            return dict(json.load(r))

    def alive_workers(self) -> list[dict[str, Any]]:
        """The workers the master counts as ALIVE."""
        try:
            workers = self.status().get("workers", [])
        except (OSError, ValueError):
            return []
        return [w for w in workers if w.get("state") == "ALIVE"]

    def wait_for_workers(self, n: int, timeout: float = 120.0) -> None:
        """Until the master reports ``n`` alive workers (exactly: dead ones must be gone)."""

        def ready() -> bool:
            for w in [*self.workers, None]:
                proc = self.master if w is None else w.process
                if proc.poll() is not None and (w is None or w.killed_at is None):
                    path = self.base_dir / "master.log" if w is None else w.log_path
                    raise RuntimeError(f"{path.stem} exited ({proc.returncode}):\n{_tail(path)}")
            return len(self.alive_workers()) == n

        wait_until(ready, timeout, f"{n} alive workers at {self.master_url}")

    def start_worker(self, i: int) -> WorkerProcess:
        """Start worker ``i`` (``worker-<i>``) in a fresh mount namespace with empty private
        tmpfs mounts, as a machine with a wiped local disk; replaces a killed worker ``i``.
        Does not wait for it to register (see :meth:`wait_for_workers`)."""
        name = f"worker-{i}"
        if i < len(self.workers) and not self.workers[i].gone:
            raise RuntimeError(f"{name} is still running")
        if i > len(self.workers):
            raise ValueError(f"start worker-{len(self.workers)} first")
        node = shlex.quote(str(self.node_dir))
        script = "set -e\n"
        if self.private_tmp:
            script += private_tmp_script(name, code_paths())
        script += (
            f"mkdir -p {node}\n"
            f"mount -t tmpfs -o mode=1777 streamtable-{name} {node}\n"
        ) + (
            f"cd {node}\nmkdir -p work spark-local state\necho {name} > NODE\n"
            'exec "$0" org.apache.spark.deploy.worker.Worker "$@"\n'
        )
        ui, host = free_port(), worker_host(i)
        log_path = self.base_dir / f"{name}.log"
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                 str(SPARK_HOME / "bin" / "spark-class"), self.master_url, "--host", host,
                 "--cores", str(self.cores_per_worker), "--memory", self.worker_memory,
                 "--work-dir", str(self.node_dir / "work"), "--webui-port", str(ui)],
                env=_spark_env({
                    # the worker and its executors bind and advertise this address
                    "SPARK_LOCAL_IP": host,
                    "SPARK_LOCAL_HOSTNAME": host,
                    "SPARK_WORKER_OPTS": _java_opts(self.worker_opts),
                    "SPARK_LOCAL_DIRS": str(self.node_dir / "spark-local"),
                    "STREAMTABLE_NODE": name,
                    **self.worker_env,
                }),
                cwd=self.base_dir, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        worker = WorkerProcess(i, name, host, proc, ui, log_path, self.node_dir,
                               time.monotonic())
        if i < len(self.workers):
            self.workers[i] = worker
        else:
            self.workers.append(worker)
        return worker

    def _check_namespaces(self) -> None:
        own = mount_namespace(os.getpid())
        for w in self.workers:
            if w.killed_at is None and w.mnt_ns is None:
                w.mnt_ns = mount_namespace(w.pid)
                if w.mnt_ns is None or w.mnt_ns == own:
                    raise RuntimeError(f"{w.name} is not in a mount namespace of its own")

    def live_workers(self) -> list[WorkerProcess]:
        """The workers started and not killed."""
        return [w for w in self.workers if w.killed_at is None]

    def restart_worker(self, i: int, timeout: float = 120.0) -> WorkerProcess:
        """Start the killed worker ``i`` again (empty local disk) and wait until the master
        counts it alive."""
        t0 = time.monotonic()
        worker = self.start_worker(i)
        self.wait_for_workers(len(self.live_workers()), timeout)
        self._check_namespaces()
        log.info("restarted %s in %.1fs", worker.name, time.monotonic() - t0)
        return worker

    def worker_state(self, i: int) -> str | None:
        """The master's state of worker ``i`` (``ALIVE``, ``DEAD``...), None if unknown."""
        address = f"http://{self.workers[i].host}:{self.workers[i].webui_port}"
        states = [w.get("state") for w in self.status().get("workers", [])
                  if w.get("webuiaddress") == address]
        return states[-1] if states else None

    def applications(self) -> list[dict[str, Any]]:
        """The master's active applications."""
        return list(self.status().get("activeapps", []))

    def processes(self) -> dict[int, str]:
        """Every live process of the cluster (master, workers, executors, Python workers)."""
        procs = process_group(self.master.pid)
        for w in self.workers:
            procs.update(w.processes())
        return procs

    def kill_worker(self, i: int, mode: str = "machine") -> dict[int, str]:
        """SIGKILL worker ``i``; return the pid -> command line of the processes it had.

        ``mode="machine"`` (default) kills every process of the worker's mount namespace at
        once (worker JVM, executor JVMs, Python daemons and workers), as when the machine
        dies; its private tmpfs mounts vanish with them. ``"group"`` kills the worker's
        process group (worker and executor JVMs; the Python daemons, in their own groups,
        exit when the executor's pipe closes). ``"jvm"`` kills only the worker JVM: its
        executors notice the lost worker and exit by themselves. The call returns once no
        process of the worker is left (or raises ``TimeoutError``)."""
        w = self.workers[i]
        if w.gone:
            return {}
        victims = w.processes()
        w.killed_at = time.monotonic()
        if mode == "machine" or w.frozen:  # stopped processes would not notice anything
            _kill_all(w.processes)
        elif mode == "group":
            os.killpg(w.pid, signal.SIGKILL)
        elif mode == "jvm":
            os.kill(w.pid, signal.SIGKILL)
        else:
            raise ValueError(f"unknown kill mode {mode!r}")
        w.process.wait(timeout=30)
        wait_until(lambda: not w.processes(), 60, f"worker {i}'s processes to exit")
        w.gone = True
        log.info("killed worker %d (%s) in %.1fs: %s", i, mode, time.monotonic() - w.killed_at,
                 {p: describe(c) for p, c in victims.items()})
        return victims

    def freeze_worker(self, i: int) -> dict[int, str]:
        """SIGSTOP every process of worker ``i``: a hung machine or a network partition.
        Its connections stay open, so only timeouts notice (master: ``spark.worker.timeout``;
        driver: ``spark.network.timeout``). End it with :meth:`kill_worker`."""
        w = self.workers[i]
        frozen = w.processes()
        w.frozen = True
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        log.info("froze worker %d: %s", i, {p: describe(c) for p, c in frozen.items()})
        return frozen

    def stop(self, grace: float = 15.0) -> None:
        """Stop workers (and their executors), then the master; SIGKILL what does not
        stop within ``grace`` seconds."""
        for w in self.workers:
            if w.gone:  # killed: its pid may be another process's by now
                continue
            if not w.frozen:  # a stopped process does not act on SIGTERM
                _terminate_group(w.pid, grace)
            _kill_all(w.processes)  # Python daemons outlive a terminated worker a moment
            w.process.wait(timeout=10)
            w.gone = True
        _terminate_group(self.master.pid, grace)
        if self.master.poll() is None:
            self.master.wait(timeout=10)


def _kill_all(processes: Callable[[], dict[int, str]], timeout: float = 30.0) -> None:
    """SIGKILL every process ``processes()`` lists, again until it lists none."""

    def all_dead() -> bool:
        for pid in processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return not processes()

    wait_until(all_dead, timeout, "processes to die")


def code_paths() -> list[str]:
    """What a worker runs from the driver's file system: the interpreter's prefix (a virtual
    environment), pyspark's ``SPARK_HOME`` and every directory of the import path the executors
    are given (the clone's ``src``, the repository root)."""
    from streamtable.runtime.spark.process.session import worker_pythonpath

    paths = [sys.prefix, sys.base_prefix, str(SPARK_HOME), os.path.dirname(sys.executable)]
    paths += [p for p in worker_pythonpath().split(os.pathsep) if p]
    return paths


def kept_under(root: str, paths: list[str]) -> list[str]:
    """The directories of ``paths`` strictly under ``root`` (resolved), without those inside
    another one: what a private mount over ``root`` must show again.

    >>> kept_under("/tmp", ["/tmp/clone/.venv", "/tmp/clone", "/usr/lib", "/tmp", "/tmpx/a"])
    ['/tmp/clone']
    """
    base = os.path.realpath(root)
    found = sorted({os.path.realpath(p) for p in paths
                    if os.path.realpath(p).startswith(base + os.sep)})
    return [p for p in found if not any(p.startswith(q + os.sep) for q in found if q != p)]


def private_tmp_script(name: str, code: list[str]) -> str:
    """Shell lines that mount an empty tmpfs over ``/tmp`` and then bind the directories of
    ``code`` under ``/tmp`` (the driver's clone, its virtual environment) back to their paths,
    from the ``/tmp`` they hide (held open as file descriptor 3): a worker on a machine of its
    own has its own ``/tmp``, and the same code wherever the clone lives."""
    keep = [p for p in kept_under("/tmp", code) if os.path.isdir(p)]
    lines = ["exec 3</tmp\n"] if keep else []
    lines.append(f"mount -t tmpfs -o mode=1777 streamtable-{name} /tmp\n")
    for path in keep:
        inside = os.path.relpath(path, os.path.realpath("/tmp"))
        # --no-canonicalize: resolved by the kernel, through the descriptor, to the hidden /tmp
        lines.append(f"mkdir -p {shlex.quote(path)}\n"
                     f'mount --no-canonicalize --bind "/proc/$$/fd/3/"{shlex.quote(inside)} '
                     f"{shlex.quote(path)}\n")
    if keep:
        lines.append("exec 3<&-\n")
    return "".join(lines)


def _java_opts(props: Mapping[str, str]) -> str:
    return " ".join(f"-D{k}={v}" for k, v in props.items())


def _spark_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP=LOCALHOST,
        PYSPARK_PYTHON=env.get("PYSPARK_PYTHON", sys.executable),
        SPARK_DAEMON_MEMORY=env.get("STREAMTABLE_CLUSTER_DAEMON_MEMORY", "512m"),
    )
    env.pop("SPARK_CONF_DIR", None)
    env.update(extra or {})
    return env


@contextmanager
def spark_cluster(
    workers: int = 2,
    cores: int = 1,
    memory: str = "2g",
    base_dir: str | Path | None = None,
    private_tmp: bool = True,
    master_opts: Mapping[str, str] | None = None,
    worker_opts: Mapping[str, str] | None = None,
    worker_env: Mapping[str, str] | None = None,
    worker_timeout: int | None = None,
    timeout: float = 120.0,
) -> Iterator[SparkCluster]:
    """Start a standalone master and ``workers`` workers of ``cores`` cores and ``memory``
    for executors each; yield the :class:`SparkCluster` once the master counts them all alive;
    stop every process at exit.

    Each worker runs in its own mount namespace with a private tmpfs over ``node_dir`` and (with
    ``private_tmp``) over ``/tmp``: its work dir, ``SPARK_LOCAL_DIRS`` and the worker-local
    state dir live there. Every worker and its executors see ``STREAMTABLE_NODE=worker-<i>``.
    ``master_opts``/``worker_opts`` are Spark properties for the daemons.
    ``worker_timeout`` (seconds; Spark's default 60) sets ``spark.worker.timeout`` on the
    master *and* the workers: a master that alone has a short timeout drops healthy workers,
    who send a heartbeat every quarter of *their* timeout. It only matters for a worker that
    hangs (:meth:`SparkCluster.freeze_worker`): a killed one closes its connection and the
    master drops it at once. Logs: ``base_dir/master.log``, ``base_dir/worker-<i>.log``.
    """
    if os.geteuid() != 0:
        raise RuntimeError("spark_cluster needs root: workers get private mount namespaces")
    owns_base = base_dir is None
    base = Path(tempfile.mkdtemp(prefix="streamtable-cluster-")) if base_dir is None \
        else Path(base_dir)
    base.mkdir(parents=True, exist_ok=True)
    # the same path on every worker, a private tmpfs on each; on the driver, an empty directory
    node_dir = base / "node"
    node_dir.mkdir(exist_ok=True)
    master_opts, worker_opts = dict(master_opts or {}), dict(worker_opts or {})
    if worker_timeout is not None:
        master_opts["spark.worker.timeout"] = worker_opts["spark.worker.timeout"] = \
            str(worker_timeout)
    master_port, master_ui = free_port(), free_port()
    master_url = f"spark://{LOCALHOST}:{master_port}"

    t0 = time.monotonic()
    master_log = open(base / "master.log", "wb")  # noqa: SIM115 - closed in finally
    master = subprocess.Popen(
        [str(SPARK_HOME / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master",
         "--host", LOCALHOST, "--port", str(master_port), "--webui-port", str(master_ui)],
        env=_spark_env({"SPARK_MASTER_OPTS": _java_opts(master_opts)}), cwd=base,
        stdin=subprocess.DEVNULL, stdout=master_log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    cluster = SparkCluster(
        master_url, f"http://{LOCALHOST}:{master_ui}", master, [], base, node_dir, cores,
        memory, private_tmp, worker_opts, dict(worker_env or {}),
    )
    try:
        wait_until(lambda: _http_ok(cluster.master_webui_url + "/json/") or master.poll(),
                   timeout, "the master's web UI")
        if master.poll() is not None:
            raise RuntimeError(f"master exited:\n{_tail(base / 'master.log')}")
        cluster.timings["master_s"] = time.monotonic() - t0
        t1 = time.monotonic()
        for i in range(workers):
            cluster.start_worker(i)
        cluster.wait_for_workers(workers, timeout)
        cluster._check_namespaces()
        cluster.timings["workers_s"] = time.monotonic() - t1
        log.info("spark cluster %s: master up in %.1fs, %d workers alive %.1fs later",
                 master_url, cluster.timings["master_s"], workers, cluster.timings["workers_s"])
        yield cluster
    finally:
        try:
            cluster.stop()
        finally:
            master_log.close()
        leaked = cluster.processes()
        if leaked:
            log.error("spark cluster left processes behind: %s", leaked)
        if owns_base and not os.environ.get("STREAMTABLE_CLUSTER_KEEP_LOGS"):
            shutil.rmtree(base, ignore_errors=True)


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
    except (OSError, urllib.error.URLError):
        return False


@dataclass
class S3Server:
    """A local S3 (moto) reachable from every process of this machine."""

    endpoint_url: str
    bucket: str
    access_key: str
    secret_key: str
    region: str
    process: subprocess.Popen[bytes]

    @property
    def endpoint_host(self) -> str:
        """``host:port`` of the endpoint (pyarrow's ``endpoint_override``)."""
        return self.endpoint_url.split("://", 1)[1]

    @property
    def env(self) -> dict[str, str]:
        """Environment for any process that should reach this S3: the credentials and the
        endpoint. ``pyarrow.fs.FileSystem.from_uri("s3://...")`` honours ``AWS_ENDPOINT_URL``
        (and ``AWS_ENDPOINT_URL_S3``); the ``S3FileSystem(...)`` constructor does not."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ENDPOINT_URL_S3": self.endpoint_url,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def executor_conf(self) -> dict[str, str]:
        """``spark.executorEnv.*`` settings that give executors :attr:`env`."""
        return {f"spark.executorEnv.{k}": v for k, v in self.env.items()}

    def uri(self, key: str = "") -> str:
        """``s3://bucket/key?...`` naming the endpoint and region: usable with
        ``pyarrow.fs.FileSystem.from_uri`` without any environment (credentials still come
        from :attr:`env`)."""
        return (f"s3://{self.bucket}/{key.lstrip('/')}?endpoint_override={self.endpoint_host}"
                f"&scheme=http&region={self.region}")

    def filesystem(self) -> Any:
        """A ``pyarrow.fs.S3FileSystem`` on this server (paths are ``bucket/key``)."""
        from pyarrow import fs

        return fs.S3FileSystem(endpoint_override=self.endpoint_host, scheme="http",
                               access_key=self.access_key, secret_key=self.secret_key,
                               region=self.region)


@contextmanager
def s3_server(bucket: str | None = None, log_dir: str | Path | None = None,
              timeout: float = 60.0) -> Iterator[S3Server]:
    """Run ``moto.server`` in a separate process on a free port, create ``bucket`` (default: a
    fresh name), yield the :class:`S3Server`, stop the process at exit."""
    port = free_port()
    bucket = bucket or f"streamtable-{uuid.uuid4().hex[:12]}"
    log_path = Path(log_dir or tempfile.gettempdir()) / f"moto-{port}.log"
    out = open(log_path, "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", LOCALHOST, "-p", str(port)],
        stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = S3Server(f"http://{LOCALHOST}:{port}", bucket, "testing", "testing", "us-east-1",
                      proc)
    try:
        wait_until(lambda: _http_ok(server.endpoint_url + "/moto-api/") or proc.poll() is not None,
                   timeout, "the moto server")
        if proc.poll() is not None:
            raise RuntimeError(f"moto server exited:\n{_tail(log_path)}")
        import boto3

        boto3.client("s3", endpoint_url=server.endpoint_url, region_name=server.region,
                     aws_access_key_id=server.access_key,
                     aws_secret_access_key=server.secret_key).create_bucket(Bucket=bucket)
        log.info("moto S3 at %s, bucket %s", server.endpoint_url, bucket)
        yield server
    finally:
        _terminate_group(proc.pid, 10.0)
        if proc.poll() is None:
            proc.wait(timeout=10)
        out.close()
        if log_dir is None:
            log_path.unlink(missing_ok=True)


def cluster_conf(cluster: SparkCluster, s3: S3Server | None = None,
                 executors: int | None = None) -> dict[str, str]:
    """Spark properties for a driver on ``cluster``: small executors of one core each,
    ``executors`` of them (default: one per worker) and jobs wait until all registered;
    with ``s3``, executors get its endpoint and credentials in their environment."""
    n = len(cluster.workers) if executors is None else executors
    conf = {
        "spark.driver.host": LOCALHOST,
        "spark.driver.bindAddress": LOCALHOST,
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.cores.max": str(n),
        # a job waits for every executor: otherwise the first one to register takes the tasks
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.scheduler.maxRegisteredResourcesWaitingTime": "180s",
        "spark.ui.enabled": "false",
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
    }
    if s3 is not None:
        conf.update(s3.executor_conf())
    return conf


def executor_count(spark: Any) -> int:
    """Executors registered with the driver (the driver itself not counted)."""
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    return max(0, len(infos) - 1)


def wait_for_executors(spark: Any, n: int, timeout: float = 240.0) -> float:
    """Until ``n`` executors registered; return the seconds waited."""
    t0 = time.monotonic()
    wait_until(lambda: executor_count(spark) >= n, timeout, f"{n} executors", interval=0.5)
    return time.monotonic() - t0


@contextmanager
def cluster_spark_session(cluster: SparkCluster, s3: S3Server | None = None,
                          conf: Mapping[str, Any] | None = None,
                          app_name: str = "streamtable-cluster-test",
                          executors: int | None = None) -> Iterator[Any]:
    """The SparkSession streamtable creates (``spark_session``: executors' PYTHONPATH is the
    driver's import path), on ``cluster`` with :func:`cluster_conf` plus ``conf``; stopped at
    exit. It waits until the executors registered (``cluster.timings["executors_s"]``)."""
    from streamtable.runtime.spark.process.session import spark_session

    settings: dict[str, Any] = {**cluster_conf(cluster, s3, executors), **(conf or {})}
    t0 = time.monotonic()
    spark = spark_session(cluster.master_url, app_name, conf=settings)
    try:
        cluster.timings["session_s"] = time.monotonic() - t0
        n = int(settings["spark.cores.max"]) // int(settings["spark.executor.cores"])
        wait_for_executors(spark, n)
        cluster.timings["executors_s"] = time.monotonic() - t0
        log.info("session on %s in %.1fs, %d executors registered after %.1fs",
                 cluster.master_url, cluster.timings["session_s"], n,
                 cluster.timings["executors_s"])
        yield spark
    finally:
        spark.stop()
