"""The SDKs under sdks/ against a live mesh: `agentmesh up` as a process on free ports, with
examples/coordinator-worker.yaml applied by `agentmesh apply`, then each SDK's own test suite with
its own runner (`node --test` for TypeScript, `go test` for Go, `cargo test` for Rust, Maven
Surefire for Java). The
suites stream a delegating chat, ask for an unknown agent and page through a session
(sdks/*/README.md); they find the mesh through AGENTMESH_ADDRESS, AGENTMESH_EMAIL and
AGENTMESH_PASSWORD.

Also checks that the Go SDK's committed generated code matches protos/ (scripts/gen_sdks.sh).

Without node/npm, Go, cargo or Maven and a JDK the tests skip, except under CI=true, where they fail.
Cold caches download npm packages, Go modules, crates and Maven artifacts (from their registries and
the module proxy), hence the long timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e.harness import agentmesh_up, process_environment
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD
from tests.ports import free_loopback_ports

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TYPESCRIPT = ROOT / "sdks" / "typescript"
GO = ROOT / "sdks" / "go"
RUST = ROOT / "sdks" / "rust"
JAVA = ROOT / "sdks" / "java"
# Generous: a cold npm ci or Go module download, then the build, on a loaded machine.
TOOL_TIMEOUT = 480


def require(*tools: str) -> None:
    """Skips (fails under CI=true) unless every tool is on PATH."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        reason = f"{', '.join(missing)} needed for the SDK tests"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason} (required under CI=true)")
        pytest.skip(reason)


async def run(
    *command: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = TOOL_TIMEOUT
) -> tuple[int, str]:
    """Runs a command; its exit code and its output (stdout and stderr together)."""
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        env=process_environment(env or {}),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout=timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    return process.returncode or 0, output.decode(errors="replace")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mesh_environment(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, str]]:
    """`agentmesh up` with the coordinator/worker example applied; the SDK tests' environment."""
    tmp_path = tmp_path_factory.mktemp("sdk-mesh")
    http_port, grpc_port = free_loopback_ports(2)
    up = agentmesh_up(
        tmp_path, http_port=http_port, grpc_port=grpc_port, superuser=(SUPERUSER_EMAIL, SUPERUSER_PASSWORD)
    )
    environment = {
        "AGENTMESH_ADDRESS": f"127.0.0.1:{grpc_port}",
        "AGENTMESH_EMAIL": SUPERUSER_EMAIL,
        "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD,
    }
    async with up:
        code, output = await run(
            sys.executable,
            "-m",
            "agentmesh.cli.main",
            "apply",
            "-f",
            str(ROOT / "examples" / "coordinator-worker.yaml"),
            cwd=tmp_path,
            env={**environment, "AGENTMESH_GATEWAY_ADDRESS": environment["AGENTMESH_ADDRESS"]},
            timeout=60,
        )
        assert code == 0, output
        yield environment
    assert up.returncode == 0, up.output()


def installed(package_dir: Path) -> bool:
    """Whether node_modules holds exactly the versions package-lock.json pins."""
    installed_lock = package_dir / "node_modules" / ".package-lock.json"
    if not installed_lock.exists():
        return False
    pinned = json.loads((package_dir / "package-lock.json").read_text())["packages"]
    present = json.loads(installed_lock.read_text())["packages"]
    return all(
        present.get(name, {}).get("version") == entry.get("version") for name, entry in pinned.items() if name
    )


# The SDKs' toolchains are checked (and npm packages installed) before the mesh starts: module
# scope, listed before mesh_environment in each test, so that a skip costs no mesh.


