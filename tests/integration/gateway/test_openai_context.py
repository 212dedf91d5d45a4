"""What an OpenAI client's messages mean, through the official `openai` client: without a session
id the request carries its own history (the system message and earlier turns are the run's
context, and stay the beginning of the session it creates); with one, the session's log is the
context and the request's earlier messages are not replayed."""

from __future__ import annotations

import uuid

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Api
from tests.integration.gateway.test_openai import root_client

ECHO = {"echo_prompt": True}  # the mock model answers with what it was given
CONVERSATION = [
    {"role": "system", "content": "Answer in French."},
    {"role": "user", "content": "My name is Ada."},
    {"role": "assistant", "content": "Bonjour Ada."},
    {"role": "user", "content": "What is my name?"},
]
SEEN = "system: Answer in French.\nuser: My name is Ada.\nassistant: Bonjour Ada.\nuser: What is my name?"


async def test_a_stateless_request_carries_its_history(mesh: Mesh, api: Api) -> None:
    agent = await api.agent(mock_responses=[ECHO])
    client = root_client(mesh, agent.owner.token)

    raw = await client.chat.completions.with_raw_response.create(model=agent.model, messages=CONVERSATION)
    assert raw.parse().choices[0].message.content == SEEN

    # The session it created begins with that conversation: continued by id, the new message is
    # all a client sends.
    session = raw.headers["X-Session-Id"]
    again = await client.chat.completions.create(
        model=agent.model,
        messages=[{"role": "user", "content": "Again?"}],
        extra_headers={"X-Session-Id": session},
    )
    assert again.choices[0].message.content == f"{SEEN}\nassistant: {SEEN}\nuser: Again?"


async def test_in_a_named_session_the_log_is_the_context(mesh: Mesh, api: Api) -> None:
    agent = await api.agent(mock_responses=[ECHO])
    client = root_client(mesh, agent.owner.token)
    session = {"X-Session-Id": uuid.uuid4().hex}

    first = await client.chat.completions.create(
        model=agent.model, messages=CONVERSATION, extra_headers=session
    )
    assert first.choices[0].message.content == "user: What is my name?"
    streamed = await client.chat.completions.create(
        model=agent.model,
        messages=[*CONVERSATION, {"role": "user", "content": "Sure?"}],
        extra_headers=session,
        stream=True,
    )
    said = "".join([c.choices[0].delta.content or "" async for c in streamed if c.choices])
    assert said == "user: What is my name?\nassistant: user: What is my name?\nuser: Sure?"
