"""The shape a run's answer must have (OpenAI's response_format): what the model is told, and which
answers pass."""

from __future__ import annotations

import json

import pytest

from agentmesh.executor.errors import AnswerNotInFormat
from agentmesh.executor.run import answer_format
from agentmesh.internal.executor.v1.executor_service_pb2 import ResponseFormat

TRIP = ResponseFormat(
    type="json_schema",
    name="trip",
    schema_json=json.dumps(
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    ),
)


def test_the_model_is_told_the_format_and_its_schema() -> None:
    assert answer_format.instruction(ResponseFormat()) == []
    [told] = answer_format.instruction(ResponseFormat(type="json_object"))
    assert told.role == "system" and "JSON object" in told.content
    [told] = answer_format.instruction(TRIP)
    assert '"trip"' in told.content and '"required": ["city"]' in told.content


def test_an_answer_of_the_requested_shape_passes() -> None:
    answer_format.check(ResponseFormat(), "any text at all")
    answer_format.check(ResponseFormat(type="json_object"), '{"a": 1}')
    answer_format.check(TRIP, '{"city": "Lisbon"}')


@pytest.mark.parametrize(
    ("shape", "answer", "said"),
    [
        (ResponseFormat(type="json_object"), "Lisbon", "not JSON"),
        (ResponseFormat(type="json_object"), "[1, 2]", "not an object"),
        (TRIP, '{"city": 3}', "at city"),
        (TRIP, "{}", "'city' is a required property"),
    ],
)
def test_any_other_answer_fails_the_run(shape: ResponseFormat, answer: str, said: str) -> None:
    with pytest.raises(AnswerNotInFormat) as failed:
        answer_format.check(shape, answer)
    assert said in failed.value.message
    assert failed.value.reason == "ANSWER_NOT_IN_FORMAT"


def test_a_schema_that_refers_outside_itself_is_not_fetched() -> None:
    # jsonschema would fetch a remote `$ref`: an address the client chose, from inside the mesh.
    remote = ResponseFormat(
        type="json_schema", schema_json=json.dumps({"$ref": "http://169.254.169.254/latest/meta-data"})
    )
    with pytest.raises(AnswerNotInFormat) as failed:
        answer_format.check(remote, "{}")
    assert "refers outside itself" in failed.value.message
    local = {"$defs": {"city": {"type": "string"}}, "properties": {"city": {"$ref": "#/$defs/city"}}}
    answer_format.check(ResponseFormat(type="json_schema", schema_json=json.dumps(local)), '{"city": "Oslo"}')
