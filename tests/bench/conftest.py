"""The bench package lives at the repository root, beside src/: put the root on sys.path, and
on PYTHONPATH for Spark's Python workers, which unpickle the benchmark's topologies."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
_pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if str(ROOT) not in _pythonpath:
    os.environ["PYTHONPATH"] = os.pathsep.join([*_pythonpath, str(ROOT)])
