"""Names a package exports but imports only when first used (PEP 562's module ``__getattr__``):
Spark's Python processes that only unpickle a stage or the Kafka source then do not pay for the
DSL, the driver side or PySpark.

>>> namespace = {"__name__": "demo"}
>>> getattr_, dir_ = lazy_exports(namespace, {"sqrt": "math"})
>>> getattr_("sqrt")(9.0), "sqrt" in namespace, dir_()
(3.0, True, ['__name__', 'sqrt'])
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(namespace: dict[str, Any], exports: Mapping[str, str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the module whose ``globals()`` is ``namespace``,
    exporting each name of ``exports`` (name -> the module defining it) from its first use."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later uses find it without this call
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
