"""The processes a Spark query runs in, and what streamtable changes about them: the
SparkSession and its driver JVM (``session.py``: settings, logging with ``log4j2.properties``,
the class archive that ``jvm_archive.py`` finds and ``jvm_training.py`` makes), what a query's
start does besides starting it (``startup.py``), and the Python workers Spark starts (their
daemon, ``daemon.py``, and the ``sitecustomize`` in ``worker_site/``).

The query (``runtime/spark/app.py``) uses these modules; none of them imports it, except the
training run, which runs a real application to load what a query loads.
"""
