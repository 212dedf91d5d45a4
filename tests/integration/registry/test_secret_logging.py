"""No logger prints a stored secret, at any level: with every logger at DEBUG, an MCP
server's env and header values and a webhook's signing secret, written to the registry's database,
appear in no log record. The
SQLite driver logs each call it runs, bound parameters included, at DEBUG; SQLAlchemy logs
statements with their parameters when its engine logger is enabled."""

from __future__ import annotations

import logging

import pytest

from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2 as res
from tests.integration.registry.support import Api
from tests.integration.registry.test_mcp_servers import TOKEN, create, knowledge_base


async def test_a_stored_secret_reaches_no_log_record_at_debug(
    stub: pb_grpc.RegistryServiceStub, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # Even an operator who turns SQLAlchemy's statement log on sees no bound values.
    caplog.set_level(logging.DEBUG, logger="sqlalchemy.engine")
    await create(stub, api, knowledge_base())
    # A webhook's signing secret, made by the registry and written to its database, likewise.
    owner = await api.sign_up()
    project = await api.project(owner)
    webhook = res.Webhook(project_id=project.id, url="https://example.com/hook", events=["run.failed"])
    made = await stub.CreateWebhook(reg.CreateWebhookRequest(webhook=webhook), metadata=owner.metadata)
    assert caplog.records, "DEBUG logging captured nothing: the test would prove nothing"
    secrets = (TOKEN, made.webhook.secret)
    leaked = [record.name for record in caplog.records if any(s in _rendered(record) for s in secrets)]
    assert leaked == []


def _rendered(record: logging.LogRecord) -> str:
    """Everything a handler could print of a record: its message, arguments and exception."""
    text = record.getMessage() + repr(record.args)
    if record.exc_info and record.exc_info[1] is not None:
        text += repr(record.exc_info[1])
    return text
