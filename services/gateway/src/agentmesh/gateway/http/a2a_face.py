"""What the A2A HTTP routes work with, built once by the composition root: the task core, the
request handler, the public endpoints, the published agents and the SDK's dispatchers over the
handler, whose call context carries the caller and agent the route resolved."""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.routes.rest_dispatcher import RestDispatcher
from fastapi import Request

from agentmesh.gateway.a2a.card import A2AEndpoints
from agentmesh.gateway.a2a.handler import AGENT, BASE_URL, CALLER, REQUESTED_STATUS, MeshRequestHandler
from agentmesh.gateway.a2a.published import PublishedAgents
from agentmesh.gateway.a2a.tasks import A2ATasks


class _AgentCallContext(DefaultServerCallContextBuilder):
    """The SDK's call context (headers, extensions) plus the caller and agent the route resolved
    and the ListTasks `status` as the client wrote it."""

    def build(self, request: Request) -> ServerCallContext:
        built = super().build(request)
        built.state[CALLER] = request.state.a2a_caller
        built.state[AGENT] = request.state.a2a_agent
        built.state[BASE_URL] = request.state.a2a_base_url
        built.state[REQUESTED_STATUS] = request.state.a2a_requested_status
        return built


class A2AFace:
    """What the A2A HTTP routes work with: the task core, the request handler, the public
    endpoints, the published agents (public cards and the discovery index), and the SDK's
    dispatchers over the handler. Built by the composition root."""

    def __init__(
        self,
        tasks: A2ATasks,
        handler: MeshRequestHandler,
        endpoints: A2AEndpoints,
        published: PublishedAgents,
    ) -> None:
        self.tasks = tasks
        self.handler = handler
        self.endpoints = endpoints
        self.published = published
        builder = _AgentCallContext()
        self.jsonrpc = JsonRpcDispatcher(request_handler=handler, context_builder=builder)
        self.rest = RestDispatcher(request_handler=handler, context_builder=builder)
