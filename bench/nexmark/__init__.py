"""Nexmark on streamtable: a seeded event generator (``generator.py``) writing persons,
auctions and bids into Kafka (``events.py``, the format in ``README.md``), the queries in
streamtable's DSL (``queries/``), a plain-Python reference of every query's result
(``reference.py``) and the runner, ``python -m bench.nexmark``.
"""
