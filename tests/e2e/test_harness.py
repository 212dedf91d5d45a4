"""The process harness and the compose reader that the end-to-end tests stand on."""

from __future__ import annotations

import signal
import sys
import textwrap
from pathlib import Path

import pytest

from tests import ports
from tests.e2e.compose import (
    ComposeError,
    ComposeProject,
    ComposeService,
    LoopbackNetwork,
    interpolate,
)
from tests.e2e.harness import (
    ServiceProcess,
    ServiceProcessError,
    agentmesh_command,
    process_environment,
    ready_patterns,
    resolve_command,
)
from tests.ports import free_loopback_ports

# A stand-in service: prints the lines `agentmesh serve` prints, and drains on SIGTERM.
FAKE_SERVICE = textwrap.dedent(
    """
    import signal, socket, sys, time

    mode = sys.argv[1]
    if mode == "crash":
        print("configuration is broken", file=sys.stderr, flush=True)
        sys.exit(3)
    if mode == "silent":
        time.sleep(60)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: (print("draining", flush=True), sys.exit(0)))
    print(f"fake serving gRPC on 127.0.0.1:{port}", flush=True)
    if mode == "http":
        print(f"fake serving HTTP on http://127.0.0.1:{port + 1}", flush=True)
    while True:
        time.sleep(0.05)
    """
)


@pytest.fixture
def fake(tmp_path: Path):
    script = tmp_path / "fake_service.py"
    script.write_text(FAKE_SERVICE)

    def make(mode: str, **options) -> ServiceProcess:
        return ServiceProcess(
            f"fake-{mode}", [sys.executable, str(script), mode], env={}, log_dir=tmp_path / "logs", **options
        )

    return make


async def test_start_waits_for_the_ready_line_and_stop_drains_with_sigterm(fake) -> None:
    process = fake("serve")
    async with process:
        assert process.running
        host, _, port = process.grpc_address.rpartition(":")
        assert host == "127.0.0.1" and int(port) > 0
    assert process.returncode == 0
    assert "draining" in process.stdout_path.read_text()


async def test_ready_lines_may_include_the_http_url(fake) -> None:
    async with fake("http", ready=ready_patterns("gateway")) as process:
        assert process.http_url.startswith("http://127.0.0.1:")
    with pytest.raises(ServiceProcessError, match="http_url"):
        _ = fake("serve").http_url


async def test_a_process_that_exits_early_fails_the_start_with_its_output(fake) -> None:
    with pytest.raises(ServiceProcessError, match="exited with code 3") as raised:
        await fake("crash").start(timeout=10)
    assert "configuration is broken" in str(raised.value)


async def test_a_process_that_never_gets_ready_times_out_and_is_killed(fake) -> None:
    process = fake("silent")
    with pytest.raises(ServiceProcessError, match=r"did not print .* within 0.5s"):
        await process.start(timeout=0.5)
    assert process.returncode == -signal.SIGKILL


async def test_a_process_that_ignores_sigterm_is_killed_after_the_timeout(fake) -> None:
    process = await fake("stubborn").start()
    assert await process.stop(timeout=0.5) == -signal.SIGKILL


async def test_a_stopped_process_can_start_again(fake) -> None:
    process = await fake("serve").start()
    first = process.grpc_address
    await process.stop()
    await process.start()
    try:
        assert process.running
        assert process.grpc_address != first, "the address of this run, not of the last"
    finally:
        await process.stop()
    assert process.stdout_path.read_text().count("serving gRPC") == 2


def test_services_do_not_inherit_the_runners_agentmesh_or_otel_variables(monkeypatch) -> None:
    monkeypatch.setenv("AGENTMESH_DATABASE_URL", "sqlite:///elsewhere.db")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("HARNESS_TEST_KEPT", "yes")
    env = process_environment({"AGENTMESH_MEMORY_PORT": "1234"})
    assert env["AGENTMESH_MEMORY_PORT"] == "1234"
    assert "AGENTMESH_DATABASE_URL" not in env and "OTEL_TRACES_EXPORTER" not in env
    assert env["HARNESS_TEST_KEPT"] == "yes"
    assert env["PYTHONUNBUFFERED"] == "1"


def test_free_loopback_ports_are_distinct() -> None:
    ports = free_loopback_ports(20)
    assert len(set(ports)) == 20


