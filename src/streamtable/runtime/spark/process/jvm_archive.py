"""A class-data archive of Spark's JVM (Java's AppCDS): the classes a streamtable query loads,
parsed and verified once, then mapped by every later JVM instead of loaded from the jars.

A cold Spark JVM spends most of its first seconds loading and verifying some 15,000 classes.
With the archive, measured on a 2-core machine: a session starts in ~3.1 s instead of ~5.5 s,
and its first jobs take ~2.4 s instead of ~4.1 s. Nothing else changes: a JVM that finds the
archive missing, or made for another Java or Spark, loads its classes from the jars as before.

The archive is one file per (Java, Spark) pair under ``$STREAMTABLE_CACHE_DIR`` (default
``~/.cache/streamtable``). This module finds it for the session (see ``session.py``);
``streamtable jvm-archive`` (and ``make install``) makes it with a training run (see
``jvm_training.py``).

A ``SPARK_CONF_DIR`` of another directory than pyspark's own ``conf`` goes without the archive:
Spark puts that directory first on the driver's class path, and Java maps an archive only under
the class path it was made with, and makes none with a directory holding files on it.

>>> option = java_option()   # '' until the archive exists
>>> option == '' or option.startswith('-XX:SharedArchiveFile=')
True
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

DISABLE_ENV = "STREAMTABLE_JVM_ARCHIVE"  # "0": never use the archive
CACHE_ENV = "STREAMTABLE_CACHE_DIR"
# a JVM that cannot use the archive says so on stderr: it runs as without one, quietly
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.exists():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found is not None else None


def _fingerprint(path: Path) -> str:
    st = path.stat()
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def archive_path() -> Path | None:
    """Where the archive for this Java and this Spark is (None without a Java)."""
    java = _java()
    if java is None:
        return None
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    parts = [_fingerprint(java), pyspark.__version__]
    base = java.parent.parent / "lib" / "server" / "classes.jsa"
    if base.exists():  # the JDK's own archive, which a dynamic archive extends
        parts.append(_fingerprint(base))
    if jars.is_dir():
        parts += sorted(p.name for p in jars.iterdir())
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    cache = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "streamtable")
    return cache / f"spark-classes-{pyspark.__version__}-{key}.jsa"


def conf_dir_in_the_way() -> str | None:
    """``SPARK_CONF_DIR`` when it names another directory than pyspark's own ``conf``, where
    no archive can be mapped (see the module's doc); else None."""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not conf_dir:
        return None
    import pyspark

    own = Path(pyspark.__file__).resolve().parent / "conf"
    return None if Path(conf_dir).resolve() == own else conf_dir


def java_option() -> str:
    """The driver's JVM option that maps the archive, or '' when there is none (or
    ``STREAMTABLE_JVM_ARCHIVE=0``, or a ``SPARK_CONF_DIR`` in the way)."""
    if os.environ.get(DISABLE_ENV, "1") == "0" or conf_dir_in_the_way() is not None:
        return ""
    path = archive_path()
    if path is None or not path.exists():
        return ""
    return f"-XX:SharedArchiveFile={path} {_QUIET}"
