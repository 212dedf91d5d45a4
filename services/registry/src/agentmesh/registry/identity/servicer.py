"""The API key RPCs of RegistryService: proto in, proto out, mixed into `RegistryServicer`.
No answer but CreateApiKey's carries a secret, and that one only the key's new owner gets.
AuthenticateApiKey is internal (`internal_servicer.py`)."""

from __future__ import annotations

from datetime import UTC

import grpc

from agentmesh.registry import convert
from agentmesh.registry.identity.api_keys import ApiKeys
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.runtime.identity import caller

Context = grpc.aio.ServicerContext


class ApiKeyRpcs:
    """Adapts the API key RPCs to `ApiKeys`."""

    _api_keys: ApiKeys

    async def CreateApiKey(
        self, request: pb.CreateApiKeyRequest, context: Context
    ) -> pb.CreateApiKeyResponse:
        expires_at = request.expires_at.ToDatetime(tzinfo=UTC) if request.HasField("expires_at") else None
        key, secret = await self._api_keys.create(
            caller(), name=request.name, project_id=request.project_id, expires_at=expires_at
        )
        return pb.CreateApiKeyResponse(api_key=convert.api_key_message(key), secret=secret)

    async def ListApiKeys(self, request: pb.ListApiKeysRequest, context: Context) -> pb.ListApiKeysResponse:
        page = await self._api_keys.list(
            caller(), page_size=request.page_size, page_token=request.page_token, page=request.page
        )
        return pb.ListApiKeysResponse(
            api_keys=[convert.api_key_message(key) for key in page.items],
            next_page_token=page.next_page_token,
            total_size=page.total_size,
        )

    async def RevokeApiKey(
        self, request: pb.RevokeApiKeyRequest, context: Context
    ) -> pb.RevokeApiKeyResponse:
        await self._api_keys.revoke(caller(), request.id)
        return pb.RevokeApiKeyResponse()
