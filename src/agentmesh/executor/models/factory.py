"""Picks the model for an agent: `mock` when it has scripted responses or names the mock model,
else the provider named by `provider/model`."""

from __future__ import annotations

from google.protobuf import json_format

from agentmesh.executor.models.base import ChatModel
from agentmesh.executor.models.mock import MockModel
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import FailedPrecondition


class ModelFactory:
    """Builds a fresh `ChatModel` per run (the mock model counts calls per run)."""

    def __init__(self, *, chunk_chars: int = 64) -> None:
        self._chunk_chars = chunk_chars

    def __call__(self, spec: resources_pb2.AgentSpec) -> ChatModel:
        responses = json_format.MessageToDict(spec.mock_responses) if spec.HasField("mock_responses") else []
        model = spec.primary_model or "mock"
        provider = model.partition("/")[0]
        if responses or provider == "mock":
            return MockModel(responses, name=model, chunk_chars=self._chunk_chars)
        raise FailedPrecondition(f"model provider {provider!r} is not configured", reason="MODEL_UNAVAILABLE")
