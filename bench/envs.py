"""Virtual environments of the peers, under bench/.venvs/<name> (git-ignored).

Each is created with ``python -m venv`` and pinned requirements, once; a stamp file with the
hash of the requirements makes a changed pin rebuild it. The project's own .venv is never
touched: streamtable, plain PySpark and the bare loop run in it, as they need nothing else.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
VENVS = BENCH / ".venvs"

REQUIREMENTS: dict[str, list[str]] = {
    "quix": ["quixstreams==3.28.1"],
    "faust": ["faust-streaming==0.15.3"],
    # bytewax.connectors.kafka needs confluent-kafka (the "kafka" extra)
    "bytewax": ["bytewax[kafka]==0.21.1"],
    # the Nexmark contender produces its output with confluent-kafka
    "pathway": ["pathway==0.33.0", "confluent-kafka==2.16.1"],
    # the Nexmark Flink SQL contender: PyFlink bundles Flink (its jars, run on the machine's
    # Java 17); no Kafka connector jar comes with it, so the contender reads and writes Kafka
    # with confluent-kafka
    "flink": ["apache-flink==2.3.0", "confluent-kafka==2.16.1"],
    # py-spy for --profile
    "tools": ["py-spy==0.4.3"],
}


def _base_python() -> str:
    """A Python to create venvs with: the interpreter the project's venv was made from."""
    base = getattr(sys, "_base_executable", None)
    if base and os.path.exists(base):
        return base
    return shutil.which("python3") or sys.executable


def venv_python(name: str) -> Path:
    return VENVS / name / "bin" / "python"


def ensure_env(name: str, log=print) -> Path:  # type: ignore[no-untyped-def]
    reqs = REQUIREMENTS[name]
    env_dir = VENVS / name
    digest = hashlib.sha256("\n".join(reqs).encode()).hexdigest()[:12]
    stamp = env_dir / f".installed-{digest}"
    python = venv_python(name)
    if stamp.exists() and python.exists():
        return python
    if env_dir.exists():
        shutil.rmtree(env_dir)
    log(f"creating bench/.venvs/{name}: {' '.join(reqs)}")
    VENVS.mkdir(parents=True, exist_ok=True)
    subprocess.run([_base_python(), "-m", "venv", str(env_dir)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *reqs], check=True)
    stamp.touch()
    return python


def tool(name: str, executable: str) -> Path:
    ensure_env(name)
    return VENVS / name / "bin" / executable


def installed_version(name: str, dist: str) -> str:
    try:
        out = subprocess.run(
            [str(venv_python(name)), "-c",
             f"import importlib.metadata as m; print(m.version({dist!r}))"],
            capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except Exception:  # noqa: BLE001
        return "?"