def test_each_worker_takes_its_ports_below_the_ephemeral_range_from_a_slice_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slices = []
    for worker in ("gw0", "gw1", "gw11"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        slices.append(set(ports._slice()))
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert all(slices) and all(port < low for ports_of in slices for port in ports_of)
    assert not (slices[0] & slices[1]) and not (slices[1] & slices[2]) and not (slices[0] & slices[2])


def test_agentmesh_in_a_command_is_this_environments() -> None:
    assert resolve_command(["agentmesh", "serve", "memory"])[-2:] == ["serve", "memory"]
    assert resolve_command(["agentmesh", "serve"])[0] in {
        str(Path(sys.executable).with_name("agentmesh")),
        sys.executable,
    }
    assert resolve_command(["pg_isready"]) == ["pg_isready"]
    assert agentmesh_command("--help")[-1] == "--help"


@pytest.mark.e2e
async def test_a_real_service_starts_reports_serving_and_drains(tmp_path: Path) -> None:
    (port,) = free_loopback_ports(1)
    env = {
        "AGENTMESH_EXECUTOR_PORT": str(port),
        "AGENTMESH_JWT_SECRET": "harness-" + "s" * 40,
        "AGENTMESH_REGISTRY_ADDRESS": "127.0.0.1:9",
        "AGENTMESH_MEMORY_ADDRESS": "127.0.0.1:9",
    }
    async with ServiceProcess.serve("executor", env=env, log_dir=tmp_path) as executor:
        assert executor.grpc_address == f"127.0.0.1:{port}"
        await executor.wait_serving(timeout=10)
    assert executor.returncode == 0, executor.output()


# -- reading the compose file -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "variables", "expected"),
    [
        ("${A:-default}", {}, "default"),
        ("${A:-default}", {"A": ""}, "default"),
        ("${A-default}", {"A": ""}, ""),
        ("${A:-default}", {"A": "set"}, "set"),
        ("$A and ${A}", {"A": "x"}, "x and x"),
        ("${A:+alt}", {"A": "x"}, "alt"),
        ("${A:+alt}", {}, ""),
        ("cost: $$5", {}, "cost: $5"),
    ],
)
def test_interpolation_follows_compose(text: str, variables: dict[str, str], expected: str) -> None:
    assert interpolate({"k": [text]}, variables) == {"k": [expected]}


def test_a_required_variable_that_is_missing_is_an_error() -> None:
    with pytest.raises(ComposeError, match="B is missing: set B"):
        interpolate("${B:?set B}", {})


def _project(**services: dict) -> ComposeProject:
    return ComposeProject(
        Path("compose.yml"), {name: ComposeService(name, spec) for name, spec in services.items()}
    )


def test_services_start_in_waves_of_their_dependencies() -> None:
    project = _project(
        db={},
        a={"depends_on": {"db": {"condition": "service_healthy"}}},
        b={"depends_on": ["a"]},
        c={"depends_on": {"a": {"condition": "service_healthy"}}},
        d={"depends_on": {"b": {"condition": "service_healthy"}, "c": {"condition": "service_healthy"}}},
    )
    assert project.start_order(["a", "b", "c", "d"]) == [["a"], ["b", "c"], ["d"]]
    cyclic = _project(a={"depends_on": ["b"]}, b={"depends_on": ["a"]})
    with pytest.raises(ComposeError, match="cycle"):
        cyclic.start_order(["a", "b"])


def test_a_reference_to_a_port_nobody_listens_on_is_an_error() -> None:
    project = _project(
        registry={
            "command": ["agentmesh", "serve", "registry"],
            "environment": {"AGENTMESH_REGISTRY_PORT": "50051"},
        },
        gateway={
            "command": ["agentmesh", "serve", "gateway"],
            "environment": {"AGENTMESH_GATEWAY_PORT": "50050", "AGENTMESH_REGISTRY_ADDRESS": "registry:5051"},
        },
    )
    network = LoopbackNetwork(project, ["registry", "gateway"], standins={})
    with pytest.raises(ComposeError, match=r"AGENTMESH_REGISTRY_ADDRESS='registry:5051' names registry:5051"):
        network.environment("gateway")


def test_stand_ins_replace_urls_and_otlp_goes_to_the_given_receiver() -> None:
    project = _project(
        memory={
            "command": ["agentmesh", "serve", "memory"],
            "environment": {
                "AGENTMESH_MEMORY_HOST": "0.0.0.0",
                "AGENTMESH_MEMORY_PORT": 50052,
                "AGENTMESH_DATABASE_URL": "postgresql://u:p@postgres:5432/agentmesh",
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4317",
            },
            "healthcheck": {"test": ["CMD", "agentmesh", "healthcheck", "127.0.0.1:50052"]},
        },
        postgres={},
        jaeger={},
    )
    database = "postgresql://postgres@127.0.0.1:6543/test"
    traced = LoopbackNetwork(
        project, ["memory"], standins={"postgres": database}, otlp_endpoint="http://127.0.0.1:4999"
    )
    environment = traced.environment("memory")
    port = traced.ports[("memory", 50052)]
    assert environment == {
        "AGENTMESH_MEMORY_HOST": "127.0.0.1",
        "AGENTMESH_MEMORY_PORT": str(port),
        "AGENTMESH_DATABASE_URL": database,
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4999",
    }
    assert traced.healthcheck_command("memory")[-1] == f"127.0.0.1:{port}"
    untraced = LoopbackNetwork(project, ["memory"], standins={"postgres": database}).environment("memory")
    assert untraced["OTEL_TRACES_EXPORTER"] == "none"
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in untraced
