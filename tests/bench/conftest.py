"""The bench package lives at the repository root, beside src/: put the root on sys.path, and
on PYTHONPATH for Spark's Python workers, which unpickle the benchmark's topologies."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
_pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if str(ROOT) not in _pythonpath:
    os.environ["PYTHONPATH"] = os.pathsep.join([*_pythonpath, str(ROOT)])


# The Nexmark topics have fixed names (the bench's input contract): every test reading them from
# the session's broker shares one generated input, made once.
NEXMARK_GENERATOR_SEED, NEXMARK_RATE, NEXMARK_EVENTS = 13, 500, 2_000


@pytest.fixture(scope="session")
def nexmark_input(bootstrap: str) -> dict[str, Any]:
    """The session broker with NEXMARK_EVENTS generated events; what was written per kind."""
    from bench.nexmark.events import generate_into
    from bench.nexmark.generator import Generator

    generator = Generator(NEXMARK_GENERATOR_SEED, rate=NEXMARK_RATE)
    return {"bootstrap": bootstrap, "generator": generator, "events": NEXMARK_EVENTS,
            "counts": generate_into(bootstrap, generator, NEXMARK_EVENTS)["counts"]}
