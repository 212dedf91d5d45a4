"""The usage RPC of RegistryService (SummarizeUsage): proto in, proto out, mixed into
`RegistryServicer`."""

from __future__ import annotations

import grpc

from agentmesh.registry.usage.convert import DIMENSIONS, summary_message
from agentmesh.registry.usage.ledger import UsageLedger
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.validation import raise_if
from agentmesh.runtime.errors import FieldViolation
from agentmesh.runtime.identity import caller

Context = grpc.aio.ServicerContext


class UsageRpcs:
    """Adapts the usage RPC to `UsageLedger`."""

    _usage: UsageLedger

    async def SummarizeUsage(
        self, request: pb.SummarizeUsageRequest, context: Context
    ) -> pb.SummarizeUsageResponse:
        unknown = [value for value in request.group_by if value not in DIMENSIONS]
        raise_if([FieldViolation("group_by", f"unknown dimension {value}") for value in unknown])
        summary = await self._usage.summarize(
            caller(),
            request.project_id,
            [DIMENSIONS[value] for value in request.group_by],
            start_day=request.start_day,
            end_day=request.end_day,
        )
        return summary_message(summary)
