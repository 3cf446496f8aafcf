"""Command line: ``streamtable describe | demo`` (``run``, ``reset``, ``broker``, ``query`` come
with the Spark runtime).

An application file defines ``build_topology()`` (or a ``topology`` object) and may define a
``config`` dict of settings.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys
from pathlib import Path
from types import ModuleType

from streamtable.topology.graph import Topology

log = logging.getLogger("streamtable")


def load_app(path: str) -> ModuleType:
    """Import an application file by path."""
    file = Path(path)
    if not file.exists():
        raise SystemExit(f"streamtable: no such application file: {path}")
    spec = importlib.util.spec_from_file_location(file.stem.replace("-", "_"), file)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def app_topology(module: ModuleType) -> Topology:
    if hasattr(module, "build_topology"):
        return module.build_topology()
    topo = getattr(module, "topology", None)
    if isinstance(topo, Topology):
        return topo
    raise SystemExit(
        f"streamtable: {module.__file__} defines neither build_topology() nor a topology"
    )


def cmd_describe(args: argparse.Namespace) -> int:
    print(app_topology(load_app(args.app)).describe(), end="")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from streamtable.demo import run_demo

    return run_demo(once=args.once)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="streamtable", description="Kafka Streams' stream-table model on Spark"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("describe", help="print an application's topology")
    p.add_argument("app", help="path to the application file")
    p.set_defaults(func=cmd_describe)
    p = sub.add_parser("demo", help="run the share-holders demo")
    p.add_argument("--once", action="store_true", help="run once, check, and exit")
    p.set_defaults(func=cmd_demo)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
