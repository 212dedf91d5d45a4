"""RegistryService over gRPC: one service, its RPCs handled by resource — users and API keys in
`identity/servicer.py`, projects in `projects/servicer.py`, agent types and agents in
`agents/servicer.py`, MCP servers and remote agents in theirs, suspended runs' requests for input in
`runs/servicer.py`, the cost ledger's summaries in `usage/servicer.py`, webhooks in
`webhooks/servicer.py`, schedules in `schedules/servicer.py`. This class only composes those
handlers and gives them the rules they call. No SQL and no rules here: the caller comes from the
authorization interceptor (`caller()`), and failures leave as DomainErrors for the shared
interceptor to map."""

from __future__ import annotations

from agentmesh.registry.agents.registry import AgentRegistry
from agentmesh.registry.agents.servicer import AgentRpcs, AgentTypeRpcs
from agentmesh.registry.identity.api_keys import ApiKeys
from agentmesh.registry.identity.auth import Accounts
from agentmesh.registry.identity.invitations import Invitations
from agentmesh.registry.identity.registration import Registration
from agentmesh.registry.identity.servicer import AccountRpcs, ApiKeyRpcs, InvitationRpcs
from agentmesh.registry.mcp_servers.registry import McpServerRegistry
from agentmesh.registry.mcp_servers.servicer import McpServerRpcs
from agentmesh.registry.projects.registry import ProjectRegistry
from agentmesh.registry.projects.servicer import ProjectRpcs
from agentmesh.registry.remote_agents.registry import RemoteAgentRegistry
from agentmesh.registry.remote_agents.servicer import RemoteAgentRpcs
from agentmesh.registry.runs.input_requests import InputRequests
from agentmesh.registry.runs.servicer import InputRequestRpcs
from agentmesh.registry.schedules.registry import ScheduleRegistry
from agentmesh.registry.schedules.servicer import ScheduleRpcs
from agentmesh.registry.usage.ledger import UsageLedger
from agentmesh.registry.usage.servicer import UsageRpcs
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.webhooks.registry import WebhookRegistry
from agentmesh.registry.webhooks.servicer import WebhookRpcs


class RegistryServicer(
    AccountRpcs,
    InvitationRpcs,
    ApiKeyRpcs,
    ProjectRpcs,
    AgentTypeRpcs,
    AgentRpcs,
    McpServerRpcs,
    RemoteAgentRpcs,
    InputRequestRpcs,
    UsageRpcs,
    WebhookRpcs,
    ScheduleRpcs,
    pb_grpc.RegistryServiceServicer,
):
    """The public RegistryService: every resource's RPC handlers, over the rules they adapt."""

    def __init__(
        self,
        *,
        accounts: Accounts,
        registration: Registration,
        invitations: Invitations,
        api_keys: ApiKeys,
        projects: ProjectRegistry,
        registry: AgentRegistry,
        mcp_servers: McpServerRegistry,
        remote_agents: RemoteAgentRegistry,
        input_requests: InputRequests,
        usage: UsageLedger,
        webhooks: WebhookRegistry,
        schedules: ScheduleRegistry,
    ) -> None:
        self._accounts = accounts
        self._registration = registration
        self._invitations = invitations
        self._api_keys = api_keys
        self._projects = projects
        self._registry = registry
        self._mcp_servers = mcp_servers
        self._remote_agents = remote_agents
        self._input_requests = input_requests
        self._usage = usage
        self._webhooks = webhooks
        self._schedules = schedules
