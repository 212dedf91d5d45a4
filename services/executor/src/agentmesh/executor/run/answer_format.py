"""The shape a run's answer must have when its request asks for one (OpenAI's `response_format`):
the model is told so — an instruction after the agent's own, which every provider takes — and the
answer is checked at the end, so a run never answers with what its client cannot read.

The request's format is recorded with the input (durability/client_context.py): a run resumed on
another executor is held to it as well."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import referencing
import referencing.exceptions

from agentmesh.executor.errors import AnswerNotInFormat
from agentmesh.executor.providers.base import Message
from agentmesh.internal.executor.v1 import executor_service_pb2

JSON_OBJECT = "json_object"
JSON_SCHEMA = "json_schema"


def instruction(answer_format: executor_service_pb2.ResponseFormat) -> list[Message]:
    """What the model is told of the format (nothing when the request asks for none)."""
    if answer_format.type == JSON_OBJECT:
        return [Message("system", "Answer with one JSON object only: no other text, no code fences.")]
    if answer_format.type == JSON_SCHEMA:
        named = f' named "{answer_format.name}"' if answer_format.name else ""
        schema = answer_format.schema_json or "{}"
        return [
            Message(
                "system",
                f"Answer with JSON only — no other text, no code fences — valid against this JSON "
                f"schema{named}:\n{schema}",
            )
        ]
    return []


def check(answer_format: executor_service_pb2.ResponseFormat, answer: str) -> None:
    """Raises AnswerNotInFormat unless `answer` has the requested shape."""
    if answer_format.type not in (JSON_OBJECT, JSON_SCHEMA):
        return
    try:
        value: Any = json.loads(answer)
    except ValueError:
        raise AnswerNotInFormat(
            f"the model's answer is not JSON, as response_format asks: {answer[:200]!r}"
        ) from None
    if answer_format.type == JSON_OBJECT:
        if not isinstance(value, dict):
            raise AnswerNotInFormat("the model's answer is JSON but not an object, as response_format asks")
        return
    schema = json.loads(answer_format.schema_json or "{}")
    # An empty registry: a schema is the client's, and jsonschema would otherwise fetch a remote
    # `$ref` — a request from inside the mesh to any address. The gateway refuses such schemas;
    # one that still refers out is an answer that cannot be checked.
    validator = jsonschema.validators.validator_for(schema)(schema, registry=referencing.Registry())
    try:
        problem = jsonschema.exceptions.best_match(validator.iter_errors(value))
    except referencing.exceptions.Unresolvable as error:
        raise AnswerNotInFormat(f"the response_format schema refers outside itself: {error}") from None
    if problem is not None:
        where = "/".join(str(part) for part in problem.absolute_path) or "the answer"
        raise AnswerNotInFormat(
            f"the model's answer does not match the response_format schema at {where}: {problem.message}"
        )
