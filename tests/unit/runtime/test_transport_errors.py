"""A call that gRPC itself ended (no rich status from the peer) reaches callers as what failed, in
their terms: the peer service named, gRPC core's addresses left out."""

from __future__ import annotations

import grpc
import pytest

from agentmesh.runtime.errors import (
    PEER_SERVICE,
    PEER_UNAVAILABLE,
    DeadlineExceeded,
    Unavailable,
    from_rpc_error,
    peer_service,
)

CORE_MESSAGE = (
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:38154: "
    "Failed to connect to remote host: Connection refused"
)


def _core_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


def test_an_unreachable_peer_is_named_without_its_address() -> None:
    error = from_rpc_error(
        _core_error(grpc.StatusCode.UNAVAILABLE, CORE_MESSAGE),
        method="/agentmesh.internal.registry.v1.RegistryInternalService/ResolveAgent",
    )
    assert isinstance(error, Unavailable)
    assert error.message == "the registry service is unavailable"
    assert (error.reason, error.metadata) == (PEER_UNAVAILABLE, {PEER_SERVICE: "registry"})


def test_a_deadline_names_the_peer() -> None:
    error = from_rpc_error(
        _core_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"),
        method="/agentmesh.memory.v1.MemoryService/AppendEvents",
    )
    assert isinstance(error, DeadlineExceeded)
    assert error.message == "the memory service did not answer in time"


@pytest.mark.parametrize("address", ["ipv4:10.1.2.3:50051", "ipv6:[::1]:50051", "10.1.2.3:8080"])
def test_other_transport_failures_keep_their_text_less_the_addresses(address: str) -> None:
    error = from_rpc_error(
        _core_error(grpc.StatusCode.INTERNAL, f"Received RST_STREAM from {address}"),
        method="/agentmesh.internal.executor.v1.ExecutorService/Run",
    )
    assert "10.1.2.3" not in error.message and "::1" not in error.message
    assert error.message.startswith("the call to the executor service failed")


@pytest.mark.parametrize(
    ("method", "service"),
    [
        ("/agentmesh.gateway.v1.GatewayService/Chat", "gateway"),
        ("/agentmesh.internal.registry.v1.RegistryInternalService/ResolveAgent", "registry"),
        ("/agentmesh.internal.executor.v1.ExecutorService/Run", "executor"),
        ("/agentmesh.common.v1.CredentialStatusService/GetCredentialStatus", "registry"),
        ("/agentmesh.common.v1.ProjectOwnerService/GetProjectOwner", "registry"),
        ("/grpc.health.v1.Health/Check", "Health"),
        ("", "peer"),
    ],
)
def test_the_peer_service_is_read_from_the_method(method: str, service: str) -> None:
    assert peer_service(method) == service
