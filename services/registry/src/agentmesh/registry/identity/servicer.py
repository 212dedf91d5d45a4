"""The user and API key RPCs of RegistryService: proto in, proto out, mixed into
`RegistryServicer`. Signing in and out (Login, RefreshTokens, RevokeRefreshToken) are the users'
RPCs too, and a superuser's invitations to register. No answer but CreateApiKey's and
CreateInvitation's carries a secret, and those only the caller who made it gets.
AuthenticateApiKey is internal (`internal_servicer.py`). Sign-in and registration go by the client
address the call came from (`current_client_address`: the one the gateway vouched for)."""

from __future__ import annotations

from datetime import UTC

import grpc

from agentmesh.registry import convert
from agentmesh.registry.identity.api_keys import ApiKeys
from agentmesh.registry.identity.auth import Accounts
from agentmesh.registry.identity.invitations import Invitations
from agentmesh.registry.identity.registration import Registration
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.runtime.client_address import current_client_address
from agentmesh.runtime.identity import caller

Context = grpc.aio.ServicerContext


class AccountRpcs:
    """Adapts the user and sign-in RPCs to `Accounts`."""

    _accounts: Accounts
    _registration: Registration

    async def RegisterUser(
        self, request: pb.RegisterUserRequest, context: Context
    ) -> pb.RegisterUserResponse:
        user = await self._registration.register(
            email=request.email,
            password=request.password,
            first_name=request.first_name,
            last_name=request.last_name,
            invitation_token=request.invitation_token,
        )
        return pb.RegisterUserResponse(user=convert.user_message(user))

    async def Login(self, request: pb.LoginRequest, context: Context) -> pb.LoginResponse:
        tokens = await self._accounts.login(
            email=request.email, password=request.password, client_address=current_client_address.get()
        )
        return pb.LoginResponse(tokens=convert.tokens_message(tokens))

    async def RefreshTokens(
        self, request: pb.RefreshTokensRequest, context: Context
    ) -> pb.RefreshTokensResponse:
        tokens = await self._accounts.refresh(request.refresh_token)
        return pb.RefreshTokensResponse(tokens=convert.tokens_message(tokens))

    async def RevokeRefreshToken(
        self, request: pb.RevokeRefreshTokenRequest, context: Context
    ) -> pb.RevokeRefreshTokenResponse:
        await self._accounts.revoke(request.refresh_token)
        return pb.RevokeRefreshTokenResponse()

    async def GetCurrentUser(
        self, request: pb.GetCurrentUserRequest, context: Context
    ) -> pb.GetCurrentUserResponse:
        user = await self._accounts.current_user(caller())
        return pb.GetCurrentUserResponse(user=convert.user_message(user))

    async def CreateUser(self, request: pb.CreateUserRequest, context: Context) -> pb.CreateUserResponse:
        created = await self._accounts.create_user(
            email=request.email,
            password=request.password,
            first_name=request.first_name,
            last_name=request.last_name,
            is_superuser=request.is_superuser,
        )
        return pb.CreateUserResponse(user=convert.user_message(created.user), promoted=created.promoted)

    async def UpdateUser(self, request: pb.UpdateUserRequest, context: Context) -> pb.UpdateUserResponse:
        user = await self._accounts.update_user(
            caller(),
            request.user.id,
            mask=list(request.update_mask.paths),
            is_active=request.user.is_active,
            is_superuser=request.user.is_superuser,
        )
        return pb.UpdateUserResponse(user=convert.user_message(user))


class InvitationRpcs:
    """Adapts the invitation RPCs to `Invitations` (superusers only: the RPC policy)."""

    _invitations: Invitations

    async def CreateInvitation(
        self, request: pb.CreateInvitationRequest, context: Context
    ) -> pb.CreateInvitationResponse:
        invitation, token = await self._invitations.create(caller(), ttl_seconds=request.ttl_seconds)
        return pb.CreateInvitationResponse(invitation=convert.invitation_message(invitation), token=token)

    async def ListInvitations(
        self, request: pb.ListInvitationsRequest, context: Context
    ) -> pb.ListInvitationsResponse:
        page = await self._invitations.list(
            page_size=request.page_size, page_token=request.page_token, page=request.page
        )
        return pb.ListInvitationsResponse(
            invitations=[convert.invitation_message(invitation) for invitation in page.items],
            next_page_token=page.next_page_token,
            total_size=page.total_size,
        )

    async def RevokeInvitation(
        self, request: pb.RevokeInvitationRequest, context: Context
    ) -> pb.RevokeInvitationResponse:
        await self._invitations.revoke(request.id)
        return pb.RevokeInvitationResponse()


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
