"""The driver's JVM, launched as PySpark would, with its stderr passed on without the one line
every start prints and no user can act on.

Spark's launcher puts ``--add-modules=jdk.incubator.vector`` on every JVM's command line (its
``JavaModuleOptions``, whatever the settings), so Java prints ``WARNING: Using incubator modules:
jdk.incubator.vector`` at each start. No JVM option turns that line off; the JVM's stderr is a
pipe here instead, and a thread copies every other line to this process's stderr as it comes
(Spark's one line per error, the Python workers' output).

>>> start_gateway(spark_conf)                                       # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from typing import IO, Any

log = logging.getLogger(__name__)

#: what the JVM writes at every start because of Spark's launcher (see the module docstring)
JVM_START_NOISE = (b"WARNING: Using incubator modules: jdk.incubator.vector",)


def start_gateway(conf: Any) -> None:
    """Launch the driver's JVM with ``conf`` (a ``SparkConf``: the Java options must be known
    at launch) and make it the gateway the next SparkContext uses; nothing when a gateway is
    there already (or PySpark was handed one by ``spark-submit``)."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.stderr is not None:
        threading.Thread(target=copy_stderr, args=(proc.stderr,), daemon=True,
                         name="streamtable-jvm-stderr").start()
    with SparkContext._lock:
        if SparkContext._gateway is None:
            SparkContext._gateway = gateway
            SparkContext._jvm = gateway.jvm


def copy_stderr(source: IO[bytes], target_fd: int = 2) -> None:
    """Copy ``source`` line by line to ``target_fd`` (this process's stderr, where the JVM
    would have written), leaving out :data:`JVM_START_NOISE`."""
    for line in iter(source.readline, b""):
        if line.rstrip(b"\r\n") in JVM_START_NOISE:
            continue
        view = memoryview(line)
        while view:
            try:
                view = view[os.write(target_fd, view):]
            except OSError:  # stderr closed: the JVM's output has nowhere to go
                return
