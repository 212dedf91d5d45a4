"""docker-compose.yml as data, and its agentmesh services run as local processes.

There is no container engine where the tests run, so the end-to-end tests start every agentmesh
service of the compose file as a separate OS process instead — its own `command` and its own
`environment` — with the compose network mapped onto loopback (`LoopbackNetwork`):

- each (service, container port) gets a free port on 127.0.0.1; `*_PORT` values, `host:port`
  references (`*_ADDRESS`, the JSON lists of `*_ADDRESSES`, URLs) and the healthcheck's
  `127.0.0.1:PORT` are rewritten to it, and bind-all hosts (`0.0.0.0`) become 127.0.0.1;
- services that are not agentmesh's (postgres) are replaced by stand-ins the test provides: a
  `*_URL` pointing at one becomes the stand-in's URL;
- traces go to `otlp_endpoint` when one is given (a test's receiver), else nowhere.

A reference the mapping cannot resolve — a host:port that no service listens on, a healthcheck
aimed at a port its service does not bind — is an error, so the compose file cannot rot quietly.
`run_compose_services` starts the services in `depends_on` order, waits for each one's own
compose healthcheck to pass, and stops them in reverse order::

    project = load_compose()
    async with run_compose_services(project, log_dir=tmp_path, standins={"postgres": url}) as mesh:
        stub = GatewayServiceStub(grpc.aio.insecure_channel(mesh["gateway"].grpc_address))
        ...
    assert mesh.returncodes() == dict.fromkeys(mesh.names, 0)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from tests.e2e.harness import (
    ServiceProcess,
    ServiceProcessError,
    ready_patterns,
    resolve_command,
    wait_until,
)
from tests.ports import free_loopback_ports

logger = logging.getLogger(__name__)

COMPOSE_FILE = Path(__file__).resolve().parents[2] / "docker-compose.yml"
LOOPBACK = "127.0.0.1"
BIND_ALL_HOSTS = frozenset({"0.0.0.0", "::", "[::]"})
HEALTHCHECK_ATTEMPT_SECONDS = 10.0

_VARIABLE = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[A-Za-z_][A-Za-z0-9_]*))")
_BRACED = re.compile(
    r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<operator>:?[-?+])(?P<argument>.*))?$", re.DOTALL
)


class ComposeError(ValueError):
    """The compose file says something the local run cannot honour (or that is wrong)."""


# -- reading the file -------------------------------------------------------------------------------


def interpolate(value: Any, variables: Mapping[str, str]) -> Any:
    """Compose's variable substitution over every string in `value`: `$VAR`, `${VAR}`,
    `${VAR:-default}`, `${VAR-default}`, `${VAR:?error}`, `${VAR?error}`, `${VAR:+alt}`,
    `${VAR+alt}`, and `$$` for a literal `$`."""
    if isinstance(value, str):
        return _VARIABLE.sub(lambda match: _substitute(match, variables), value)
    if isinstance(value, list):
        return [interpolate(item, variables) for item in value]
    if isinstance(value, dict):
        return {key: interpolate(item, variables) for key, item in value.items()}
    return value


def _substitute(match: re.Match[str], variables: Mapping[str, str]) -> str:
    if match["escaped"]:
        return "$"
    if match["named"]:
        return variables.get(match["named"], "")
    braced = _BRACED.match(match["braced"])
    if braced is None:
        raise ComposeError(f"invalid interpolation {match[0]!r}")
    name, operator, argument = braced["name"], braced["operator"], braced["argument"] or ""
    value = variables.get(name)
    # The colon forms treat an empty value like a missing one.
    present = bool(value) if operator and operator.startswith(":") else value is not None
    match operator:
        case None:
            return value or ""
        case ":-" | "-":
            return value if present and value is not None else argument
        case ":?" | "?":
            if present and value is not None:
                return value
            raise ComposeError(f"required variable {name} is missing: {argument}")
        case _:  # ":+" | "+"
            return argument if present else ""


def load_compose(path: Path = COMPOSE_FILE, *, variables: Mapping[str, str] | None = None) -> ComposeProject:
    """The compose file, interpolated with `variables` (none by default: every `${VAR:-default}`
    takes its default, so a developer's shell cannot change what the tests run)."""
    document = yaml.safe_load(path.read_text())
    if not isinstance(document, dict) or not isinstance(document.get("services"), dict):
        raise ComposeError(f"{path}: no services")
    document = interpolate(document, variables or {})
    return ComposeProject(
        path=path, services={name: ComposeService(name, spec) for name, spec in document["services"].items()}
    )


@dataclass(frozen=True)
class ComposeService:
    """One service of the compose file, as the fields the local run needs."""

    name: str
    spec: Mapping[str, Any]

    @property
    def command(self) -> list[str]:
        command = self.spec.get("command")
        if command is None:
            return []
        if not isinstance(command, list):
            raise ComposeError(f"{self.name}: command must be an exec-form list, not {command!r}")
        return [str(part) for part in command]

    @property
    def is_agentmesh(self) -> bool:
        """Runs `agentmesh serve SERVICE`."""
        return self.command[:2] == ["agentmesh", "serve"]

    @property
    def agentmesh_service(self) -> str:
        """Which agentmesh service it runs: registry, memory, executor or gateway."""
        if not self.is_agentmesh or len(self.command) < 3:
            raise ComposeError(f"{self.name} does not run `agentmesh serve SERVICE`")
        return self.command[2]

    @property
    def environment(self) -> dict[str, str]:
        environment = self.spec.get("environment") or {}
        if isinstance(environment, list):
            pairs = (item.partition("=") for item in environment)
            return {key: value for key, _, value in pairs}
        return {key: "" if value is None else _scalar(value) for key, value in environment.items()}

    @property
    def depends_on(self) -> dict[str, str]:
        """Dependencies and their conditions (the short list form means `service_started`)."""
        depends_on = self.spec.get("depends_on") or {}
        if isinstance(depends_on, list):
            return dict.fromkeys(depends_on, "service_started")
        return {name: options.get("condition", "service_started") for name, options in depends_on.items()}

    @property
    def healthcheck_command(self) -> list[str] | None:
        """The healthcheck's command as an argv, or None without a healthcheck."""
        healthcheck = self.spec.get("healthcheck")
        if not healthcheck or healthcheck.get("disable"):
            return None
        test = healthcheck.get("test")
        if isinstance(test, str):
            return ["/bin/sh", "-c", test]
        if not test or test[0] == "NONE":
            return None
        if test[0] == "CMD":
            return [str(part) for part in test[1:]]
        if test[0] == "CMD-SHELL":
            return ["/bin/sh", "-c", " ".join(test[1:])]
        raise ComposeError(f"{self.name}: healthcheck test must start with CMD, CMD-SHELL or NONE")

    @property
    def listen_ports(self) -> set[int]:
        """Container ports the service binds: the values of its `*_PORT` variables."""
        ports = set()
        for key, value in self.environment.items():
            if key.endswith("_PORT"):
                try:
                    ports.add(int(value))
                except ValueError:
                    raise ComposeError(f"{self.name}: {key}={value!r} is not a port") from None
        return ports


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class ComposeProject:
    """The services of one compose file."""

    path: Path
    services: dict[str, ComposeService]

    def agentmesh_services(self) -> list[str]:
        return [name for name, service in self.services.items() if service.is_agentmesh]

    def start_order(self, names: Sequence[str]) -> list[list[str]]:
        """`names` in waves: each wave depends only on earlier ones (dependencies outside `names`
        are taken as satisfied: those are the stand-ins)."""
        pending = {name: set(self.services[name].depends_on) & set(names) for name in names}
        waves: list[list[str]] = []
        while pending:
            wave = sorted(name for name, needs in pending.items() if not needs)
            if not wave:
                raise ComposeError(f"depends_on has a cycle among {sorted(pending)}")
            waves.append(wave)
            for name in wave:
                del pending[name]
            for needs in pending.values():
                needs.difference_update(wave)
        return waves


# -- the network on loopback ------------------------------------------------------------------------


class LoopbackNetwork:
    """The compose network mapped onto 127.0.0.1 for the services that run locally.

    Every (service, container port) that a local service binds gets a free loopback port;
    `environment` and `healthcheck_command` rewrite a service's configuration onto that map.
    """

    def __init__(
        self,
        project: ComposeProject,
        services: Sequence[str],
        *,
        standins: Mapping[str, str],
        otlp_endpoint: str | None = None,
    ) -> None:
        self.project = project
        self.services = list(services)
        self.standins = dict(standins)
        self.otlp_endpoint = otlp_endpoint
        wanted = [
            (name, port) for name in self.services for port in sorted(project.services[name].listen_ports)
        ]
        self.ports: dict[tuple[str, int], int] = dict(
            zip(wanted, free_loopback_ports(len(wanted)), strict=True)
        )
        hosts = sorted(project.services, key=len, reverse=True)
        self._host_port = re.compile(
            r"(?<![\w.-])(?P<host>" + "|".join(map(re.escape, hosts)) + r"):(?P<port>\d+)(?!\d)"
        )

    def address(self, service: str, container_port: int) -> str:
        """Where `service:container_port` of the compose network is reached here."""
        try:
            return f"{LOOPBACK}:{self.ports[(service, container_port)]}"
        except KeyError:
            raise ComposeError(f"{service} does not listen on {container_port} here") from None

    def environment(self, service: str) -> dict[str, str]:
        """The service's compose environment, rewritten for loopback."""
        localized: dict[str, str] = {}
        for key, value in self.project.services[service].environment.items():
            local = self._localize(service, key, value)
            if local is not None:
                localized[key] = local
        return localized

    def healthcheck_command(self, service: str) -> list[str]:
        """The service's compose healthcheck, aimed at its local ports and runnable here."""
        command = self.project.services[service].healthcheck_command
        if command is None:
            raise ComposeError(f"{service} has no healthcheck")
        return resolve_command([self._localize_references(service, "healthcheck", part) for part in command])

    def healthcheck_address(self, service: str) -> str:
        """The local address the service's healthcheck asks (its gRPC server)."""
        for part in self.healthcheck_command(service):
            if part.startswith(f"{LOOPBACK}:"):
                return part
        raise ComposeError(f"{service}'s healthcheck names no address")

    def _localize(self, service: str, key: str, value: str) -> str | None:
        if key == "OTEL_TRACES_EXPORTER":
            return "otlp" if self.otlp_endpoint else "none"
        if key.startswith("OTEL_EXPORTER_OTLP") and key.endswith("ENDPOINT"):
            return self.otlp_endpoint  # None drops it: nothing to export to
        if key.endswith("_HOST") and value in BIND_ALL_HOSTS:
            return LOOPBACK
        if key.endswith("_PORT"):
            return str(self.ports[(service, int(value))])
        if key.endswith("_URL"):
            host = urlsplit(value).hostname
            if host in self.standins:
                return self.standins[host]
        return self._localize_references(service, key, value)

    def _localize_references(self, service: str, key: str, value: str) -> str:
        def local(match: re.Match[str]) -> str:
            host, port = match["host"], int(match["port"])
            if host in self.standins:
                return urlsplit(self.standins[host]).netloc.rpartition("@")[2]
            if (host, port) not in self.ports:
                raise ComposeError(
                    f"{service}: {key}={value!r} names {host}:{port}, which no local service listens on "
                    f"(listening: {sorted(f'{h}:{p}' for h, p in self.ports)})"
                )
            return self.address(host, port)

        value = re.sub(r"(?<![\w.-])(?:127\.0\.0\.1|localhost):", f"{service}:", value)
        return self._host_port.sub(local, value)


# -- running the services ---------------------------------------------------------------------------


@dataclass
class ComposeProcesses:
    """The compose file's services running locally, by compose service name."""

    network: LoopbackNetwork
    processes: dict[str, ServiceProcess] = field(default_factory=dict)

    def __getitem__(self, name: str) -> ServiceProcess:
        return self.processes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.processes)

    @property
    def names(self) -> list[str]:
        return list(self.processes)

    def returncodes(self) -> dict[str, int | None]:
        return {name: process.returncode for name, process in self.processes.items()}

    def output(self) -> str:
        return "\n".join(
            process.describe("is running" if process.running else f"exited with code {process.returncode}")
            for process in self.processes.values()
        )


