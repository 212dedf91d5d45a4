"""`agentmesh up` as a user runs it: one process, four services, every one SERVING, and a chat
answered through the gateway by a reflection-based gRPC client (`buf curl`)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from pathlib import Path

import httpx
import pytest

from tests.e2e.harness import ServiceProcess, process_environment
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient
from tests.ports import free_loopback_ports

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
UP_READY = re.compile(r"^agentmesh is up", re.MULTILINE)
ADDRESS = re.compile(
    r"^(?P<name>registry|memory|executor|gateway)\s+gRPC\s+(?P<address>\S+)\s*$", re.MULTILINE
)


def buf_binary() -> str:
    local = ROOT / "node_modules" / ".bin" / "buf"
    if local.exists():
        return str(local)
    found = shutil.which("buf")
    if found:
        return found
    reason = "buf is not installed (scripts/buf.sh installs it from npm into node_modules/)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


async def run(*command: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    return process.returncode, stdout.decode(), stderr.decode()


async def test_up_serves_every_service_and_answers_stream_chat_from_buf_curl(tmp_path: Path) -> None:
    buf = buf_binary()
    http_port, grpc_port = free_loopback_ports(2)
    up = ServiceProcess(
        "up",
        [
            sys.executable,
            "-m",
            "agentmesh.cli.main",
            "up",
            "--http-port",
            str(http_port),
            "--grpc-port",
            str(grpc_port),
            "--data-dir",
            str(tmp_path / "data"),
        ],
        env={
            "AGENTMESH_SUPERUSER_EMAIL": SUPERUSER_EMAIL,
            "AGENTMESH_SUPERUSER_PASSWORD": SUPERUSER_PASSWORD,
        },
        log_dir=tmp_path,
        ready=(UP_READY,),
        inherit_env=False,
    )
    async with up:
        printed = dict(ADDRESS.findall(up.output(tail_lines=50)))
        assert set(printed) == {"registry", "memory", "executor", "gateway"}
        assert printed["gateway"] == f"127.0.0.1:{grpc_port}"
        started = up.output()
        assert '"logger": "alembic' not in started  # no migration chatter: one line per migrated database
        assert started.count("migrated alembic_version_") == 2, started
        for name, address in printed.items():
            code, out, _ = await run(sys.executable, "-m", "agentmesh.cli.main", "healthcheck", address)
            assert (code, out.strip()) == (0, "SERVING"), name

        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{http_port}") as http:
            assert (await http.get("/healthz")).status_code == 200
            ready = await http.get("/readyz")
            assert ready.status_code == 200, ready.text

        client = MeshClient(printed["registry"], printed["gateway"])
        try:
            token = await client.login()
            seeded = await client.seed_agent(token, mock_responses=["hello from agentmesh up"])
        finally:
            await client.close()

        code, out, err = await run(
            buf,
            "curl",
            "--protocol",
            "grpc",
            "--http2-prior-knowledge",
            "-H",
            f"authorization: Bearer {token}",
            "-d",
            json.dumps({"agent": seeded.ref, "message": "hi"}),
            f"http://127.0.0.1:{grpc_port}/agentmesh.gateway.v1.GatewayService/StreamChat",
        )
        assert code == 0, err
        events = [json.loads(chunk)["event"] for chunk in re.split(r"(?<=\})\n(?=\{)", out.strip())]
        assert "runStarted" in events[0]
        assert events[-1]["runCompleted"]["content"] == "hello from agentmesh up"
        assert (
            "".join(e["textDelta"]["text"] for e in events if "textDelta" in e) == "hello from agentmesh up"
        )

    assert up.returncode == 0, up.output()


LOCAL_ADMIN = re.compile(r"^    e-mail    (?P<email>\S+)\n    password  (?P<password>\S+)$", re.MULTILINE)


async def test_up_on_a_mesh_without_users_makes_an_admin_and_signs_this_cli_in(tmp_path: Path) -> None:
    """`make run` as a new user runs it: no superuser variables. The mesh is usable at once: the
    admin's password is shown once on stderr — in no log record and no span (the console exporter
    prints every span) — and the CLI here is signed in as it. A restart makes nobody."""
    http_port, grpc_port = free_loopback_ports(2)
    config = tmp_path / "config"
    command = [
        *(sys.executable, "-m", "agentmesh.cli.main", "up"),
        *("--http-port", str(http_port), "--grpc-port", str(grpc_port), "--data-dir", str(tmp_path / "data")),
    ]
    env = {"AGENTMESH_CONFIG_DIR": str(config), "OTEL_TRACES_EXPORTER": "console"}
    up = ServiceProcess("up", command, env=env, log_dir=tmp_path, ready=(UP_READY,))
    cli_env = process_environment({"AGENTMESH_CONFIG_DIR": str(config)})
    gateway = ("--gateway", f"127.0.0.1:{grpc_port}")

    async def cli(*args: str) -> tuple[int, str, str]:
        return await run(sys.executable, "-m", "agentmesh.cli.main", *args, *gateway, env=cli_env)

    async with up:
        said = up.stderr_path.read_text()
        found = LOCAL_ADMIN.search(said)
        assert found is not None, said
        password = found["password"]
        everything = up.stdout_path.read_text() + said
        assert everything.count(password) == 1, "the password is in a log record or a span"
        kept = json.loads((config / "credentials.json").read_text())
        assert kept["email"] == found["email"] and kept["address"] == f"127.0.0.1:{grpc_port}"
        assert password not in json.dumps(kept)

        code, out, err = await cli("get", "projects")
        assert (code, out, err) == (0, "no projects\n", "")
        code, out, err = await cli("apply", "-f", str(ROOT / "examples" / "coordinator-worker.yaml"))
        assert code == 0, err  # agent types too: the admin is a superuser
        assert out.endswith("5 created, 0 updated, 0 unchanged\n")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{http_port}") as http:
            signed_in = await http.post(
                "/api/v1/auth/login", json={"email": found["email"], "password": password}
            )
            assert signed_in.status_code == 200, signed_in.text  # the console and REST take it too
    assert up.returncode == 0, up.output()
    # Stopped, so every span has been exported.
    everything = up.stdout_path.read_text() + up.stderr_path.read_text()
    assert '"name": "agentmesh.registry.v1.RegistryService/Login"' in everything
    assert everything.count(password) == 1, "the password is in a log record or a span"

    credentials = (config / "credentials.json").read_text()
    async with up:  # users exist now: nothing is made, the kept login is left alone
        assert up.stderr_path.read_text().count("e-mail    ") == 1
        assert (config / "credentials.json").read_text() == credentials
