"""Run at the start of every Python process Spark starts for streamtable (the session puts this
directory on their PYTHONPATH): import pyspark and py4j from the installed packages, with their
bytecode cache, rather than from the ``pyspark.zip`` Spark puts first on the path, which Python
compiles anew in every process (about 0.75 s per process here); and without the Spark jar it puts
on the path too, which holds no Python code, but whose ~6,000 entries Python's import system reads
and searches in every process (~0.1-0.2 s per process measured).

Only when the zip is the installed package's own (``SPARK_HOME`` is the pip-installed
``pyspark``): the code is then the same. A ``sitecustomize`` further down the path still runs.

Also: a process whose connection to the JVM is gone (the JVM stopped first, at the end of a
run) ends with exit code 1 but without a traceback on the application's console — the JVM has
the story, and a stop must not look like a crash.
"""

import os
import sys


def _prefer_installed_pyspark() -> None:
    zips = [p for p in sys.path if os.path.basename(p) == "pyspark.zip"
            or (os.path.basename(p).startswith("py4j-") and p.endswith("-src.zip"))]
    if not zips:
        return
    for entry in sys.path:
        if entry in zips or not entry:
            continue
        package = os.path.join(entry, "pyspark")
        if os.path.isfile(os.path.join(package, "__init__.py")):
            if any(os.path.dirname(z) == os.path.join(package, "python", "lib") for z in zips):
                jars = os.path.join(package, "jars")
                sys.path[:] = [p for p in sys.path if p not in zips
                               and not (p.endswith(".jar") and os.path.dirname(p) == jars)] + zips
            return


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    module = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401  (another one, if any)
    except ImportError:
        pass
    finally:
        sys.path[:] = saved
        if module is not None:
            sys.modules["sitecustomize"] = module


_GONE = (BrokenPipeError, ConnectionResetError, EOFError)


def _quiet_when_the_jvm_is_gone() -> None:
    import traceback

    default = sys.excepthook

    def hook(kind, value, tb):  # type: ignore[no-untyped-def]
        if issubclass(kind, _GONE):
            return  # the interpreter still exits with code 1
        default(kind, value, tb)

    sys.excepthook = hook
    # PySpark's daemon prints a forked worker's exception itself, then exits with code 1
    print_exc = traceback.print_exc

    def quiet_print_exc(*args, **kwargs):  # type: ignore[no-untyped-def]
        kind = sys.exc_info()[0]
        if kind is not None and issubclass(kind, _GONE):
            return
        print_exc(*args, **kwargs)

    traceback.print_exc = quiet_print_exc


_prefer_installed_pyspark()
_quiet_when_the_jvm_is_gone()
_chain()
