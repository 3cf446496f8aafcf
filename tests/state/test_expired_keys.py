"""A restore's expiry scan (``expired_keys``) deletes exactly the keys its definition names:
tuples ``(first, second, *ints)`` whose elements after the first are 64-bit ints, with
``second <= up_to``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamtable.state.stores import (
    EXPIRED_UP_TO,
    InMemoryKeyValueStore,
    all_int64,
    expired_by,
    expired_keys,
)


def expired(key, up_to):
    """The definition, one key at a time."""
    return (type(key) is tuple and len(key) > 1 and type(key[1]) is int and key[1] <= up_to
            and all_int64(key[1:]))


_element = st.one_of(st.integers(-2**64, 2**64), st.booleans(), st.none(), st.text(max_size=2),
                     st.floats(allow_nan=False))
_key = st.one_of(st.tuples(st.text(max_size=2), st.integers(0, 40), st.integers(0, 5)),
                 st.lists(_element, max_size=5).map(tuple), _element)


@settings(max_examples=300, deadline=None)
@given(st.lists(_key, max_size=40), st.integers(-2**64, 2**64))
def test_the_scan_and_the_check_of_one_key_follow_the_definition(keys, up_to):
    assert expired_keys(keys, up_to) == [k for k in keys if expired(k, up_to)]
    assert [expired_by(k, up_to) for k in keys] == [expired(k, up_to) for k in keys]


def test_a_restored_expiry_deletes_the_expired_records_and_keeps_the_rest():
    store = InMemoryKeyValueStore("w")
    for key in [("k", 5, 0), ("k", 9, 1), ("j", 2, 2), (None,), "plain"]:
        store.put(key, ("v", 0))
    store.restore({EXPIRED_UP_TO: 5, ("k", 3, 3): ("new", 3)})
    assert sorted(map(repr, (k for k, _ in store.items()))) == sorted(
        map(repr, [("k", 9, 1), (None,), "plain", ("k", 3, 3)]))
