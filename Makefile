# Two entry points for a fresh machine: `make demo` and `make test`.
# Every target installs what it needs, idempotently (stamp files under .stamps/).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMPS := .stamps
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install models demo test test-fast lint format bench clean node

install: $(STAMPS)/venv $(STAMPS)/node

# torch is pinned to the CPU build that ships on this kind of machine; the Triton
# server binary comes from the nvidia-pytriton wheel without its numpy<2 pin.
$(STAMPS)/venv: pyproject.toml constraints.txt
	@mkdir -p $(STAMPS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -c constraints.txt -e ".[async,local,infra,dev]"
	$(PY) -m pip install -q --no-deps "nvidia-pytriton==0.7.0"
	# Its python-backend stub is built against numpy 1.x (empty outputs with numpy 2);
	# tritonserver runs in this folder, first on the stub's sys.path (deploy/local/triton/install.py).
	$(PY) -m pip install -q --no-deps --upgrade --target $(VENV)/triton-stub-site "numpy<2"
	touch $@

$(STAMPS)/node: package.json $(wildcard package-lock.json)
	@mkdir -p $(STAMPS)
	if [ -f package-lock.json ]; then npm ci --no-audit --no-fund --loglevel=error; else npm install --no-audit --no-fund --loglevel=error; fi
	touch $@

node: $(STAMPS)/node

# Model weights are generated, never committed.
models: $(STAMPS)/venv
	$(PY) -m model_packages.generate
	$(PY) -m model_packages.neuron.generate

demo: install models
	$(PY) -m deploy.demo

test: install models
	$(BIN)/pytest tests

test-fast: install models
	$(BIN)/pytest -q -m "not slow" tests

lint: $(STAMPS)/venv
	$(BIN)/ruff check deploy deploy_infra deploy_handlers tests bench model_packages tools
	$(BIN)/ruff format --check deploy deploy_infra deploy_handlers tests bench tools
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(PY) tools/mode_names.py deploy deploy_infra
	$(PY) tools/private_imports.py deploy deploy_infra deploy_handlers bench tools

format: $(STAMPS)/venv
	$(BIN)/ruff format deploy deploy_infra deploy_handlers tests bench tools
	$(BIN)/ruff check --fix deploy deploy_infra deploy_handlers tests bench tools

bench: install models
	$(PY) bench/package.py
	$(PY) bench/codec.py
	$(PY) bench/local_endpoint.py
	$(PY) bench/soak_local_endpoint.py
	$(PY) bench/load_generator.py
	$(PY) bench/client.py
	$(PY) bench/front_door.py
	$(PY) bench/adapter_batching.py
	$(PY) bench/neuron_batching.py
	$(PY) bench/lifecycle.py
	$(PY) bench/async_round_trip.py

clean:
	rm -rf $(STAMPS) cdk.out build dist .pytest_cache .mypy_cache .ruff_cache
