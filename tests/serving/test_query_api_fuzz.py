"""The HTTP query API fuzzed against its own OpenAPI schema: no 500 for any input, and every
response as the schema says."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402

from streamtable.serving import SqliteServingStore  # noqa: E402
from streamtable.serving.codec import encode_key, encode_value  # noqa: E402
from streamtable.serving.http import create_query_api  # noqa: E402


def _api(tmp_path_factory: pytest.TempPathFactory):
    serving = SqliteServingStore(tmp_path_factory.mktemp("fuzz") / "serving.db")
    # keys of mixed types, as a store may hold: ranges over them must not fail
    rows = {"s": 1, 7: {"x": [1, 2]}, ("t", 1): {3, 1}, 2.5: None, "ünï": "v"}
    serving.apply(0, [("counts", encode_key(k), encode_value((v if v is not None else 0, 1)), 0)
                      for k, v in rows.items()])
    views = {"counts": serving.view("counts"), "empty": serving.view("empty")}
    return create_query_api(views)


def test_no_input_makes_the_query_api_fail(tmp_path_factory):
    from hypothesis import given

    schema = schemathesis.openapi.from_asgi("/openapi.json", _api(tmp_path_factory))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {"/stores", "/stores/{store}", "/stores/{store}/keys/{key}"} <= {
        op.path for op in operations}
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=50, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
        def fuzz(case):
            response = case.call()
            assert response.status_code < 500, (case.path, case.path_parameters, case.query,
                                                 response.text[:500])
            case.validate_response(response)

        fuzz()
