# `make demo` and `make test` set everything up on a fresh machine (idempotent, fast when done).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.dynakrag-installed
# llama.cpp CPU backend variants built beside the portable one (scripts/install-llama-cpp.sh).
LLAMA_CPU_VARIANTS ?= zen4
# llama.cpp's -march=native build crashed on these machines (an AMX code path): the embedded
# generator is built by scripts/install-llama-cpp.sh with dynamic CPU backends instead (portable
# AVX2 plus an AVX-512 variant, the best one this CPU runs is loaded at run time). Should any
# other step rebuild llama-cpp-python, it builds the portable code.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
export DYNAKRAG_DATA_DIR ?= $(abspath ../shared/data)
export LANGGRAPH_CLI_NO_ANALYTICS := 1
export LANGGRAPH_NO_VERSION_CHECK := true
export LANGSMITH_TRACING := false

.PHONY: setup demo test lint studio clean default-policy default-selector

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml scripts/install-llama-cpp.sh | $(PY)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned: an unpinned resolve pulls gigabytes of CUDA wheels.
	$(PY) -m pip install -q "torch==2.13.0"
	bash scripts/install-llama-cpp.sh $(PY) $(LLAMA_CPU_VARIANTS)
	$(PY) -m pip install -q -e ".[embedded,studio,postgres,scale,dev]"
	touch $(STAMP)

setup: $(STAMP)

# The demo follows its chain hop by hop (docs/chain.md): the library's default
# (sub_question_answering chain, max_steps 16, max_retrieval_calls 10).
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

# The shipped learned policy (issues #13, #24, #32): exploration rollouts with branching on a
# stratified sample of POLICY_SAMPLE train questions per dataset (question type x hop count;
# splits.json's train rows, never an eval row) of HotpotQA, 2Wiki and MuSiQue, open setting
# over the pool of ALL of a dataset's train questions, plus POLICY_DEMO_SAMPLE questions of the
# demo worlds of the training seeds (dynakrag.data.demo.TRAINING_WORLD_SEEDS; never the shipped
# or held-out worlds), each searching its own world. The library's default graph (the chain),
# the retriever `ask` uses by default, the configured generator (the embedded model), the
# paper's support-recall labels (no answers in branches), 1 rollout, seed 13; then the forests.
# Collection cost and levers: docs/collection.md. Each collect resumes a killed run where it
# stopped, continues from the shipped records (--resume-from: their finished questions of the
# same settings, the controller's included, are copied, not collected again; a larger sample
# adds only new questions) and reads the disk LLM cache, so a rerun only refits. The records
# ship next to the policy (lines sorted, gzip -n: the same records give the same bytes) and
# the policy is fitted from that file.
POLICY_RUNS := runs/default-policy
POLICY_SETS := hotpotqa 2wiki musique
POLICY_SAMPLE := 200
POLICY_DEMO_SAMPLE := 100
POLICY_FILE := dynakrag/policy/models/default_policy.npz
POLICY_RECORDS := dynakrag/policy/models/default_policy.records.jsonl.gz
POLICY_COLLECT := --split train --labels recall --rollouts 1 --seed 13 \
  --resume-from $(POLICY_RECORDS)
default-policy: setup
	mkdir -p $(POLICY_RUNS)
	for dataset in $(POLICY_SETS); do \
	  $(VENV)/bin/dynakrag collect --dataset $$dataset --setting open --sample $(POLICY_SAMPLE) \
	    $(POLICY_COLLECT) --out $(POLICY_RUNS)/$$dataset.jsonl || exit 1; \
	done
	$(VENV)/bin/dynakrag collect --dataset demo --setting distractor \
	  --sample $(POLICY_DEMO_SAMPLE) $(POLICY_COLLECT) --out $(POLICY_RUNS)/demo.jsonl
	$(VENV)/bin/dynakrag pack-records $(foreach d,$(POLICY_SETS) demo,$(POLICY_RUNS)/$(d).jsonl) \
	  --out $(POLICY_RECORDS)
	$(VENV)/bin/dynakrag train --trajectories $(POLICY_RECORDS) --seed 13 --out $(POLICY_FILE)

# The shipped DICS selection model: all DS-RAG train rows, rule criteria, seed 13.
default-selector: setup
	$(VENV)/bin/dynakrag train-selector --seed 13 --out dynakrag/dsrag/models/gs-selector.npz

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .import_linter_cache .langgraph_api
