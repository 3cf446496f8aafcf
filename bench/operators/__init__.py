"""The operator suite: streamtable on the Spark runtime, one topology per operator family of
the DSL, each run measured and its result checked.

    python -m bench.operators                                   # every family, 1,000,000 records
    python -m bench.operators --records 20000 --family tumbling,ss-outer
    python -m bench.operators --records 1000000,10000000 --out bench/RESULTS.md

Families (``families.py``): windowed aggregations (``windows.py``), joins (``joins.py``), a
Processor-API deduplication (``processors.py``) and the main benchmark's W1 and W2
(``classic.py``). ``suite.py`` runs them (``app.py`` is the measured process), ``check.py``
computes the expected results, ``report.py`` writes the Markdown.
"""
