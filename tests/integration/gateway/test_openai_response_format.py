"""OpenAI's `response_format` through the official `openai` client: `json_object` and `json_schema`
are passed to the agent's model and its answer is checked — an answer of another shape is an
error, never a 200 with what the client cannot parse; a schema that is not one is a 400."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Api
from tests.integration.gateway.test_openai import root_client

ASK = [{"role": "user", "content": "Plan my trip."}]
TRIP_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "nights": {"type": "integer"}},
    "required": ["city", "nights"],
    "additionalProperties": False,
}
TRIP: dict[str, Any] = {"type": "json_schema", "json_schema": {"name": "trip", "schema": TRIP_SCHEMA}}


async def test_an_answer_of_the_schema_is_answered(mesh: Mesh, api: Api, once: None) -> None:
    agent = await api.agent(mock_responses=['{"city": "Lisbon", "nights": 3}'])
    client = root_client(mesh, agent.owner.token)
    completion = await client.chat.completions.create(model=agent.model, messages=ASK, response_format=TRIP)  # type: ignore[arg-type]
    assert json.loads(completion.choices[0].message.content or "") == {"city": "Lisbon", "nights": 3}
    assert completion.choices[0].finish_reason == "stop"
    plain = await client.chat.completions.create(
        model=agent.model, messages=ASK, response_format={"type": "json_object"}
    )
    assert json.loads(plain.choices[0].message.content or "")["city"] == "Lisbon"


@pytest.mark.parametrize(
    ("answer", "response_format", "said"),
    [
        ("Lisbon, for three nights.", {"type": "json_object"}, "not JSON"),
        ('{"city": "Lisbon", "nights": "three"}', TRIP, "at nights"),
    ],
)
async def test_an_answer_of_another_shape_is_an_error(
    mesh: Mesh, api: Api, once: None, answer: str, response_format: dict[str, Any], said: str
) -> None:
    agent = await api.agent(mock_responses=[answer])
    client = root_client(mesh, agent.owner.token)
    with pytest.raises(openai.InternalServerError) as failed:
        await client.chat.completions.create(model=agent.model, messages=ASK, response_format=response_format)  # type: ignore[arg-type]
    assert said in failed.value.message
    assert failed.value.code == "answer_not_in_format"

    stream = await client.chat.completions.create(
        model=agent.model,
        messages=ASK,
        response_format=response_format,  # type: ignore[arg-type]
        stream=True,
    )
    with pytest.raises(openai.APIError) as broken:
        async for _ in stream:
            pass
    assert said in broken.value.message


@pytest.mark.parametrize(
    ("json_schema", "param"),
    [
        ({"schema": TRIP_SCHEMA}, "response_format.json_schema.name"),
        ({"name": "trip", "schema": {"type": "wizard"}}, "response_format.json_schema.schema"),
        (
            {"name": "trip", "schema": {"properties": {"a": {"$ref": "http://example.test/s.json"}}}},
            "response_format.json_schema.schema",
        ),
    ],
)
async def test_a_schema_that_is_not_one_is_a_400(
    mesh: Mesh, api: Api, once: None, json_schema: dict[str, Any], param: str
) -> None:
    agent = await api.agent(mock_responses=["{}"])
    with pytest.raises(openai.BadRequestError) as refused:
        await root_client(mesh, agent.owner.token).chat.completions.create(
            model=agent.model,
            messages=ASK,
            response_format={"type": "json_schema", "json_schema": json_schema},  # type: ignore[typeddict-item]
        )
    assert refused.value.param == param
