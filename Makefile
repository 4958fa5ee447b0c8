# Two commands on a fresh machine: `make run` (set up, then the main job) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test lint bench

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,local]'
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(BIN)/workspace-agent

# Everything, the real local model included (the `local_model` marker is opt-in for plain `pytest`).
test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -m "local_model or not local_model"

bench: setup
	$(BIN)/python bench/turn_overhead.py
	$(BIN)/python bench/parallel_tools.py
	$(BIN)/python bench/long_thread.py
	$(BIN)/python bench/retrieval.py
	$(BIN)/python bench/local_model.py
	$(BIN)/python bench/prompted_digest.py
