"""docker-compose.yml, run without a container engine: every agentmesh service of the file starts
from its own `command` with its own `environment` as a separate OS process (the compose network
mapped onto loopback, the test's PostgreSQL standing in for the postgres service), and a chat
goes through the gateway. If the file rots — a misnamed variable, a wrong peer address, a
healthcheck that cannot pass — this test fails."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.e2e.compose import load_compose, run_compose_services
from tests.mesh import MeshClient
from tests.postgres import libpq_dsn

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

ANSWER = "hello from compose"


async def test_compose_services_answer_a_chat_as_separate_processes(
    postgres_database: str, tmp_path: Path
) -> None:
    project = load_compose()
    registry_environment = project.services["registry"].environment
    # As compose gives it: a plain postgresql:// URL, which the services map to asyncpg themselves.
    database = libpq_dsn(postgres_database)

    async with run_compose_services(project, log_dir=tmp_path, standins={"postgres": database}) as mesh:
        assert sorted(mesh.names) == ["executor-1", "executor-2", "gateway", "memory", "registry"]
        client = MeshClient(mesh["registry"].grpc_address, mesh["gateway"].grpc_address)
        try:
            token = await client.login(
                registry_environment["AGENTMESH_SUPERUSER_EMAIL"],
                registry_environment["AGENTMESH_SUPERUSER_PASSWORD"],
            )
            seeded = await client.seed_agent(token, name="greeter", mock_responses=[ANSWER])
            events = [response.event for response in await client.stream_chat(seeded, "hi there")]
        finally:
            await client.close()

        kinds = [event.WhichOneof("kind") for event in events]
        assert kinds[0] == "run_started", kinds
        assert kinds[-1] == "run_completed", kinds
        assert events[-1].run_completed.content == ANSWER
        assert "".join(event.text_delta.text for event in events if event.HasField("text_delta")) == ANSWER
        assert {event.agent for event in events} == {"greeter"}

        async with httpx.AsyncClient(base_url=mesh["gateway"].http_url, timeout=5.0) as http:
            assert (await http.get("/healthz")).status_code == 200
            ready = await http.get("/readyz")
            assert ready.status_code == 200, ready.text

    # SIGTERM drains every service and it exits cleanly, as `docker compose stop` expects.
    assert mesh.returncodes() == dict.fromkeys(mesh.names, 0), mesh.output()
