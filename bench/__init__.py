"""Benchmark of streamtable against other Python stream processors (``python -m bench``).

See ``bench/RESULTS.md`` for the latest numbers and ``python -m bench --help`` for options.
"""
