# Two commands set everything up on a fresh machine with Python 3.11+:
#   make run    install (uv, then the whole workspace into .venv) and start `agentmesh up`
#   make test   install, then lint, the import contracts, the proto checks and the whole test suite
# `make run ARGS="--http-port 8081"` passes flags to `agentmesh up`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# uv manages the workspace (one lock, uv.lock). When it is not on PATH it is installed from PyPI
# into .tools/, pinned.
UV_VERSION := 0.13.8
UV := $(or $(shell command -v uv 2>/dev/null),.tools/bin/uv)
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(VENV)

.PHONY: run test bytecode lint imports protos check-protos buf-lint install clean bench bench-smoke soak chaos

.tools/bin/uv:
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet 'uv==$(UV_VERSION)'

# Bytecode is compiled at install (`--compile-bytecode`) and, for the workspace's own editable
# sources, before each test run (`bytecode`): every Python process the suite starts (services,
# CLIs, the fault tests' meshes) then loads it instead of compiling ~17 MB of source, a few
# CPU-seconds a process where the environment forbids writing it at import
# (PYTHONDONTWRITEBYTECODE; docs/decisions/0053).
$(STAMP): $(UV) pyproject.toml uv.lock $(wildcard services/*/pyproject.toml)
	$(UV) sync --locked --quiet --compile-bytecode --python $(PYTHON)
	touch $(STAMP)

bytecode: $(STAMP)
	$(BIN)/python -m compileall -q -j 0 services src tests bench scripts

# MCP servers nobody here wrote, that the executor's MCP client is tested against (tests/mcp/):
# installed from the lock file here, never fetched by a test.
MCP_SERVERS := tests/mcp/node_modules/.package-lock.json
$(MCP_SERVERS): tests/mcp/package-lock.json
	npm ci --prefix tests/mcp --no-audit --no-fund --loglevel=error

install: $(STAMP) $(MCP_SERVERS)

run: $(STAMP)
	$(BIN)/agentmesh up $(ARGS)

protos: $(STAMP)
	$(BIN)/python scripts/gen_protos.py

check-protos: $(STAMP)
	$(BIN)/python scripts/gen_protos.py --check

buf-lint:
	scripts/buf.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The architecture's rules (docs/architecture.md): services reach each other only through their
# `client` module and `v1` stubs; runtime knows no service.
imports: $(STAMP)
	$(BIN)/lint-imports

# The suite's tests mostly wait (on servers, processes, PostgreSQL), so they run side by side in
# more workers than there are cores (pytest-xdist); each worker starts its own PostgreSQL server.
# Work stealing: an idle worker takes half of a busy one's queue, so the slow end-to-end and fault
# tests at the front of the collection do not all land on one worker (docs/decisions/0019).
# The slowest tests are listed at the end. `make test PYTEST_ARGS="tests/unit -n 0"` narrows it.
TEST_WORKERS ?= 4
PYTEST_ARGS ?=
# The Node.js client that tests the public gRPC API from another language (tests/node/).
NODE_CLIENT := tests/node/node_modules/.package-lock.json
$(NODE_CLIENT): tests/node/package-lock.json
	npm ci --prefix tests/node --no-audit --no-fund --loglevel=error

# PYTHONDONTWRITEBYTECODE emptied (Python reads an empty value as unset): the workers then keep
# pytest's assertion-rewritten test modules, which halves each worker's collection.
test: $(STAMP) $(NODE_CLIENT) $(MCP_SERVERS) lint imports check-protos buf-lint bytecode
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal --durations=25 $(PYTEST_ARGS)

# Benchmarks against PostgreSQL (bench/, docs/performance.md): `bench` takes a few minutes and
# writes bench/results/latest.json; `bench-smoke` only checks that every figure is produced.
bench: $(STAMP)
	$(BIN)/python -m bench

bench-smoke: $(STAMP)
	$(BIN)/python -m bench --smoke

# An hour of steady streaming chats on the mesh as processes (bench/soak.py), judged for leaks,
# latency drift and runs left behind; `make soak ARGS="--minutes 10"` for a shorter one. Its
# three-minute version runs in `make test` (tests/faults/test_soak.py).
soak: $(STAMP)
	$(BIN)/python -m bench.soak $(ARGS)

# Ten minutes of chats while a seeded random schedule kills and stalls executors, gateways, memory,
# the registry and PostgreSQL (bench/chaos.py); `make chaos ARGS="--seed 7"` replays a schedule.
chaos: $(STAMP)
	$(BIN)/python -m bench.chaos $(ARGS)

# The SDKs under sdks/ (docs/sdks.md): `sdks` regenerates them (the Go SDK's generated code is
# committed), `check-sdks` fails when that code drifts from protos/. tests/e2e/test_sdks.py runs both
# SDKs' suites against a live mesh and the drift check as part of `make test`.
.PHONY: sdks check-sdks
sdks:
	scripts/gen_sdks.sh

check-sdks:
	scripts/gen_sdks.sh --check

clean:
	rm -rf $(VENV) .tools .pytest_cache
