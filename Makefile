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

.PHONY: setup demo test lint studio clean default-policy default-selector

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

# Style, formatting and the architecture contract ([tool.importlinter] in pyproject.toml).
lint: setup
	$(VENV)/bin/ruff check dynakrag tests benchmarks
	$(VENV)/bin/ruff format --check dynakrag tests benchmarks
	$(VENV)/bin/lint-imports --no-logo

studio: setup
	$(VENV)/bin/langgraph dev --no-browser

# The shipped learned policy: exploration rollouts on TRAIN rows (open setting, dense retrieval,
# embedded model, seed 13), then the random forests. Hours on 2 CPU cores; the disk LLM cache
# makes a rerun on the same machine fast.
POLICY_RUNS := runs/default-policy
POLICY_SETS := hotpotqa:40 2wiki:20 musique:20
default-policy: setup
	mkdir -p $(POLICY_RUNS)
	for spec in $(POLICY_SETS); do \
	  set -- $$(echo $$spec | tr : ' '); \
	  $(VENV)/bin/dynakrag collect --dataset $$1 --split train --setting open --limit $$2 \
	    --rollouts 2 --seed 13 --out $(POLICY_RUNS)/$$1.jsonl || exit 1; \
	done
	$(VENV)/bin/dynakrag train --trajectories $(POLICY_RUNS)/*.jsonl --seed 13 \
	  --out dynakrag/policy/models/default_policy.npz

# The shipped DICS selection model: all DS-RAG train rows, rule criteria, seed 13.
default-selector: setup
	$(VENV)/bin/dynakrag train-selector --seed 13 --out dynakrag/dsrag/models/gs-selector.npz

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .import_linter_cache .langgraph_api
