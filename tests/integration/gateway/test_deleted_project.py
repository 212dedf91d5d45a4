"""Caches along the chat path (the gateway's passed ownership checks, the executor's resolved
agents) never let a chat reach a project deleted a moment ago."""

from __future__ import annotations

import openai
import pytest
from openai import AsyncOpenAI

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Api


async def test_a_deleted_project_refuses_chats_at_once(mesh: Mesh, api: Api) -> None:
    agent = await api.agent(mock_responses=["still here"])
    client = AsyncOpenAI(base_url=f"{mesh.gateway.http.url}/v1", api_key=agent.owner.token, max_retries=0)
    question = [{"role": "user", "content": "Are you there?"}]
    answer = await client.chat.completions.create(model=agent.model, messages=question)
    assert answer.choices[0].message.content == "still here"

    deleted = await api.http.delete(f"/api/v1/projects/{agent.project_id}", headers=agent.owner.headers)
    assert deleted.status_code in (200, 204), deleted.text

    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(model=agent.model, messages=question)
    listed = await api.http.get(f"/api/v1/projects/{agent.project_id}/agents", headers=agent.owner.headers)
    assert listed.status_code == 404
