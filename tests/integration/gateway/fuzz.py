"""Schemathesis over the gateway's /openapi.json, as a separate process (so generating requests
does not compete with the gateway under test for the same interpreter).

    python -m tests.integration.gateway.fuzz BASE_URL TOKEN PATH_PARAMETERS_JSON

Every operation is tried with generated valid requests (random path parameters, then the real
ones given, so requests reach existing resources) and generated invalid ones. Prints a JSON
object `{"operations": N, "cases": N, "failures": [...]}` on its last line.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import hypothesis
import requests
import schemathesis
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# Examples per operation and kind: valid requests with random and with real path parameters, and
# invalid ones (which need fewer to reach every kind of invalidity).
RANDOM_EXAMPLES = 8
REAL_EXAMPLES = 8
INVALID_EXAMPLES = 5


def fuzz(base_url: str, token: str, known: dict[str, str]) -> dict[str, Any]:
    # The gateway builds its OpenAPI document on the first request (every route's models): on a
    # loaded machine that takes longer than schemathesis's 10 s default read timeout.
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json", timeout=120)
    session = requests.Session()
    headers = {"Authorization": f"Bearer {token}"}
    failures: list[str] = []
    operations = cases = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        names = {parameter.name for parameter in operation.path_parameters}
        real = {name: value for name, value in known.items() if name in names}
        runs: list[tuple[str, GenerationMode, int, dict[str, str] | None]] = [
            ("valid", GenerationMode.POSITIVE, RANDOM_EXAMPLES, None),
            ("invalid", GenerationMode.NEGATIVE, INVALID_EXAMPLES, None),
        ]
        if real and len(real) == len(names):
            runs.append(("valid, existing resources", GenerationMode.POSITIVE, REAL_EXAMPLES, real))
        for label, mode, examples, path_parameters in runs:

            @hypothesis.settings(
                max_examples=examples,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(hypothesis.HealthCheck),
                phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
            )
            @hypothesis.given(
                case=operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)
            )
            def run(case: schemathesis.Case) -> None:
                nonlocal cases
                cases += 1
                case.call_and_validate(base_url=base_url, session=session, headers=headers, checks=CHECKS)

            try:
                run()
            except hypothesis.errors.Unsatisfiable:
                pass  # no invalid request exists (an operation without parameters)
            except Exception as error:
                failures.append(f"{operation.label} ({label}): {error}")
    return {"operations": operations, "cases": cases, "failures": failures}


if __name__ == "__main__":
    base, token, known = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    print(json.dumps(fuzz(base, token, known)))
