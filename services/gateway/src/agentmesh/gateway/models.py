"""The gateway's domain types: who is calling, which agent is addressed, what a chat returned."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentmesh.common.v1 import run_pb2
from agentmesh.runtime.client_address import CLIENT_ADDRESS
from agentmesh.runtime.errors import ValidationFailed
from agentmesh.runtime.identity import AUTHORIZATION, Principal


@dataclass(frozen=True)
class Caller:
    """An authorized caller: the principal its token carries (None on public operations) and the
    token itself, which every call the gateway makes on its behalf carries on."""

    principal: Principal | None = None
    token: str | None = None
    # Set when the caller signed in with an API key scoped to one project: the only project it
    # may touch. `token` is then a short-lived access token the gateway made for the key's user;
    # the key itself never goes past the gateway.
    project_scope: str = ""
    # On public operations (sign-in, registration): the client's address as the gateway saw it,
    # which the registry keys sign-in throttling by (it sees only the gateway's own address).
    client_address: str = ""

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        metadata = ((AUTHORIZATION, f"Bearer {self.token}"),) if self.token else ()
        if self.client_address:
            metadata += ((CLIENT_ADDRESS, self.client_address),)
        return metadata

    @property
    def user_id(self) -> str:
        return self.principal.user_id if self.principal else ""

    @property
    def is_superuser(self) -> bool:
        return bool(self.principal and self.principal.is_superuser)


@dataclass(frozen=True)
class AgentRef:
    """An agent as clients name it: `{project_slug}/{agent}`, the agent by its slug or its exact
    name (which may hold a '/': project slugs never do)."""

    project_slug: str
    agent_name: str

    @classmethod
    def parse(cls, text: str, *, field: str = "agent") -> AgentRef:
        project, slash, agent = text.partition("/")
        if not slash or not project or not agent:
            raise ValidationFailed.field(field, "must be 'project_slug/agent_name'")
        return cls(project, agent)

    def __str__(self) -> str:
        return f"{self.project_slug}/{self.agent_name}"


@dataclass
class ChatResult:
    """The end of a chat: the addressed agent's answer and its usage."""

    session_id: str
    run_id: str = ""
    content: str = ""
    usage: run_pb2.Usage | None = None
    max_steps_reached: bool = False
    # The run suspended, waiting for a person's input: its requests (`content` asks them).
    input_requests: list[run_pb2.InputRequest] = field(default_factory=list)