@contextlib.asynccontextmanager
async def run_compose_services(
    project: ComposeProject,
    *,
    log_dir: Path,
    standins: Mapping[str, str],
    otlp_endpoint: str | None = None,
    services: Sequence[str] | None = None,
    # A service's start as the harness bounds it (ServiceProcess.start): importing and migrating
    # takes a few CPU-seconds, which a machine loaded by other suites hands out slowly.
    start_timeout: float = 90.0,
    healthy_timeout: float = 30.0,
    stop_timeout: float = 15.0,
) -> AsyncIterator[ComposeProcesses]:
    """Starts the agentmesh services (or `services`) as processes in `depends_on` order and
    stops them in reverse order on exit.

    A wave starts once the services it depends on report SERVING on gRPC health, and the context
    is entered once every service's own compose healthcheck command has passed as well. (The
    commands run in the background while later waves start: each is a Python process of its own,
    and waiting for them wave by wave would double the start-up time.)
    """
    names = list(services or project.agentmesh_services())
    network = LoopbackNetwork(project, names, standins=standins, otlp_endpoint=otlp_endpoint)
    mesh = ComposeProcesses(network)
    waves = project.start_order(names)
    healthchecks: list[asyncio.Task[None]] = []
    try:
        for wave in waves:
            for name in wave:
                mesh.processes[name] = ServiceProcess(
                    name,
                    project.services[name].command,
                    env=network.environment(name),
                    log_dir=log_dir,
                    cwd=log_dir / name,
                    ready=ready_patterns(project.services[name].agentmesh_service),
                )
            await _gather_or_fail(
                [_start(mesh[name], network, start_timeout, healthy_timeout) for name in wave]
            )
            healthchecks += [
                asyncio.create_task(
                    wait_healthy(mesh[name], network.healthcheck_command(name), timeout=healthy_timeout)
                )
                for name in wave
            ]
        await _gather_or_fail(healthchecks)
        yield mesh
    except BaseException:
        logger.error("compose services at the failure:\n%s", mesh.output())
        raise
    finally:
        for task in healthchecks:
            task.cancel()
        await asyncio.gather(*healthchecks, return_exceptions=True)
        for wave in reversed(waves):
            await asyncio.gather(
                *(mesh[name].stop(timeout=stop_timeout) for name in wave if name in mesh.processes)
            )


