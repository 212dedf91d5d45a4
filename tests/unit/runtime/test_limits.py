"""The text checks every service's requests pass: where a NUL character sits."""

from __future__ import annotations

from agentmesh.memory.v1 import memory_service_pb2 as mem
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2 as res
from agentmesh.runtime.limits import nul_field


def test_nul_field_names_the_id_or_name_that_holds_one() -> None:
    assert nul_field(reg.GetProjectRequest(id="p\x00")) == "id"
    update = reg.UpdateAgentRequest(agent=res.Agent(id="a", project_id="\x00"))
    assert nul_field(update) == "agent.project_id"
    assert nul_field(reg.GetProjectRequest(id="p-1")) is None


def test_nul_field_leaves_lists_and_json_to_the_service() -> None:
    """A list's texts and free-form JSON are content, validated with the rest of the request."""
    append = mem.AppendEventsRequest(session_id="s", project_id="p")
    append.events.add(agent="a", content="nul \x00").metadata.update({"k": "\x00"})
    assert nul_field(append) is None
    assert nul_field(reg.CreateAgentTypeRequest(agent_type=res.AgentType(tools=["\x00"]))) is None
