"""docker-compose.yml is a valid Compose file whose services wait for each other's real health.

There is no container engine here: the file is validated against the Compose Specification's
JSON schema and checked for what the design asks of it. tests/e2e/test_compose_processes.py then
runs its agentmesh services as processes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.e2e.compose import COMPOSE_FILE, ComposeProject, LoopbackNetwork, load_compose

REPO = COMPOSE_FILE.parent
# The schema is shared by the projects of this workplace and is read where it lies, never copied.
COMPOSE_SCHEMA = REPO.parent / "shared" / "schemas" / "compose-spec.json"
AGENTMESH_SERVICES = {"registry", "memory", "executor", "gateway"}
# Host names in environment values: "name:port" or a URL's "//[user@]name:port".
HOST_REFERENCE = re.compile(r"(?:^|[\s\"',\[/@])(?P<host>[a-z0-9][a-z0-9._-]*):(?P<port>\d+)")


@pytest.fixture(scope="module")
def raw() -> dict:
    """The file as YAML gives it: anchors and merge keys resolved, variables not interpolated."""
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def project() -> ComposeProject:
    """The file with every `${VAR:-default}` at its default, as `docker compose up` on a fresh
    machine sees it."""
    return load_compose()


@pytest.fixture(scope="module")
def agentmesh(project: ComposeProject) -> list[str]:
    return project.agentmesh_services()


def test_compose_file_is_valid_against_the_compose_specification(raw: dict) -> None:
    if not COMPOSE_SCHEMA.is_file():
        pytest.skip(f"Compose Specification schema not found at {COMPOSE_SCHEMA}")
    schema = json.loads(COMPOSE_SCHEMA.read_text())
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(raw), key=lambda error: list(error.absolute_path))
    assert not errors, "\n".join(
        f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}" for error in errors
    )


def test_every_agentmesh_service_runs_and_every_one_is_there(
    project: ComposeProject, agentmesh: list[str]
) -> None:
    assert {"postgres", "jaeger", "registry", "memory", "executor-1", "executor-2", "gateway"} <= set(
        project.services
    )
    kinds = sorted(project.services[name].agentmesh_service for name in agentmesh)
    assert kinds == ["executor", "executor", "gateway", "memory", "registry"]
    for name in agentmesh:
        assert project.services[name].agentmesh_service in AGENTMESH_SERVICES


def test_agentmesh_services_share_one_image_built_from_the_repo(raw: dict, agentmesh: list[str]) -> None:
    builds = {json.dumps(raw["services"][name].get("build"), sort_keys=True) for name in agentmesh}
    images = {raw["services"][name].get("image") for name in agentmesh}
    assert builds == {json.dumps(".")}, builds
    assert len(images) == 1, images


def test_every_environment_is_a_mapping_of_scalars(raw: dict) -> None:
    for name, service in raw["services"].items():
        environment = service.get("environment", {})
        assert isinstance(environment, dict), f"{name}: environment must load as a mapping"
        for key, value in environment.items():
            assert isinstance(value, str | int | float | bool), f"{name}: {key} is {value!r}"


def test_agentmesh_services_have_grpc_health_checks_on_their_own_port(
    project: ComposeProject, agentmesh: list[str]
) -> None:
    for name in agentmesh:
        service = project.services[name]
        command = service.healthcheck_command
        assert command is not None, f"{name} has no healthcheck"
        # The gRPC health protocol (grpc.health.v1), not "is the port open".
        assert command[:2] == ["agentmesh", "healthcheck"], f"{name}: {command}"
        host, _, port = command[2].rpartition(":")
        assert host == "127.0.0.1", f"{name}: the check runs inside the container, on loopback"
        own_port = f"AGENTMESH_{service.agentmesh_service.upper()}_PORT"
        assert service.environment.get(own_port) == port, (
            f"{name} checks {port}, but {own_port} is not {port}"
        )


def test_postgres_is_15_and_healthy_when_pg_isready_says_so(project: ComposeProject) -> None:
    postgres = project.services["postgres"]
    assert str(postgres.spec["image"]).startswith("postgres:15")
    command = postgres.healthcheck_command
    assert command is not None
    assert any("pg_isready" in part for part in command), command


def test_jaeger_takes_otlp_and_serves_its_ui(project: ComposeProject, agentmesh: list[str]) -> None:
    jaeger = project.services["jaeger"]
    assert str(jaeger.spec["image"]).startswith("jaegertracing/all-in-one:")
    assert jaeger.environment.get("COLLECTOR_OTLP_ENABLED") == "true"
    assert any(str(port).split(":")[-1] == "16686" for port in jaeger.spec.get("ports", []))
    for name in agentmesh:
        environment = project.services[name].environment
        assert environment["OTEL_TRACES_EXPORTER"] == "otlp", name
        assert environment["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4317", name
        assert environment["OTEL_SERVICE_NAME"].startswith("agentmesh-"), name


def test_services_wait_for_what_they_reference(project: ComposeProject, agentmesh: list[str]) -> None:
    """A service depends on every service its environment names, and waits for it to be healthy
    when that one has a healthcheck (service_healthy on one without would never start).

    Replicas of its own kind are the exception: an executor names itself (its advertised address)
    and its peers (delegation targets, used at run time, not at start)."""
    for name in agentmesh:
        service = project.services[name]
        referenced = {
            match["host"]
            for value in service.environment.values()
            for match in HOST_REFERENCE.finditer(value)
            if match["host"] in project.services and not _same_kind(project, name, match["host"])
        }
        assert referenced <= set(service.depends_on), (
            f"{name} names {referenced}, waits for {service.depends_on}"
        )
        for dependency, condition in service.depends_on.items():
            assert dependency in project.services, f"{name} depends on unknown {dependency}"
            has_healthcheck = project.services[dependency].healthcheck_command is not None
            expected = "service_healthy" if has_healthcheck else "service_started"
            assert condition == expected, f"{name} → {dependency}: {condition}, expected {expected}"


def _same_kind(project: ComposeProject, name: str, other: str) -> bool:
    service, peer = project.services[name], project.services[other]
    return peer.is_agentmesh and peer.agentmesh_service == service.agentmesh_service


def test_dependencies_follow_the_design(project: ComposeProject) -> None:
    """gateway → registry, memory, executors; executor → registry, memory; registry → the
    database only; memory → the database, and the registry it asks whether a token was revoked
    (DESIGN §2, docs/decisions/0042-revocation-on-every-port.md)."""
    healthy = {
        name: {
            dep
            for dep, condition in project.services[name].depends_on.items()
            if condition == "service_healthy"
        }
        for name in project.services
    }
    assert healthy["registry"] == {"postgres"}
    assert healthy["memory"] == {"postgres", "registry"}
    assert healthy["executor-1"] == healthy["executor-2"] == {"registry", "memory"}
    assert healthy["gateway"] == {"registry", "memory", "executor-1", "executor-2"}


def test_peers_are_addressed_by_service_name_and_port(project: ComposeProject, agentmesh: list[str]) -> None:
    executors = [name for name in agentmesh if project.services[name].agentmesh_service == "executor"]
    for name in agentmesh:
        service = project.services[name]
        environment = service.environment
        if service.agentmesh_service in {"executor", "gateway"}:
            assert environment["AGENTMESH_REGISTRY_ADDRESS"] == "registry:50051"
            assert environment["AGENTMESH_MEMORY_ADDRESS"] == "memory:50052"
            addresses = json.loads(environment["AGENTMESH_EXECUTOR_ADDRESSES"])
            assert sorted(addresses) == sorted(f"{executor}:50053" for executor in executors)
        if service.agentmesh_service == "executor":
            assert environment["AGENTMESH_EXECUTOR_ADVERTISE_ADDRESS"] == f"{name}:50053"
        if service.agentmesh_service in {"registry", "memory"}:
            assert environment["AGENTMESH_DATABASE_URL"].startswith("postgresql://")
            assert "@postgres:5432/" in environment["AGENTMESH_DATABASE_URL"]


def test_every_service_signs_and_verifies_tokens_with_one_long_secret(
    project: ComposeProject, agentmesh: list[str]
) -> None:
    secrets = {project.services[name].environment["AGENTMESH_JWT_SECRET"] for name in agentmesh}
    assert len(secrets) == 1, "tokens the registry issues must verify everywhere"
    assert len(secrets.pop()) >= 32
    registry = project.services["registry"].environment
    assert registry["AGENTMESH_SUPERUSER_EMAIL"] and registry["AGENTMESH_SUPERUSER_PASSWORD"]


def test_services_listen_on_all_interfaces_and_publish_only_the_gateway(
    project: ComposeProject, agentmesh: list[str]
) -> None:
    for name in agentmesh:
        service = project.services[name]
        hosts = {key: value for key, value in service.environment.items() if key.endswith("_HOST")}
        assert hosts and set(hosts.values()) == {"0.0.0.0"}, f"{name}: {hosts}"
        declared = {int(str(port).split(":")[-1]) for port in service.spec.get("expose", [])}
        published = {int(str(port).split(":")[-1]) for port in service.spec.get("ports", [])}
        assert declared | published <= service.listen_ports, f"{name} exposes ports it does not bind"
        if name != "gateway":
            assert not published, f"{name} is internal; only the gateway is published"
    gateway = project.services["gateway"]
    published = {str(port).split(":")[-1] for port in gateway.spec["ports"]}
    assert published == {"8080", "50050"}
    assert gateway.environment["AGENTMESH_GATEWAY_PORT"] == "50050"
    assert gateway.environment["AGENTMESH_GATEWAY_HTTP_PORT"] == "8080"


def test_the_file_maps_onto_loopback_without_unresolved_references(
    project: ComposeProject, agentmesh: list[str]
) -> None:
    """What the end-to-end test does before it starts anything: every host:port a service names
    is one that another agentmesh service binds, or the database."""
    network = LoopbackNetwork(project, agentmesh, standins={"postgres": "postgresql://u@127.0.0.1:5432/db"})
    for name in agentmesh:
        environment = network.environment(name)
        leftovers = [
            f"{key}={value}"
            for key, value in environment.items()
            for match in HOST_REFERENCE.finditer(value)
            if match["host"] in project.services
        ]
        assert not leftovers, f"{name}: {leftovers}"
        assert network.healthcheck_address(name) in {
            network.address(name, port) for port in project.services[name].listen_ports
        }


def test_dockerfile_runs_as_a_non_root_user_and_exposes_every_service_port(
    project: ComposeProject, agentmesh: list[str]
) -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", dockerfile, re.MULTILINE)
    users = re.findall(r"^USER\s+(\S+)", dockerfile, re.MULTILINE)
    assert users and users[-1].split(":")[0] not in {"root", "0"}
    exposed = {
        int(port)
        for line in re.findall(r"^EXPOSE\s+(.+)$", dockerfile, re.MULTILINE)
        for port in line.split()
    }
    listened = set().union(*(project.services[name].listen_ports for name in agentmesh))
    assert listened <= exposed, f"not exposed: {listened - exposed}"
    assert "uv sync --locked --no-dev --no-editable" in dockerfile


def test_dockerignore_keeps_local_state_out_of_the_build_context() -> None:
    patterns = (REPO / ".dockerignore").read_text().split()
    # Everything is ignored except what the image is built from.
    assert "*" in patterns
    allowed = {pattern[1:].rstrip("/") for pattern in patterns if pattern.startswith("!")}
    assert allowed == {"pyproject.toml", "uv.lock", "README.md", "src", "services"}
    copied = re.findall(r"^COPY\s+(?!--from)(.+)\s+\S+$", (REPO / "Dockerfile").read_text(), re.MULTILINE)
    sources = {Path(source).as_posix().rstrip("/") for line in copied for source in line.split()}
    assert sources <= allowed, f"the Dockerfile copies what .dockerignore leaves out: {sources - allowed}"
