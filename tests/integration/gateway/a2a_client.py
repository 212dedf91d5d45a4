"""The official a2a-sdk client against the gateway, on one binding: built from the agent's own
card (fetched with the owner's token), authenticated through the card's bearer scheme."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import httpx
from a2a.client import (
    AuthInterceptor,
    Client,
    ClientCallContext,
    ClientConfig,
    ClientFactory,
    CredentialService,
)
from a2a.types import a2a_pb2
from google.protobuf.json_format import ParseDict

from tests.integration.gateway.support import Agent, Api

BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]


class BearerToken(CredentialService):
    """The owner's access token, for every scheme the card asks for."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def get_credentials(
        self, security_scheme_name: str, context: ClientCallContext | None
    ) -> str | None:
        return self._token


async def fetch_card(http: httpx.AsyncClient, agent: Agent, *, base_url: str = "") -> a2a_pb2.AgentCard:
    response = await http.get(
        f"{base_url}{agent.base}/.well-known/agent-card.json", headers=agent.owner.headers
    )
    assert response.status_code == 200, response.text
    return ParseDict(response.json(), a2a_pb2.AgentCard(), ignore_unknown_fields=True)


@asynccontextmanager
async def a2a_client(
    card: a2a_pb2.AgentCard, binding: str, token: str, *, streaming: bool = True, polling: bool = False
) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(timeout=60) as http:
        config = ClientConfig(
            streaming=streaming,
            polling=polling,
            httpx_client=http,
            grpc_channel_factory=grpc.aio.insecure_channel,
            supported_protocol_bindings=[binding],
        )
        client = ClientFactory(config).create(card, interceptors=[AuthInterceptor(BearerToken(token))])
        try:
            yield client
        finally:
            await client.close()


@asynccontextmanager
async def agent_client(
    api: Api, http: httpx.AsyncClient, binding: str, *, answers: list[Any], streaming: bool = False
) -> AsyncIterator[tuple[Agent, Client]]:
    """A new agent answering `answers`, and its owner's client on one binding."""
    agent = await api.agent(mock_responses=answers)
    card = await fetch_card(http, agent)
    async with a2a_client(card, binding, agent.owner.token, streaming=streaming) as client:
        yield agent, client


def text_message(text: str, **fields: Any) -> a2a_pb2.Message:
    return a2a_pb2.Message(
        message_id=fields.pop("message_id", "m-" + text[:8]),
        role=a2a_pb2.Role.ROLE_USER,
        parts=[a2a_pb2.Part(text=text)],
        **fields,
    )


def send_request(text: str, **configuration: Any) -> a2a_pb2.SendMessageRequest:
    return a2a_pb2.SendMessageRequest(
        message=text_message(text), configuration=a2a_pb2.SendMessageConfiguration(**configuration)
    )