@contextlib.contextmanager
def holding_typescript_folder() -> Iterator[None]:
    """Holds sdks/typescript for the caller across test processes: its suite builds there and the
    generation check installs into its node_modules, which a test in another pytest-xdist worker
    must not reinstall meanwhile (npm ci empties node_modules first)."""
    digest = hashlib.sha256(str(TYPESCRIPT).encode()).hexdigest()[:16]
    with (Path(tempfile.gettempdir()) / f"agentmesh-typescript-sdk-{digest}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def typescript_sdk() -> Path:
    require("node", "npm")
    with holding_typescript_folder():
        if not installed(TYPESCRIPT):
            npm_ci = ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
            result = subprocess.run(
                npm_ci, cwd=TYPESCRIPT, capture_output=True, text=True, timeout=TOOL_TIMEOUT, check=False
            )
            assert result.returncode == 0, result.stderr[-4000:]
    return TYPESCRIPT


@pytest.fixture
def typescript_folder() -> Iterator[None]:
    """sdks/typescript held for this test alone (`holding_typescript_folder`)."""
    with holding_typescript_folder():
        yield


@pytest.fixture(scope="module")
def go_sdk() -> Path:
    require("go")
    return GO


@pytest.fixture(scope="module")
def rust_sdk() -> Path:
    require("cargo")
    return RUST


@pytest.fixture(scope="module")
def java_sdk() -> Path:
    require("mvn", "javac")
    return JAVA


@pytest.mark.timeout(TOOL_TIMEOUT * 2)
@pytest.mark.asyncio(loop_scope="module")
async def test_the_typescript_sdk_passes_its_suite_against_a_live_mesh(
    typescript_sdk: Path, mesh_environment: dict[str, str], typescript_folder: None
) -> None:
    code, output = await run("npm", "test", cwd=typescript_sdk, env=mesh_environment)
    assert code == 0, output[-6000:]
    assert re.search(r"^# pass [1-9]", output, re.MULTILINE), output[-3000:]
    assert re.search(r"^# (fail|skipped) [1-9]", output, re.MULTILINE) is None, output[-3000:]


@pytest.mark.timeout(TOOL_TIMEOUT * 2)
@pytest.mark.asyncio(loop_scope="module")
async def test_the_go_sdk_passes_its_suite_against_a_live_mesh(
    go_sdk: Path, mesh_environment: dict[str, str]
) -> None:
    code, output = await run("go", "test", "-count=1", "-v", "./...", cwd=go_sdk, env=mesh_environment)
    assert code == 0, output[-6000:]
    assert "--- PASS: TestStreamChatDelegates" in output, output[-3000:]
    assert "--- SKIP" not in output, output[-3000:]


@pytest.mark.long(70)
# A cold build compiles tonic, hyper and tokio: minutes on a loaded two-core machine.
@pytest.mark.timeout(TOOL_TIMEOUT * 3)
@pytest.mark.asyncio(loop_scope="module")
async def test_the_rust_sdk_passes_its_suite_against_a_live_mesh(
    rust_sdk: Path, mesh_environment: dict[str, str]
) -> None:
    command = ("cargo", "test", "--locked", "--", "--nocapture")
    code, output = await run(*command, cwd=rust_sdk, env=mesh_environment, timeout=TOOL_TIMEOUT * 2)
    assert code == 0, output[-6000:]
    assert re.search(r"^test result: ok\. [1-9]\d* passed", output, re.MULTILINE), output[-3000:]
    assert "SKIPPED" not in output, output[-3000:]


@pytest.mark.long(24)
@pytest.mark.timeout(TOOL_TIMEOUT * 2)
@pytest.mark.asyncio(loop_scope="module")
async def test_the_java_sdk_passes_its_suite_against_a_live_mesh(
    java_sdk: Path, mesh_environment: dict[str, str]
) -> None:
    code, output = await run(
        "mvn", "--batch-mode", "--no-transfer-progress", "verify", cwd=java_sdk, env=mesh_environment
    )
    assert code == 0, output[-6000:]
    summary = re.search(
        r"Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+)\s*$", output, re.MULTILINE
    )
    assert summary is not None, output[-3000:]
    run_count, *failed = (int(group) for group in summary.groups())
    assert run_count >= 5 and failed == [0, 0, 0], output[-3000:]


@pytest.mark.timeout(TOOL_TIMEOUT)
async def test_the_go_sdks_committed_code_matches_the_protos(
    typescript_sdk: Path, go_sdk: Path, typescript_folder: None
) -> None:
    code, output = await run(str(ROOT / "scripts" / "gen_sdks.sh"), "--check", cwd=ROOT)
    assert code == 0, output[-6000:]
