#!/bin/bash
# The runs benchmarks/chain_real_data.py puts side by side, one model client at a time.
# Rerun to resume: each run journals beside its --out, finished runs are skipped.
#   RUNS=dir BEFORE=checkout-of-4ea2133 benchmarks/chain_real_data_queue.sh musique hotpotqa 2wiki
# To continue from the committed journals first: cp benchmarks/results/chain-real-runs/* "$RUNS"/
set -u
RUNS=${RUNS:?set RUNS to the runs folder}
BEFORE=${BEFORE:?set BEFORE to a checkout of the graph before the change (4ea2133)}
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-$REPO/.venv/bin/python}
export DYNAKRAG_DATA_DIR=${DYNAKRAG_DATA_DIR:-$REPO/../shared/data}
mkdir -p "$RUNS"
METHODS=${METHODS:-chain chain-read naive before}  # also: chain-read-hybrid learned naive-gold chain-read-gold
ev() {  # directory, extra environment, dataset, method, name[, setting]
  (cd "$1" && env PYTHONPATH="$1" $2 "$PY" -m dynakrag.cli eval --dataset "$3" --split eval \
    --setting "${6:-open}" --limit 60 --method "$4" --out "$RUNS/$5.json")
}
CHAIN="DYNAKRAG_SUB_QUESTION_ANSWERING=chain DYNAKRAG_MAX_STEPS=16 DYNAKRAG_MAX_RETRIEVAL_CALLS=10"
READ="$CHAIN DYNAKRAG_INCOMPLETE_CHAIN=read"
for ds in "$@"; do
  for m in $METHODS; do
    [ -f "$RUNS/$ds-$m.json" ] && { echo "done: $ds-$m"; continue; }
    echo "== $(date +%T) $ds $m"
    case $m in
      chain) ev "$REPO" "$CHAIN DYNAKRAG_INCOMPLETE_CHAIN=abstain" "$ds" dynakrag "$ds-chain" ;;
      chain-read) ev "$REPO" "$READ" "$ds" dynakrag "$ds-chain-read" ;;
      chain-read-hybrid) ev "$REPO" "$READ DYNAKRAG_RETRIEVER=hybrid" "$ds" dynakrag "$ds-$m" ;;
      learned) ev "$REPO" "$READ DYNAKRAG_POLICY=learned" "$ds" dynakrag "$ds-$m" ;;
      chain-read-gold) ev "$REPO" "$READ" "$ds" dynakrag "$ds-$m" gold ;;
      naive) ev "$REPO" "" "$ds" naive "$ds-naive" ;;
      naive-gold) ev "$REPO" "" "$ds" naive "$ds-$m" gold ;;
      before) ev "$BEFORE" "" "$ds" dynakrag "$ds-before" ;;
      *) echo "unknown method $m"; false ;;
    esac || echo "FAILED $ds $m"
  done
done
