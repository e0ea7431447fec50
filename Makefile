# `make demo` and `make test` set everything up on a fresh machine (idempotent, fast when done).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.dynakrag-installed
# llama.cpp's native build crashes on these machines (AMX code path): build portable code.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
export DYNAKRAG_DATA_DIR ?= $(abspath ../shared/data)
export LANGGRAPH_CLI_NO_ANALYTICS := 1
export LANGGRAPH_NO_VERSION_CHECK := true
export LANGSMITH_TRACING := false

.PHONY: setup demo test lint studio clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned: an unpinned resolve pulls gigabytes of CUDA wheels.
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[embedded,studio,dev]"
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(VENV)/bin/dynakrag demo

test: setup
	$(PY) -m pytest -q

lint: setup
	$(VENV)/bin/ruff check dynakrag tests benchmarks

studio: setup
	$(VENV)/bin/langgraph dev --no-browser

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .langgraph_api
