"""``python -m bench.operators``: see bench/operators/suite.py."""

from bench.operators.suite import main

raise SystemExit(main())
