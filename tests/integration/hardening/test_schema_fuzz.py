"""Property-based fuzzing of every route in the OpenAPI document: no input answers 5xx.

Schemathesis generates requests from ``/api/openapi`` (path and query parameters,
headers and bodies) against the app on each backend pair, with one model pushed; path
parameters are sometimes swapped for that model's real name, hash, version or self test,
so the fuzz reaches the handlers' work and not only their validation. Examples are
bounded and derandomized (about half a minute per backend pair). Range headers, which the
schema does not describe, are fuzzed on their own.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry.app import create_app
from registry.services.ingest import ingest_file
from tests.conftest import fixture_carton

FUZZ = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def real_values(manifest: str, model: str) -> dict[str, list[Any]]:
    """Path parameter -> values naming what the registry holds."""
    return {
        "name": [model],
        "sha256": [manifest],
        "version": ["1"],
        "index": [0, 1],
        "tag": ["latest"],
        "file": [f"{manifest}.carton", "1.carton", "latest.carton"],
    }


def test_no_generated_request_answers_a_5xx(registry_ctx):
    pushed = ingest_file(registry_ctx, fixture_carton("02"))
    known = real_values(pushed.manifest_sha256, pushed.model_name)
    app = create_app(ctx=registry_ctx)
    schema = schemathesis.openapi.from_asgi("/api/openapi/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 40
    for operation in operations:

        @FUZZ
        @given(case=operation.as_strategy(), data=st.data())
        def no_5xx(case: schemathesis.Case, data: st.DataObject) -> None:
            for key, generated in (case.path_parameters or {}).items():
                choices = [generated, *known.get(key, [])]
                case.path_parameters[key] = data.draw(st.sampled_from(choices))
            response = case.call()
            assert response.status_code < 500, (
                f"{case.method} {case.formatted_path} {case.query or ''} -> "
                f"{response.status_code}: {response.text[:500]}"
            )

        no_5xx()
