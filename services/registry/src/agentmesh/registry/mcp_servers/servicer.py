"""The MCP server RPCs of RegistryService: proto in, proto out, mixed into `RegistryServicer`.
Answers mask env and header values (`convert.mcp_server_message`); only the internal
ResolveMcpServers (`internal_servicer.py`), for executors, carries them."""

from __future__ import annotations

import grpc

from agentmesh.registry import convert
from agentmesh.registry.mcp_servers.registry import McpServerRegistry
from agentmesh.registry.v1 import registry_service_pb2 as pb

Context = grpc.aio.ServicerContext


class McpServerRpcs:
    """Adapts the MCP server RPCs to `McpServerRegistry`."""

    _mcp_servers: McpServerRegistry

    async def CreateMcpServer(
        self, request: pb.CreateMcpServerRequest, context: Context
    ) -> pb.CreateMcpServerResponse:
        server = await self._mcp_servers.create(
            convert.mcp_server(request.mcp_server),
            project_id=request.mcp_server.project_id,
            request_id=request.request_id,
        )
        return pb.CreateMcpServerResponse(mcp_server=convert.mcp_server_message(server))

    async def GetMcpServer(
        self, request: pb.GetMcpServerRequest, context: Context
    ) -> pb.GetMcpServerResponse:
        server = await self._mcp_servers.get(
            server_id=request.id, name=request.name, project_id=request.project_id
        )
        return pb.GetMcpServerResponse(mcp_server=convert.mcp_server_message(server))

    async def ListMcpServers(
        self, request: pb.ListMcpServersRequest, context: Context
    ) -> pb.ListMcpServersResponse:
        page = await self._mcp_servers.list(
            project_id=request.project_id,
            page_size=request.page_size,
            page_token=request.page_token,
            page=request.page,
        )
        return pb.ListMcpServersResponse(
            mcp_servers=[convert.mcp_server_message(item) for item in page.items],
            next_page_token=page.next_page_token,
            total_size=page.total_size,
        )

    async def UpdateMcpServer(
        self, request: pb.UpdateMcpServerRequest, context: Context
    ) -> pb.UpdateMcpServerResponse:
        server = await self._mcp_servers.update(
            request.mcp_server.id, convert.mcp_server(request.mcp_server), request.update_mask.paths
        )
        return pb.UpdateMcpServerResponse(mcp_server=convert.mcp_server_message(server))

    async def DeleteMcpServer(
        self, request: pb.DeleteMcpServerRequest, context: Context
    ) -> pb.DeleteMcpServerResponse:
        await self._mcp_servers.delete(request.id)
        return pb.DeleteMcpServerResponse()
