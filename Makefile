# Two commands set everything up on a fresh machine with Python 3.11+:
#   make run    create .venv, install, start `agentmesh up`
#   make test   create .venv, install, run lint, the proto checks and the whole test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint protos check-protos buf-lint install clean bench bench-smoke

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/agentmesh up

protos: $(STAMP)
	$(BIN)/python scripts/gen_protos.py

check-protos: $(STAMP)
	$(BIN)/python scripts/gen_protos.py --check

buf-lint:
	scripts/buf.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: $(STAMP) lint check-protos buf-lint
	$(BIN)/pytest

# Benchmarks against PostgreSQL (bench/, docs/performance.md): `bench` takes a few minutes and
# writes bench/results/latest.json; `bench-smoke` only checks that every figure is produced.
bench: $(STAMP)
	$(BIN)/python -m bench

bench-smoke: $(STAMP)
	$(BIN)/python -m bench --smoke

clean:
	rm -rf $(VENV) .pytest_cache
