"""The executor's one scrubber of secrets: every known value replaced wherever it appears (the
longest first), in texts, JSON values and protobuf messages; `${env:NAME}` references resolved."""

from __future__ import annotations

import pytest

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.providers.base import ModelError
from agentmesh.executor.providers.secrets import REDACTED, Secrets, UnsetReference, resolve_references


def test_known_values_are_scrubbed_longest_first_and_short_ones_are_left() -> None:
    secrets = Secrets()
    assert secrets.scrub("nothing known yet") == "nothing known yet"
    secrets.add("token-123456", "token-123456-extended", "1")
    assert secrets.scrub("a token-123456-extended and token-123456, 1") == f"a {REDACTED} and {REDACTED}, 1"
    assert "1" not in secrets  # too short to be a secret worth scrubbing


def test_json_values_messages_and_errors_are_scrubbed() -> None:
    secrets = Secrets()
    secrets.add("sk-very-secret")
    assert secrets.scrub_value({"a": ["x sk-very-secret"], "n": 3}) == {"a": [f"x {REDACTED}"], "n": 3}
    event = run_pb2.RunEvent(
        agent="a",
        tool_result=run_pb2.ToolResult(name="t", output="echo sk-very-secret"),
        delegation_path=["sk-very-secret"],
    )
    secrets.scrub_message(event)
    assert event.tool_result.output == f"echo {REDACTED}" and list(event.delegation_path) == [REDACTED]
    error = secrets.scrubbed_error(ModelError("endpoint said sk-very-secret", retryable=True))
    assert str(error) == f"endpoint said {REDACTED}" and error.retryable


def test_references_are_read_from_the_environment() -> None:
    environment = {"KB_TOKEN": "t0ken"}
    assert resolve_references({"Authorization": "Bearer ${env:KB_TOKEN}", "plain": "x"}, environment) == {
        "Authorization": "Bearer t0ken",
        "plain": "x",
    }
    with pytest.raises(UnsetReference, match=r"\$\{env:NOPE\} is not set"):
        resolve_references({"a": "${env:NOPE}"}, environment)
