"""How the driver's Python objects reach Spark's workers: pickled with PySpark's cloudpickle,
which pickles by value what a worker cannot import (functions of an application file loaded by
path, lambdas), by reference everything else.

>>> import pickle
>>> pickle.loads(dumps(lambda x: x + 1))(1)     # a lambda, by value: any worker can load it
2
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from pyspark import cloudpickle


def ship_by_value(module: ModuleType) -> None:
    """Pickle ``module``'s functions and classes by value from now on: for a module Spark's
    workers cannot import, such as an application file loaded by path."""
    cloudpickle.register_pickle_by_value(module)


def dumps(obj: Any) -> bytes:
    """``obj`` pickled for Spark's workers (a topology: the stages unpickle it)."""
    return cloudpickle.dumps(obj)
