"""A real PostgreSQL server for the tests that need one (``postgres_url``), one per test session.

The server binaries are looked up on PATH and under ``/usr/lib/postgresql/*/bin``; when there are
none, Debian's ``postgresql`` package is installed (as root, with apt-get). Without them, or
without psycopg, the tests that use the fixture are skipped, naming the reason. The cluster lives
in a temporary directory, owned by the ``postgres`` user when the tests run as root (initdb refuses
root), listens on a free localhost port with trust authentication, and is stopped at the end.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

log = logging.getLogger(__name__)

_DATABASE = "streamtable_test"


def _server_bin_dir() -> Path | None:
    """A directory with PostgreSQL's initdb and pg_ctl (the newest version when several)."""
    found = shutil.which("initdb")
    candidates = [Path(found).resolve().parent] if found else []
    candidates += sorted((Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin")),
                         key=lambda p: _version(p.parent.name), reverse=True)
    for directory in candidates:
        if (directory / "initdb").exists() and (directory / "pg_ctl").exists():
            return directory
    return None


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(p) for p in name.split(".") if p.isdigit())


def _install_postgresql() -> str | None:
    """Install Debian's postgresql package; returns why not, or None when it worked."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "initdb/pg_ctl not found and cannot install them (needs root and apt-get)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-q"],
                    ["apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql"]):
        log.info("running %s", " ".join(command))
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{' '.join(command)} failed: {e}"
        if done.returncode != 0:
            return f"{' '.join(command)} failed: {done.stderr.strip()[-500:]}"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The URL of an empty database on a PostgreSQL server started for this test session."""
    pytest.importorskip("psycopg", reason="psycopg 3 is not installed (the 'postgres' extra)")
    import psycopg

    bin_dir = _server_bin_dir()
    if bin_dir is None:
        why = _install_postgresql()
        bin_dir = _server_bin_dir()
        if bin_dir is None:
            pytest.skip(f"no PostgreSQL server: {why or 'initdb/pg_ctl missing after install'}")
    as_root = os.geteuid() == 0
    as_user: list[str] = []
    if as_root:
        if shutil.which("runuser") is None:
            pytest.skip("PostgreSQL refuses to run as root and runuser is missing")
        try:
            import pwd

            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("PostgreSQL refuses to run as root and there is no 'postgres' user")
        as_user = ["runuser", "-u", "postgres", "--"]

    # not under pytest's tmp_path: its parents are private to root, and socket paths are short
    base = Path(tempfile.mkdtemp(prefix="streamtable-pg-"))
    data, sockets = base / "data", base / "sockets"
    sockets.mkdir()
    if as_root:
        for path in (base, sockets):
            os.chown(path, owner.pw_uid, owner.pw_gid)

    def run(*command: str | Path) -> None:
        done = subprocess.run([*as_user, *map(str, command)], capture_output=True, text=True,
                              timeout=120, cwd=base)
        if done.returncode != 0:
            raise RuntimeError(f"{command[0]} failed ({done.returncode}): "
                               f"{done.stdout}{done.stderr}")

    started = False
    try:
        port = _free_port()
        run(bin_dir / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
            "--no-sync", "--no-instructions")
        options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
        run(bin_dir / "pg_ctl", "-D", data, "-o", options, "-l", base / "server.log", "-w",
            "-t", "60", "start")
        started = True
        admin = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {_DATABASE}")
        log.info("PostgreSQL from %s on port %d (data in %s)", bin_dir, port, data)
        yield f"postgresql://postgres@127.0.0.1:{port}/{_DATABASE}"
    finally:
        if started:
            run(bin_dir / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)
