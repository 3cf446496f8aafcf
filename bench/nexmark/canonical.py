"""The canonical JSON the checker compares keys and values in: sorted object keys, lists for
tuples, non-integer numbers rounded to 3 decimals (an integral result is an integer), compact
separators, ASCII: by definition ``json.dumps(_normal(obj), sort_keys=True,
separators=(",", ":"))``.

The checker makes millions of these (every record of an output, on both sides), so the common
case takes a fast path to the same text. A value of plain dicts, lists and tuples of ints,
strings, booleans, None and finite floats below 2**63 is rounded by a walk over its floats only
(none, in most of Nexmark's outputs) and written by orjson: its sorted compact JSON is
``json.dumps``'s for such a value (a rounded float is written the same shortest way, without an
exponent) when the text is ASCII without DEL (which ``json.dumps`` escapes). Anything else (a
subclass, NaN, a 65-bit integer, a key not a string, non-ASCII text) takes the definition.
Reading a JSON text, orjson is used the same way, and ``json.loads`` where it would differ.

>>> canonical({"b": 1.0, "a": (2, 0.90800000001)}), canonical({"b": [1, None], "a": "x"})
('{"a":[2,0.908],"b":1}', '{"a":"x","b":[1,null]}')
>>> canonical_json(b'{"b": 1.0, "a": [2, 0.90800000001]}'), canonical_json(None)
('{"a":[2,0.908],"b":1}', 'null')
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

import orjson

_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode
_SORTED = orjson.OPT_SORT_KEYS
_SCALARS = frozenset((int, str, bool, type(None)))
#: orjson reads an integer outside 64 bits as a float: a float this large may have been one
_BIG = 2.0**63


def _normal(obj: Any) -> Any:
    if isinstance(obj, float):
        r = round(obj, 3)
        return int(r) if r == int(r) else r
    if isinstance(obj, (list, tuple)):
        return [_normal(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _normal(v) for k, v in obj.items()}
    return obj


class _NotPlain(Exception):
    """A value the fast path does not take."""


def _floatless(obj: Any) -> bool:
    """Whether ``obj`` is plain dicts, lists and tuples of ints, strings, booleans and None
    (a dict's keys aside): :func:`_normal` would change nothing of its JSON.

    >>> _floatless({"a": [1, "x", (None, True)]}), _floatless({"a": [1, 2.0]})
    (True, False)
    """
    kind = type(obj)
    if kind is dict:
        items: Iterable[Any] = obj.values()
    elif kind is list or kind is tuple:
        items = obj
    else:
        return kind in _SCALARS
    return _SCALARS.issuperset(map(type, items)) or all(map(_floatless, items))


def _rounded(obj: Any) -> Any:
    """:func:`_normal` of a plain value (:func:`_floatless` but for floats, which must be
    finite and below :data:`_BIG`), else :class:`_NotPlain`.

    >>> _rounded({"a": [1, 0.90800000001, (2.0,)]})
    {'a': [1, 0.908, [2]]}
    """
    kind = type(obj)
    if kind is dict:
        return {k: v if type(v) in _SCALARS else _rounded(v) for k, v in obj.items()}
    if kind is list or kind is tuple:
        return [v if type(v) in _SCALARS else _rounded(v) for v in obj]
    if kind is float:
        if not (math.isfinite(obj) and -_BIG < obj < _BIG):
            raise _NotPlain
        r = round(obj, 3)
        return int(r) if r == int(r) else r
    if kind in _SCALARS:
        return obj
    raise _NotPlain


def _written(plain: Any) -> str | None:
    """orjson's text of a rounded plain value, or None where it is not ``json.dumps``'s."""
    try:
        text = orjson.dumps(plain, option=_SORTED).decode()
    except orjson.JSONEncodeError:  # a 65-bit integer, a key not a string
        return None
    return text if text.isascii() and "\x7f" not in text else None


def canonical(obj: Any) -> str:
    """Canonical JSON of a key or value."""
    try:
        text = _written(obj if _floatless(obj) else _rounded(obj))
    except _NotPlain:
        text = None
    return _ENCODE(_normal(obj)) if text is None else text


def _parse_float(text: str) -> Any:
    return _normal(float(text))


def _read(data: bytes | str) -> tuple[Any, bool]:
    """``(decoded, whether it is plain)``: see :func:`decode`."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:  # what json.loads takes beyond JSON (NaN, a BOM, ...)
        pass
    else:
        if _floatless(obj):
            return obj, True
        try:
            return _rounded(obj), True
        except _NotPlain:
            pass
    return json.loads(data, parse_float=_parse_float), False


def decode(data: bytes | str | None) -> Any:
    """The JSON text ``data`` decoded (None for None), its non-integer numbers rounded as
    :func:`canonical` rounds them: ``canonical(decode(d)) == canonical(json.loads(d))``.

    >>> decode(b'{"p":0.90800000001,"q":2.0,"r":[1]}'), decode(None)
    ({'p': 0.908, 'q': 2, 'r': [1]}, None)
    """
    return None if data is None else _read(data)[0]


def canonical_json(data: bytes | None) -> str:
    """:func:`canonical` of what the JSON text ``data`` holds (``null`` for None)."""
    if data is None:
        return "null"
    obj, plain = _read(data)
    text = _written(obj) if plain else None
    return canonical(obj) if text is None else text
