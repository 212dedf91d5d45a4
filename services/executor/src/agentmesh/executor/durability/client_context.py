"""What an OpenAI client's request adds to a run's input, as the input's event records it in its
metadata: the conversation a client that keeps no session sends (RunRequest.context) — a resumed
run goes on with it, and later runs in the session read it as the session's beginning
(run/history.py) — and the shape its answer must have (RunRequest.response_format,
run/answer_format.py), which a resumed run is held to as well, and the tools the client offers
(RunRequest.client_tools, loops/client_tools.py), which a resumed run offers again."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.protobuf import struct_pb2

from agentmesh.internal.executor.v1 import executor_service_pb2

CONTEXT_KEY = "context"
FORMAT_KEY = "response_format"
TOOLS_KEY = "client_tools"
TOOL_CHOICE_KEY = "client_tool_choice"


def recordable(context: Iterable[executor_service_pb2.ContextMessage]) -> list[dict[str, Any]]:
    """The conversation as the input's metadata holds it."""
    return [{"role": message.role, "content": message.content} for message in context]


def recorded(metadata: struct_pb2.Struct) -> list[executor_service_pb2.ContextMessage]:
    """The conversation an input's metadata holds (none when it came without one)."""
    if CONTEXT_KEY not in metadata.fields:
        return []
    return [
        executor_service_pb2.ContextMessage(
            role=item.struct_value.fields["role"].string_value,
            content=item.struct_value.fields["content"].string_value,
        )
        for item in metadata.fields[CONTEXT_KEY].list_value.values
    ]


def recordable_format(answer_format: executor_service_pb2.ResponseFormat) -> dict[str, str]:
    """The answer's format as the input's metadata holds it."""
    return {"type": answer_format.type, "name": answer_format.name, "schema_json": answer_format.schema_json}


def recorded_format(metadata: struct_pb2.Struct) -> executor_service_pb2.ResponseFormat | None:
    """The answer's format an input's metadata holds (None when its request asked for none)."""
    if FORMAT_KEY not in metadata.fields:
        return None
    fields = metadata.fields[FORMAT_KEY].struct_value.fields
    return executor_service_pb2.ResponseFormat(
        type=fields["type"].string_value,
        name=fields["name"].string_value,
        schema_json=fields["schema_json"].string_value,
    )


def recordable_tools(request: executor_service_pb2.RunRequest) -> dict[str, Any]:
    """The client's tools and tool choice as the input's metadata holds them (none: nothing)."""
    if not request.client_tools:
        return {}
    tools = [
        {"name": tool.name, "description": tool.description, "parameters_json": tool.parameters_json}
        for tool in request.client_tools
    ]
    return {TOOLS_KEY: tools, TOOL_CHOICE_KEY: request.client_tool_choice}


def recorded_tools(metadata: struct_pb2.Struct) -> tuple[list[executor_service_pb2.ClientTool], str]:
    """The client's tools and tool choice an input's metadata holds."""
    if TOOLS_KEY not in metadata.fields:
        return [], ""
    tools = [
        executor_service_pb2.ClientTool(
            name=item.struct_value.fields["name"].string_value,
            description=item.struct_value.fields["description"].string_value,
            parameters_json=item.struct_value.fields["parameters_json"].string_value,
        )
        for item in metadata.fields[TOOLS_KEY].list_value.values
    ]
    return tools, metadata.fields[TOOL_CHOICE_KEY].string_value
