"""streamtable on Spark: the query's topology from ``bench/nexmark/queries/`` run by
``bench/nexmark/app.py`` with ``StreamsApp.run_until_caught_up()`` and the default settings
(live: ``StreamsApp.start()``, until stopped)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

from bench.harness import ROOT
from bench.nexmark.contenders import Run
from bench.nexmark.queries import QUERIES


@dataclass(frozen=True)
class Streamtable:
    name: str = "streamtable"
    live: bool = True

    def supports(self, query: str) -> bool:
        return query in QUERIES

    def command(self, run: Run) -> tuple[list[str], dict[str, str]]:
        cmd = [sys.executable, "-m", "bench.nexmark.app", "--query", run.query,
               "--output", run.output, "--bootstrap", run.bootstrap, "--app-id", run.run_id,
               "--state-dir", str(run.state_dir), "--status", str(run.status),
               "--rate", str(run.rate), "--grace-ms", str(run.grace_ms),
               "--input-counts", json.dumps(run.input_counts)]
        for kv in run.extra:
            cmd += ["--config", kv]
        if run.live:
            cmd.append("--live")
        env = {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
        return cmd, env


CONTENDER = Streamtable()
