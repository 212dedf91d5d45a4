"""The gateway's authorization policy: for every RPC it serves and every HTTP route, who may call it.

This table is the single place that decides access at the edge. `access.AccessGuard` enforces it
for gRPC (an interceptor, before any servicer or forwarder runs) and for HTTP (a dependency of
every route). An operation without an entry is refused, never served by default, and a test
enumerates every registered RPC and route against it.

The services behind the gateway check again, acting as the caller (the registry answers NOT_FOUND
for projects the caller may not see): the gateway's check is the first line, not the only one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from a2a.types import a2a_pb2
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from agentmesh.gateway.models import AgentRef
from agentmesh.runtime.identity import Access
from agentmesh.runtime.server import REFLECTION_V1


@dataclass(frozen=True)
class ProjectTarget:
    """The project a request concerns, by id or by slug."""

    id: str = ""
    slug: str = ""


@dataclass(frozen=True)
class SessionTarget:
    """The session a request concerns; `project_id` is the project the request names for it.
    Sessions are their project's, so a named project is what is checked; without one, the
    session's id must name one session, whose project is checked."""

    session_id: str
    project_id: str = ""


Target = ProjectTarget | SessionTarget


@dataclass(frozen=True)
class Rule:
    """One policy entry. For PROJECT_OWNER, `target` finds the project (or session) in the request:
    a gRPC request message, or an HTTP route's path parameters. `target_in_body` marks HTTP routes
    whose project is named in the body; their handler checks it once the body is parsed."""

    access: Access
    target: Callable[[Any], Target] | None = None
    target_in_body: bool = False
    # Whether a project-scoped API key may perform it although it names no project: reads of
    # what is not any project's (the caller itself, agent types).
    scoped_keys: bool = False
    # Whether it creates an account (registration): public, but counted per client address.
    sign_up: bool = False

    def __post_init__(self) -> None:
        if self.access is Access.PROJECT_OWNER and self.target is None:
            raise ValueError("a PROJECT_OWNER rule needs a target")


PUBLIC = Rule(Access.PUBLIC)
SIGN_UP = Rule(Access.PUBLIC, sign_up=True)
AUTHENTICATED = Rule(Access.AUTHENTICATED)
# Any signed-in caller, scoped API keys included.
ANY_CALLER = Rule(Access.AUTHENTICATED, scoped_keys=True)
SUPERUSER = Rule(Access.SUPERUSER)
SYSTEM = Rule(Access.SYSTEM)


def owner(target: Callable[[Any], Target], *, in_body: bool = False) -> Rule:
    return Rule(Access.PROJECT_OWNER, target, target_in_body=in_body)


def _project_id(field: str) -> Callable[[Any], Target]:
    """The project named by a request field; dotted paths reach into sub-messages."""

    def target(request: Any) -> Target:
        value = request
        for part in field.split("."):
            value = getattr(value, part)
        return ProjectTarget(id=value)

    return target


def _project_of_agent_ref(request: Any) -> Target:
    return ProjectTarget(slug=AgentRef.parse(request.agent).project_slug)


def _project_of_tenant(request: Any) -> Target:
    """A2A over gRPC: the request's tenant names the agent, `{project_slug}/{agent}`."""
    return ProjectTarget(slug=AgentRef.parse(request.tenant, field="tenant").project_slug)


def _session(request: Any) -> Target:
    return SessionTarget(request.session_id, request.project_id)


def _events_target(request: Any) -> Target:
    if request.session_id:
        return SessionTarget(request.session_id, request.project_id)
    return ProjectTarget(id=request.project_id)


def _path_project_id(params: Mapping[str, str]) -> Target:
    return ProjectTarget(id=params["project_id"])


def _path_project_slug(params: Mapping[str, str]) -> Target:
    return ProjectTarget(slug=params["project_slug"])


def _body_model(body: Any) -> Target:
    return ProjectTarget(slug=AgentRef.parse(body.model, field="model").project_slug)


def _found_project(project_id: str) -> Target:
    return ProjectTarget(id=project_id)


_REGISTRY = "/agentmesh.registry.v1.RegistryService/"
_MEMORY = "/agentmesh.memory.v1.MemoryService/"
_GATEWAY = "/agentmesh.gateway.v1.GatewayService/"


def _whole_service(descriptor: Any, rule: Rule) -> dict[str, Rule]:
    return {f"/{descriptor.full_name}/{method.name}": rule for method in descriptor.methods}


# Every RPC the gateway's gRPC port serves, by full method name.
A2A_SERVICE = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]

