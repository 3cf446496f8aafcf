"""The share-holders streams application as an application file for the ``streamtable``
command (the service in ``service.py`` runs the same topology with its HTTP API and emails).

    streamtable run examples/share_holders/app.py --development-broker --create-topics
    streamtable query examples/share_holders/app.py us-share-holders client1
"""

from __future__ import annotations

import sys
from pathlib import Path

# the repository root, so that this file can import the example's package wherever it runs
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.share_holders.topology import build_topology  # noqa: E402

config = {
    "application.id": "share-holders",
    "bootstrap.servers": "localhost:9092",
}

__all__ = ["build_topology", "config"]
