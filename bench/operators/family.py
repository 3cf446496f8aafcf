"""What an operator family is: a topology, its seeded input, a plain-Python reference of its
result, and how its output topic is read for the check.

A family's output is read in one of two ways, both independent of how the input was cut into
micro-batches:

* ``table``: the last value per key, a tombstone removing the key (a final table, or the final
  value of every window);
* ``multiset``: every record the topology emitted, counted, so a missing, extra or duplicated
  result shows (join results, suppressed final windows, deduplicated records).

>>> from collections import Counter
>>> class Echo(Family):
...     kind = "multiset"
>>> Echo().result([(b'"a"', b'[1,2]'), (b'"a"', b'[1,2]'), (b'"~end-in-0"', b'1')])
Counter({('a', (1, 2)): 2})
>>> Echo.kind = "table"
>>> Echo().result([(b'"a"', b'1'), (b'"b"', b'2'), (b'"a"', None)])
{'b': 2}
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from bench.operators.inputs import END_PREFIX, Input

Raw = tuple[bytes | None, bytes | None]


def frozen(value: Any) -> Any:
    """A hashable copy of decoded JSON: lists become tuples, objects sorted item tuples."""
    if isinstance(value, list):
        return tuple(frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, frozen(v)) for k, v in value.items()))
    return value


class Family:
    """Base of the operator families (see the module docstring)."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    #: what the check compares, in one line (for the report)
    check: ClassVar[str] = ""
    kind: ClassVar[str] = "table"

    @property
    def settings(self) -> dict[str, Any]:
        """StreamsApp and test driver settings on top of the defaults (none)."""
        return {}

    def topology(self, topics: Mapping[str, str], output: str) -> Any:
        """The family's topology, reading the input roles' topics, writing ``output``."""
        raise NotImplementedError

    def generate(self, records: int, seed: int) -> Input:
        """About ``records`` input records over all roles, seeded."""
        raise NotImplementedError

    def reference(self, inp: Input) -> dict[Any, Any]:
        """The expected :meth:`result`, computed in plain Python from the input."""
        raise NotImplementedError

    def decode(self, key: bytes | None, value: bytes | None) -> tuple[Any, Any]:
        return (None if key is None else frozen(json.loads(key)),
                None if value is None else frozen(json.loads(value)))

    def result(self, records: Iterable[Raw]) -> dict[Any, Any]:
        """The output topic's records (in topic order) as the check compares them."""
        if self.kind == "multiset":
            counts: Counter[Any] = Counter()
            for k, v in records:
                pair = self.decode(k, v)
                if not _is_end(pair[0]):
                    counts[pair] += 1
            return counts
        table: dict[Any, Any] = {}
        for k, v in records:
            key, value = self.decode(k, v)
            if _is_end(key):
                continue
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
        return table


def _is_end(key: Any) -> bool:
    return isinstance(key, str) and key.startswith(END_PREFIX)
