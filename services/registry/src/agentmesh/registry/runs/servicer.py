"""The requests-for-input RPCs of RegistryService: proto in, proto out, mixed into
`RegistryServicer`. SuspendRun, for executors, is internal (`internal_servicer.py`)."""

from __future__ import annotations

import grpc

from agentmesh.registry.runs import input_convert
from agentmesh.registry.runs.input_requests import InputRequests
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.runtime.identity import caller

Context = grpc.aio.ServicerContext


class InputRequestRpcs:
    """Adapts the requests-for-input RPCs to `InputRequests`."""

    _input_requests: InputRequests

    async def ListInputRequests(
        self, request: pb.ListInputRequestsRequest, context: Context
    ) -> pb.ListInputRequestsResponse:
        page = await self._input_requests.list(
            caller(),
            request.project_id,
            session_id=request.session_id,
            state=input_convert.input_request_state(request.state),
            page_size=request.page_size,
            page_token=request.page_token,
        )
        return pb.ListInputRequestsResponse(
            input_requests=[input_convert.input_request_message(item) for item in page.items],
            next_page_token=page.next_page_token,
        )

    async def GetInputRequest(
        self, request: pb.GetInputRequestRequest, context: Context
    ) -> pb.GetInputRequestResponse:
        found = await self._input_requests.get(caller(), request.project_id, request.id)
        return pb.GetInputRequestResponse(input_request=input_convert.input_request_message(found))

    async def RespondToInputRequest(
        self, request: pb.RespondToInputRequestRequest, context: Context
    ) -> pb.RespondToInputRequestResponse:
        answered = await self._input_requests.respond(
            caller(), request.project_id, request.id, input_convert.input_response(request.response)
        )
        return pb.RespondToInputRequestResponse(input_request=input_convert.input_request_message(answered))

    async def CancelWaitingRun(
        self, request: pb.CancelWaitingRunRequest, context: Context
    ) -> pb.CancelWaitingRunResponse:
        closed, cancelled = await self._input_requests.cancel(
            caller(), request.project_id, request.input_request_id, reason=request.reason
        )
        return pb.CancelWaitingRunResponse(
            input_request=input_convert.input_request_message(closed),
            run_ids=[run_id for _, run_id in cancelled],
        )
