"""``python -m bench`` (= ``make bench``): see bench/runner.py."""

from bench.runner import main

raise SystemExit(main())