RPC_POLICY: Mapping[str, Rule] = {
    # Identity.
    _REGISTRY + "RegisterUser": SIGN_UP,
    _REGISTRY + "Login": PUBLIC,
    _REGISTRY + "RefreshTokens": PUBLIC,
    _REGISTRY + "RevokeRefreshToken": PUBLIC,  # the refresh token is the credential
    _REGISTRY + "GetCurrentUser": ANY_CALLER,
    _REGISTRY + "CreateUser": SUPERUSER,  # operators add users to a running mesh
    _REGISTRY + "UpdateUser": SUPERUSER,  # deactivate, promote, demote
    # API keys: a user's own (a scoped key may not make or list keys).
    _REGISTRY + "CreateApiKey": AUTHENTICATED,
    _REGISTRY + "ListApiKeys": AUTHENTICATED,
    _REGISTRY + "RevokeApiKey": AUTHENTICATED,
    _REGISTRY + "CreateInvitation": SUPERUSER,
    _REGISTRY + "ListInvitations": SUPERUSER,
    _REGISTRY + "RevokeInvitation": SUPERUSER,
    # Agent types: superusers manage them, every signed-in user reads them.
    _REGISTRY + "CreateAgentType": SUPERUSER,
    _REGISTRY + "GetAgentType": ANY_CALLER,
    _REGISTRY + "ListAgentTypes": ANY_CALLER,
    _REGISTRY + "UpdateAgentType": SUPERUSER,
    _REGISTRY + "DeleteAgentType": SUPERUSER,
    # Registered MCP servers: superusers only (their secrets are never shown to anyone).
    _REGISTRY + "CreateMcpServer": SUPERUSER,
    _REGISTRY + "GetMcpServer": SUPERUSER,
    _REGISTRY + "ListMcpServers": SUPERUSER,
    _REGISTRY + "UpdateMcpServer": SUPERUSER,
    _REGISTRY + "DeleteMcpServer": SUPERUSER,
    # Projects and everything in them: their owner (the registry lists only visible projects).
    _REGISTRY + "CreateProject": AUTHENTICATED,
    _REGISTRY + "GetProject": owner(lambda r: ProjectTarget(id=r.id, slug=r.slug)),
    _REGISTRY + "ListProjects": AUTHENTICATED,
    _REGISTRY + "UpdateProject": owner(_project_id("project.id")),
    _REGISTRY + "DeleteProject": owner(_project_id("id")),
    _REGISTRY + "CreateAgent": owner(_project_id("agent.project_id")),
    _REGISTRY + "GetAgent": owner(_project_id("project_id")),
    _REGISTRY + "ListAgents": owner(_project_id("project_id")),
    _REGISTRY + "UpdateAgent": owner(_project_id("agent.project_id")),
    _REGISTRY + "PauseAgent": owner(_project_id("project_id")),
    _REGISTRY + "ResumeAgent": owner(_project_id("project_id")),
    _REGISTRY + "DeleteAgent": owner(_project_id("project_id")),
    _REGISTRY + "GetAgentMetrics": owner(_project_id("project_id")),
    _REGISTRY + "ListAgentVersions": owner(_project_id("project_id")),
    _REGISTRY + "GetAgentVersion": owner(_project_id("project_id")),
    _REGISTRY + "DiffAgentVersions": owner(_project_id("project_id")),
    _REGISTRY + "RestoreAgentVersion": owner(_project_id("project_id")),
    _REGISTRY + "MoveSession": owner(_project_id("project_id")),
    _REGISTRY + "MoveAgentSessions": owner(_project_id("project_id")),
    # Remote A2A agents: the project's owner; their credentials reach executors only.
    _REGISTRY + "CreateRemoteAgent": owner(_project_id("remote_agent.project_id")),
    _REGISTRY + "GetRemoteAgent": owner(_project_id("project_id")),
    _REGISTRY + "ListRemoteAgents": owner(_project_id("project_id")),
    _REGISTRY + "UpdateRemoteAgent": owner(_project_id("remote_agent.project_id")),
    _REGISTRY + "DeleteRemoteAgent": owner(_project_id("project_id")),
    # Webhooks: the project's owner; a webhook's secret is in its creation's answer only.
    _REGISTRY + "CreateWebhook": owner(_project_id("webhook.project_id")),
    _REGISTRY + "GetWebhook": owner(_project_id("project_id")),
    _REGISTRY + "ListWebhooks": owner(_project_id("project_id")),
    _REGISTRY + "UpdateWebhook": owner(_project_id("webhook.project_id")),
    _REGISTRY + "DeleteWebhook": owner(_project_id("project_id")),
    _REGISTRY + "ListWebhookDeliveries": owner(_project_id("project_id")),
    _REGISTRY + "TestWebhook": owner(_project_id("project_id")),
    # Suspended runs' requests for input: the project's owner, and API keys scoped to it.
    _REGISTRY + "ListInputRequests": owner(_project_id("project_id")),
    _REGISTRY + "GetInputRequest": owner(_project_id("project_id")),
    _REGISTRY + "RespondToInputRequest": owner(_project_id("project_id")),
    _REGISTRY + "CancelWaitingRun": owner(_project_id("project_id")),
    _REGISTRY + "SummarizeUsage": owner(_project_id("project_id")),
    # Schedules: the project's owner; their runs run as the schedule's creator.
    _REGISTRY + "CreateSchedule": owner(_project_id("schedule.project_id")),
    _REGISTRY + "GetSchedule": owner(_project_id("project_id")),
    _REGISTRY + "ListSchedules": owner(_project_id("project_id")),
    _REGISTRY + "UpdateSchedule": owner(_project_id("schedule.project_id")),
    _REGISTRY + "DeleteSchedule": owner(_project_id("project_id")),
    _REGISTRY + "RunSchedule": owner(_project_id("project_id")),
    _REGISTRY + "ListScheduleFirings": owner(_project_id("project_id")),
    # Memory: the memory service knows no owners, so the gateway resolves the project itself.
    _MEMORY + "AppendEvents": owner(lambda r: SessionTarget(r.session_id, r.project_id)),
    _MEMORY + "ListEvents": owner(_events_target),
    _MEMORY + "WatchEvents": owner(_session),
    _MEMORY + "GetSession": owner(_session),
    _MEMORY + "ListSessions": owner(_project_id("project_id")),
    _MEMORY + "SetRetentionPolicy": owner(_project_id("policy.project_id")),
    _MEMORY + "GetRetentionPolicy": owner(_project_id("project_id")),
    _MEMORY + "ResetSessionContext": owner(lambda r: SessionTarget(r.session_id, r.project_id)),
    _MEMORY + "ForkSession": owner(lambda r: SessionTarget(r.session_id, r.project_id)),
    # Chat: the owner of the addressed agent's project.
    _GATEWAY + "Chat": owner(_project_of_agent_ref),
    _GATEWAY + "StreamChat": owner(_project_of_agent_ref),
    _GATEWAY + "ResetSession": owner(_project_id("project_id")),
    _GATEWAY + "RespondToInput": owner(_project_id("project_id")),
    # A2A (lf.a2a.v1): the owner of the project of the agent the tenant names.
    **_whole_service(A2A_SERVICE, owner(_project_of_tenant)),
    # Infrastructure every gRPC server has.
    **_whole_service(health_pb2.DESCRIPTOR.services_by_name["Health"], PUBLIC),
    **_whole_service(reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"], PUBLIC),
    f"/{REFLECTION_V1}/ServerReflectionInfo": PUBLIC,  # v1: v1alpha's one method, renamed
}

_OWNER_BY_ID = owner(_path_project_id)
_OWNER_BY_SLUG = owner(_path_project_slug)
# An agent's owner (or a superuser), the agent named by the path: what a private agent's card asks.
AGENT_OWNER = _OWNER_BY_SLUG
_AGENT = "/agents/{project_slug}/{agent_name}"
_A2A_REST = "/a2a/rest"
_A2A_ROUTES = [
    ("POST", "/a2a/jsonrpc"),
    ("POST", _A2A_REST + "/message:send"),
    ("POST", _A2A_REST + "/message:stream"),
    ("POST", _A2A_REST + "/tasks/{id}:cancel"),
    ("GET", _A2A_REST + "/tasks/{id}:subscribe"),
    ("POST", _A2A_REST + "/tasks/{id}:subscribe"),
    ("GET", _A2A_REST + "/tasks/{id}"),
    ("GET", _A2A_REST + "/tasks/{id}/pushNotificationConfigs/{push_id}"),
    ("DELETE", _A2A_REST + "/tasks/{id}/pushNotificationConfigs/{push_id}"),
    ("POST", _A2A_REST + "/tasks/{id}/pushNotificationConfigs"),
    ("GET", _A2A_REST + "/tasks/{id}/pushNotificationConfigs"),
    ("GET", _A2A_REST + "/tasks"),
    ("GET", _A2A_REST + "/extendedAgentCard"),
]

# Every HTTP route, by (method, path template). HEAD is treated as GET.
ROUTE_POLICY: Mapping[tuple[str, str], Rule] = {
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/openapi.json"): PUBLIC,
    ("GET", "/docs"): PUBLIC,
    ("GET", "/docs/oauth2-redirect"): PUBLIC,
    ("GET", "/redoc"): PUBLIC,
    # The web console's page and assets; what it shows it fetches with the signed-in user's token.
    ("GET", "/"): PUBLIC,
    ("GET", "/console/{asset}"): PUBLIC,
    # The discovery index: the agents their owners published (http/a2a.py, discovery_router).
    ("GET", "/.well-known/agent-card.json"): PUBLIC,
    ("GET", "/.well-known/ai-catalog.json"): PUBLIC,
    ("POST", "/api/v1/auth/register"): SIGN_UP,
    ("POST", "/api/v1/auth/login"): PUBLIC,
    # The refresh token in the body is the credential.
    ("POST", "/api/v1/auth/refresh"): PUBLIC,
    ("POST", "/api/v1/auth/logout"): PUBLIC,
    ("GET", "/api/v1/users/me"): ANY_CALLER,
    ("PATCH", "/api/v1/users/{user_id}"): SUPERUSER,
    ("POST", "/api/v1/api-keys"): AUTHENTICATED,
    ("GET", "/api/v1/api-keys"): AUTHENTICATED,
    ("DELETE", "/api/v1/api-keys/{api_key_id}"): AUTHENTICATED,
    ("POST", "/api/v1/invitations"): SUPERUSER,
    ("GET", "/api/v1/invitations"): SUPERUSER,
    ("DELETE", "/api/v1/invitations/{invitation_id}"): SUPERUSER,
    ("POST", "/api/v1/agent-types"): SUPERUSER,
    ("GET", "/api/v1/agent-types"): ANY_CALLER,
    ("GET", "/api/v1/agent-types/{agent_type_id}"): ANY_CALLER,
    ("GET", "/api/v1/agent-types/slug/{slug}"): ANY_CALLER,
    ("PATCH", "/api/v1/agent-types/{agent_type_id}"): SUPERUSER,
    ("DELETE", "/api/v1/agent-types/{agent_type_id}"): SUPERUSER,
    ("POST", "/api/v1/projects/{project_id}/remote-agents"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/remote-agents"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/remote-agents/{remote_agent_id}"): _OWNER_BY_ID,
    ("PATCH", "/api/v1/projects/{project_id}/remote-agents/{remote_agent_id}"): _OWNER_BY_ID,
    ("DELETE", "/api/v1/projects/{project_id}/remote-agents/{remote_agent_id}"): _OWNER_BY_ID,
    ("POST", "/api/v1/projects/{project_id}/webhooks"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/webhooks"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/webhooks/{webhook_id}"): _OWNER_BY_ID,
    ("PATCH", "/api/v1/projects/{project_id}/webhooks/{webhook_id}"): _OWNER_BY_ID,
    ("DELETE", "/api/v1/projects/{project_id}/webhooks/{webhook_id}"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/webhooks/{webhook_id}/deliveries"): _OWNER_BY_ID,
    ("POST", "/api/v1/projects/{project_id}/webhooks/{webhook_id}/test"): _OWNER_BY_ID,
    ("POST", "/api/v1/projects/{project_id}/schedules"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/schedules"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/schedules/{schedule_id}"): _OWNER_BY_ID,
    ("PATCH", "/api/v1/projects/{project_id}/schedules/{schedule_id}"): _OWNER_BY_ID,
    ("DELETE", "/api/v1/projects/{project_id}/schedules/{schedule_id}"): _OWNER_BY_ID,
    ("POST", "/api/v1/projects/{project_id}/schedules/{schedule_id}/run"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/schedules/{schedule_id}/firings"): _OWNER_BY_ID,
    ("POST", "/api/v1/mcp-servers"): SUPERUSER,
    ("GET", "/api/v1/mcp-servers"): SUPERUSER,
    ("GET", "/api/v1/mcp-servers/{mcp_server_id}"): SUPERUSER,
    ("PATCH", "/api/v1/mcp-servers/{mcp_server_id}"): SUPERUSER,
    ("DELETE", "/api/v1/mcp-servers/{mcp_server_id}"): SUPERUSER,
    ("POST", "/api/v1/projects"): AUTHENTICATED,
    ("GET", "/api/v1/projects"): AUTHENTICATED,
    ("GET", "/api/v1/projects/{project_id}"): _OWNER_BY_ID,
    ("PATCH", "/api/v1/projects/{project_id}"): _OWNER_BY_ID,
    ("DELETE", "/api/v1/projects/{project_id}"): _OWNER_BY_ID,
    ("POST", "/api/v1/projects/{project_id}/agents"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/agents"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/agents/{agent_id}"): _OWNER_BY_ID,
    ("PATCH", "/api/v1/projects/{project_id}/agents/{agent_id}"): _OWNER_BY_ID,
    ("DELETE", "/api/v1/projects/{project_id}/agents/{agent_id}"): _OWNER_BY_ID,
    ("POST", "/api/v1/projects/{project_id}/agents/{agent_id}/pause"): _OWNER_BY_ID,
    ("POST", "/api/v1/projects/{project_id}/agents/{agent_id}/resume"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/agents/{agent_id}/metrics"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/sessions"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/sessions/{session_id}/events"): _OWNER_BY_ID,
    ("POST", "/api/v1/projects/{project_id}/sessions/{session_id}/reset"): _OWNER_BY_ID,
    ("POST", "/api/v1/projects/{project_id}/sessions/{session_id}/fork"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/input-requests"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/input-requests/{request_id}"): _OWNER_BY_ID,
    ("POST", "/api/v1/projects/{project_id}/input-requests/{request_id}/respond"): _OWNER_BY_ID,
    ("POST", "/api/v1/projects/{project_id}/input-requests/{request_id}/cancel-run"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/usage"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/agents/{agent_id}/versions"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/agents/{agent_id}/versions/{number}"): _OWNER_BY_ID,
    ("GET", "/api/v1/projects/{project_id}/agents/{agent_id}/versions/{number}/diff"): _OWNER_BY_ID,
    ("POST", "/api/v1/projects/{project_id}/agents/{agent_id}/versions/{number}/restore"): _OWNER_BY_ID,
    ("POST", "/api/v1/projects/{project_id}/sessions/{session_id}/move"): _OWNER_BY_ID,
    ("POST", "/api/v1/projects/{project_id}/agents/{agent_id}/sessions/move"): _OWNER_BY_ID,
    ("GET", _AGENT + "/health"): _OWNER_BY_SLUG,
    ("GET", _AGENT + "/.well-known/agent"): _OWNER_BY_SLUG,
    # Public when its owner published the agent; else the route asks for the owner (http/a2a.py).
    ("GET", _AGENT + "/.well-known/agent-card.json"): PUBLIC,
    ("POST", _AGENT + "/v1/chat/completions"): _OWNER_BY_SLUG,
    ("POST", _AGENT + "/v1/responses"): _OWNER_BY_SLUG,
    ("GET", _AGENT + "/v1/responses/{response_id}"): _OWNER_BY_SLUG,
    ("POST", _AGENT + "/v1/responses/{response_id}/cancel"): _OWNER_BY_SLUG,
    ("DELETE", _AGENT + "/v1/responses/{response_id}"): _OWNER_BY_SLUG,
    ("GET", _AGENT + "/v1/responses/{response_id}/input_items"): _OWNER_BY_SLUG,
    ("GET", _AGENT + "/v1/models"): _OWNER_BY_SLUG,
    ("GET", _AGENT + "/memory/events"): _OWNER_BY_SLUG,
    # The agent's A2A bindings (http/a2a.py): JSON-RPC, and a2a-sdk's HTTP+JSON route table.
    **{(method, _AGENT + path): _OWNER_BY_SLUG for method, path in _A2A_ROUTES},
    # OpenAI-compatible root: the model names the project.
    ("POST", "/v1/chat/completions"): owner(_body_model, in_body=True),
    ("POST", "/v1/responses"): owner(_body_model, in_body=True),
    # The response id names its session: the route finds the project (the API key's, or the
    # session's) and checks it, as a body's model is checked (http/response_reads.py).
    ("GET", "/v1/responses/{response_id}"): owner(_found_project, in_body=True),
    ("POST", "/v1/responses/{response_id}/cancel"): owner(_found_project, in_body=True),
    ("DELETE", "/v1/responses/{response_id}"): owner(_found_project, in_body=True),
    ("GET", "/v1/responses/{response_id}/input_items"): owner(_found_project, in_body=True),
    ("GET", "/v1/models"): AUTHENTICATED,
    ("GET", "/v1/models/{project_slug}/{agent_name}"): _OWNER_BY_SLUG,
    # The project's agents as an MCP server (http/mcp_agents.py); at /mcp, the project of the
    # caller's scoped API key, which the route checks.
    ("POST", "/mcp/projects/{project_id}"): _OWNER_BY_ID,
    ("POST", "/mcp"): ANY_CALLER,
}


def route_rule(method: str, path: str) -> Rule | None:
    """The rule of an HTTP route, HEAD falling back to GET."""
    method = "GET" if method == "HEAD" else method
    return ROUTE_POLICY.get((method, path))