async def _start(
    process: ServiceProcess, network: LoopbackNetwork, start_timeout: float, healthy_timeout: float
) -> None:
    await process.start(timeout=start_timeout)
    expected = network.healthcheck_address(process.name)
    if process.grpc_address != expected:
        raise ServiceProcessError(
            process.describe(
                f"serves gRPC on {process.grpc_address}, but its healthcheck (and so its peers) "
                f"expect it on {expected}: is its *_HOST/*_PORT configuration named right?"
            )
        )
    await process.wait_serving(timeout=healthy_timeout)


async def wait_healthy(process: ServiceProcess, command: Sequence[str], *, timeout: float) -> None:
    """Runs the compose healthcheck command, as the container engine would, until it passes."""
    last: list[str] = []

    async def passes() -> bool:
        if not process.running:
            raise ServiceProcessError(process.describe(f"exited with code {process.returncode}"))
        check = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=process.env
        )
        try:
            output, _ = await asyncio.wait_for(check.communicate(), HEALTHCHECK_ATTEMPT_SECONDS)
        except TimeoutError:
            check.kill()
            await check.wait()
            last[:] = [f"timed out after {HEALTHCHECK_ATTEMPT_SECONDS:g}s"]
            return False
        last[:] = [f"exit {check.returncode}: {output.decode(errors='replace').strip()}"]
        return check.returncode == 0

    try:
        await wait_until(passes, timeout=timeout, what=f"{process.name} healthcheck", interval=0.2)
    except TimeoutError as error:
        raise ServiceProcessError(
            process.describe(f"{error}; `{' '.join(command)}` last gave {last[0] if last else 'nothing'}")
        ) from None


async def _gather_or_fail(waits: Sequence[Awaitable[None]]) -> None:
    """Awaits all of them; the first failure is raised once all have finished (so that every
    started process is known, and stopped, by the caller)."""
    results = await asyncio.gather(*waits, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
