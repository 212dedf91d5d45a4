"""Who may call which registry RPC: one policy table, applied by the runtime's
`AuthenticationInterceptor` (see `app.py`).

The table decides what needs no data: whether a call needs a signed-in caller, a superuser or the
system principal. What depends on data (a project and everything in it belong to its owner and
superusers) is the rules' business, in each resource's rules (`agents/registry.py`, ...). Every
RPC of the service must have an entry: the interceptor refuses to start otherwise, so a new RPC
cannot go out unguarded.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentmesh.common.v1 import credential_status_service_pb2, project_owner_service_pb2
from agentmesh.internal.registry.v1 import registry_internal_service_pb2
from agentmesh.registry.v1 import registry_service_pb2
from agentmesh.runtime.identity import Access

SERVICE = registry_service_pb2.DESCRIPTOR.services_by_name["RegistryService"]
INTERNAL_SERVICE = registry_internal_service_pb2.DESCRIPTOR.services_by_name["RegistryInternalService"]
CREDENTIAL_STATUS_SERVICE = credential_status_service_pb2.DESCRIPTOR.services_by_name[
    "CredentialStatusService"
]
PROJECT_OWNER_SERVICE = project_owner_service_pb2.DESCRIPTOR.services_by_name["ProjectOwnerService"]

POLICY: Mapping[str, Access] = {
    "RegisterUser": Access.PUBLIC,
    "Login": Access.PUBLIC,
    "RefreshTokens": Access.PUBLIC,
    # Possession of the refresh token is the credential, as for RefreshTokens.
    "RevokeRefreshToken": Access.PUBLIC,
    "GetCurrentUser": Access.AUTHENTICATED,
    "CreateUser": Access.SUPERUSER,
    "UpdateUser": Access.SUPERUSER,
    # A user's own keys.
    "CreateApiKey": Access.AUTHENTICATED,
    "ListApiKeys": Access.AUTHENTICATED,
    "RevokeApiKey": Access.AUTHENTICATED,
    "CreateInvitation": Access.SUPERUSER,
    "ListInvitations": Access.SUPERUSER,
    "RevokeInvitation": Access.SUPERUSER,
    "CreateAgentType": Access.SUPERUSER,
    "GetAgentType": Access.AUTHENTICATED,
    "ListAgentTypes": Access.AUTHENTICATED,
    "UpdateAgentType": Access.SUPERUSER,
    "DeleteAgentType": Access.SUPERUSER,
    "CreateProject": Access.AUTHENTICATED,
    "GetProject": Access.AUTHENTICATED,
    "ListProjects": Access.AUTHENTICATED,
    "UpdateProject": Access.AUTHENTICATED,
    "DeleteProject": Access.AUTHENTICATED,
    "CreateAgent": Access.AUTHENTICATED,
    "GetAgent": Access.AUTHENTICATED,
    "ListAgents": Access.AUTHENTICATED,
    "UpdateAgent": Access.AUTHENTICATED,
    "PauseAgent": Access.AUTHENTICATED,
    "ResumeAgent": Access.AUTHENTICATED,
    "DeleteAgent": Access.AUTHENTICATED,
    "GetAgentMetrics": Access.AUTHENTICATED,
    "ListAgentVersions": Access.AUTHENTICATED,
    "GetAgentVersion": Access.AUTHENTICATED,
    "DiffAgentVersions": Access.AUTHENTICATED,
    "RestoreAgentVersion": Access.AUTHENTICATED,
    "MoveSession": Access.AUTHENTICATED,
    "MoveAgentSessions": Access.AUTHENTICATED,
    "CreateMcpServer": Access.SUPERUSER,
    "GetMcpServer": Access.SUPERUSER,
    "ListMcpServers": Access.SUPERUSER,
    "UpdateMcpServer": Access.SUPERUSER,
    "DeleteMcpServer": Access.SUPERUSER,
    # Remote A2A agents: the project's owner (the rules check it) or superusers.
    "CreateRemoteAgent": Access.AUTHENTICATED,
    "GetRemoteAgent": Access.AUTHENTICATED,
    "ListRemoteAgents": Access.AUTHENTICATED,
    "UpdateRemoteAgent": Access.AUTHENTICATED,
    "DeleteRemoteAgent": Access.AUTHENTICATED,
    "CreateWebhook": Access.AUTHENTICATED,
    "GetWebhook": Access.AUTHENTICATED,
    "ListWebhooks": Access.AUTHENTICATED,
    "UpdateWebhook": Access.AUTHENTICATED,
    "DeleteWebhook": Access.AUTHENTICATED,
    "ListWebhookDeliveries": Access.AUTHENTICATED,
    "TestWebhook": Access.AUTHENTICATED,
    # Suspended runs' requests for input: the project's owner, superusers, and API keys scoped to
    # the project (the rules check it, `runs/input_requests.py`).
    "ListInputRequests": Access.AUTHENTICATED,
    "GetInputRequest": Access.AUTHENTICATED,
    "RespondToInputRequest": Access.AUTHENTICATED,
    "CancelWaitingRun": Access.AUTHENTICATED,
    # The cost ledger's summaries: the project's owner, superusers, and API keys scoped to it
    # (the rules check it, `usage/ledger.py`).
    "SummarizeUsage": Access.AUTHENTICATED,
    # Schedules: the project's owner (the rules check it) or superusers.
    "CreateSchedule": Access.AUTHENTICATED,
    "GetSchedule": Access.AUTHENTICATED,
    "ListSchedules": Access.AUTHENTICATED,
    "UpdateSchedule": Access.AUTHENTICATED,
    "DeleteSchedule": Access.AUTHENTICATED,
    "RunSchedule": Access.AUTHENTICATED,
    "ListScheduleFirings": Access.AUTHENTICATED,
}

# RegistryInternalService: only the mesh's services reach it (their service credential is checked
# first, for every RPC); this table says on whose behalf they may call.
INTERNAL_POLICY: Mapping[str, Access] = {
    # Executors call these with the end user's token forwarded, so ownership applies.
    "ResolveAgent": Access.AUTHENTICATED,
    "StartAgentRun": Access.AUTHENTICATED,
    "FinishAgentRun": Access.AUTHENTICATED,
    "FinishAgentRuns": Access.AUTHENTICATED,
    # The one answer with MCP servers' secrets: executors only, never a user's token.
    "ResolveMcpServers": Access.SYSTEM,
    # The one answer with a remote agent's credential: executors only.
    "ResolveRemoteAgent": Access.SYSTEM,
    # The gateways' discovery index: published agents of every project, so never a user's token.
    "ListPublicAgents": Access.SYSTEM,
    "RenewRunLeases": Access.SYSTEM,
    "SuspendRun": Access.SYSTEM,
    # Gateways fire schedules as themselves: claims cover every project.
    "ClaimScheduleFirings": Access.SYSTEM,
    "RecordScheduleFiring": Access.SYSTEM,
    # The gateway's A2A face, with the user's token: the task's project must be theirs to see.
    "SetTaskPushConfig": Access.AUTHENTICATED,
    "GetTaskPushConfig": Access.AUTHENTICATED,
    "ListTaskPushConfigs": Access.AUTHENTICATED,
    "DeleteTaskPushConfig": Access.AUTHENTICATED,
    "AwaitSessionTurn": Access.SYSTEM,
    "WatchAgents": Access.SYSTEM,
    "RegisterExecutor": Access.SYSTEM,
    # Gateways and executors discover the pool as the system principal; superusers may look.
    "ListExecutors": Access.SUPERUSER,
    # The gateways' revocation check and how they turn an API key into its user.
    "GetUserStatus": Access.SYSTEM,
    "AuthenticateApiKey": Access.SYSTEM,
}

# CredentialStatusService: the services that verify access tokens ask, as the system principal,
# whether a token's user and API key still stand (runtime/revocation.py).
CREDENTIAL_STATUS_POLICY: Mapping[str, Access] = {"GetCredentialStatus": Access.SYSTEM}

# ProjectOwnerService: memory asks, as the system principal, who owns a project.
PROJECT_OWNER_POLICY: Mapping[str, Access] = {
    "GetProjectOwner": Access.SYSTEM,
    "GetProjectStoredBytesLimit": Access.SYSTEM,
}
