"""The policy table covers every RPC the gateway serves and every HTTP route it has."""

from __future__ import annotations

import pytest

from agentmesh.gateway.app import GATEWAY_SERVICE, MEMORY_SERVICE, REGISTRY_SERVICE
from agentmesh.gateway.http.app import create_http_app, route_methods, unpoliced_routes
from agentmesh.gateway.http.context import HttpContext
from agentmesh.gateway.policy import ROUTE_POLICY, RPC_POLICY, Access, ProjectTarget, Rule, SessionTarget
from agentmesh.memory.v1 import memory_service_pb2 as mem
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2


def app():
    context = HttpContext(guard=None, registry=None, memory=None, gateway=None, max_chat_messages=1)  # type: ignore[arg-type]
    return create_http_app(context, max_request_body_bytes=1024)


def test_every_rpc_of_the_served_services_has_a_rule() -> None:
    served = {
        f"/{service.full_name}/{method.name}"
        for service in (GATEWAY_SERVICE, REGISTRY_SERVICE, MEMORY_SERVICE)
        for method in service.methods
    }
    assert served - set(RPC_POLICY) == set()


def test_every_route_has_a_rule_and_every_rule_a_route() -> None:
    routes = set(route_methods(app()))
    assert unpoliced_routes(app()) == []
    assert set(ROUTE_POLICY) - routes == set(), "rules for routes that do not exist"
    assert len(routes) > 35


def test_openapi_marks_exactly_the_non_public_routes_as_needing_the_token() -> None:
    schema = app().openapi()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            public = ROUTE_POLICY[(method.upper(), path)].access is Access.PUBLIC
            assert ("security" in operation) is not public, (method, path)


def test_project_rules_find_the_project_in_the_request() -> None:
    rule = RPC_POLICY["/agentmesh.registry.v1.RegistryService/CreateAgent"]
    request = reg.CreateAgentRequest(agent=resources_pb2.Agent(project_id="p1"))
    assert rule.target is not None and rule.target(request) == ProjectTarget(id="p1")
    events = RPC_POLICY["/agentmesh.memory.v1.MemoryService/ListEvents"]
    assert events.target is not None
    assert events.target(mem.ListEventsRequest(session_id="s1")) == SessionTarget("s1")
    assert events.target(mem.ListEventsRequest(project_id="p1", agent="a")) == ProjectTarget(id="p1")
    chat = RPC_POLICY["/agentmesh.gateway.v1.GatewayService/StreamChat"]
    assert chat.target is not None
    from agentmesh.gateway.v1 import gateway_service_pb2 as gw

    assert chat.target(gw.StreamChatRequest(agent="proj/bot")) == ProjectTarget(slug="proj")
    route = ROUTE_POLICY[("GET", "/agents/{project_slug}/{agent_name}/health")]
    assert route.target is not None and route.target(
        {"project_slug": "proj", "agent_name": "bot"}
    ) == ProjectTarget(slug="proj")


def test_internal_rpcs_are_not_the_gateways_to_serve_and_owner_rules_need_a_target() -> None:
    # The RPCs only the mesh's services call live in agentmesh.internal.* packages: the public
    # RegistryService has none of them, and the gateway's policy names none.
    public = {method.name for method in reg.DESCRIPTOR.services_by_name["RegistryService"].methods}
    for name in ("ResolveAgent", "StartAgentRun", "FinishAgentRun", "RegisterExecutor", "ListExecutors"):
        assert name not in public
    assert not [method for method in RPC_POLICY if "internal" in method or "DeleteProjectSessions" in method]
    with pytest.raises(ValueError):
        Rule(Access.PROJECT_OWNER)
