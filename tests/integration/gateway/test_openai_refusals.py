"""What an agent cannot honour of an OpenAI chat completion request is refused as OpenAI refuses
it — 400, `invalid_request_error`, `param` naming the field — through the official `openai`
client, never dropped with a 200; what it honours or may ignore is answered."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Api
from tests.integration.gateway.test_openai import root_client

HI = [{"role": "user", "content": "hi"}]

REFUSED: list[tuple[dict[str, Any], str, str]] = [
    ({"n": 2}, "n", "unsupported_parameter"),
    ({"n": 0}, "n", "invalid_value"),
    ({"tool_choice": "banana"}, "tool_choice", "invalid_value"),
    ({"tool_choice": {"type": "banana"}}, "tool_choice", "invalid_value"),
    ({"tools": [{"type": "file_search"}]}, "tools[0].type", "unsupported_parameter"),
    ({"response_format": {"type": "yaml"}}, "response_format.type", "invalid_value"),
    ({"logprobs": True}, "logprobs", "unsupported_parameter"),
    ({"top_logprobs": 2}, "top_logprobs", "unsupported_parameter"),
    ({"stop": ["\n"]}, "stop", "unsupported_parameter"),
    ({"logit_bias": {"50256": -100}}, "logit_bias", "unsupported_parameter"),
    ({"modalities": ["text", "audio"]}, "modalities", "unsupported_parameter"),
    (
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
        "messages[0].content[0].type",
        "unsupported_parameter",
    ),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role", "invalid_value"),
]


@pytest.mark.parametrize(
    ("fields", "param", "code"), REFUSED, ids=[case[1] + "-" + case[2] for case in REFUSED]
)
async def test_what_cannot_be_honoured_is_a_400_naming_the_field(
    mesh: Mesh, api: Api, once: None, fields: dict[str, Any], param: str, code: str
) -> None:
    agent = await api.agent(mock_responses=["never said"])
    client = root_client(mesh, agent.owner.token)
    body = {"messages": HI, **fields}
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model=agent.model, messages=body.pop("messages"), extra_body=body
        )
    assert refused.value.status_code == 400
    assert refused.value.type == "invalid_request_error"
    assert refused.value.param == param
    assert refused.value.code == code
    events = await api.http.get(f"/api/v1/projects/{agent.project_id}/sessions", headers=agent.owner.headers)
    assert events.json()["data"] == []  # nothing ran


async def test_what_is_honoured_or_only_tunes_is_answered(mesh: Mesh, api: Api, once: None) -> None:
    agent = await api.agent(mock_responses=["answered"])
    completion = await root_client(mesh, agent.owner.token).chat.completions.create(
        model=agent.model,
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        n=1,
        tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        tool_choice="none",
        response_format={"type": "text"},
        seed=7,
        top_p=0.5,
        presence_penalty=0.1,
        user="someone",
        metadata={"k": "v"},
        modalities=["text"],
        logprobs=False,
        stop=None,
    )
    assert completion.choices[0].message.content == "answered"
