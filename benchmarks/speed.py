"""Speed benchmark: wall time, model calls and prompt-prefix reuse per question, side by side.

For each dataset (eval rows, open setting, the retriever ``ask`` uses) and each method, runs
``dynakrag eval`` with the disk LLM cache OFF on the embedded model and reports per question:
median and p90 wall time (and their ratio to ``naive``'s), LLM calls, prompt tokens sent, prompt
tokens the server actually evaluated (llama.cpp logs ``N prefix-match hit, remaining M prompt
tokens to eval`` per call: the rest came from the previous prompt's KV cache), their ratio
(prefix reuse), answer F1 and SR.

Before/after a change: run it once per code version with the same arguments and a ``--label``,
then ``--compare A.json B.json`` prints one table with both. To time an older commit, put a
worktree of it first on ``PYTHONPATH`` (this script only uses ``dynakrag.eval.runner.evaluate``).

    .venv/bin/python benchmarks/speed.py --limit 20 --label after
    PYTHONPATH=/tmp/wt-before .venv/bin/python benchmarks/speed.py --limit 20 --label before
    .venv/bin/python benchmarks/speed.py --compare \
        results/speed-before.json results/speed-after.json

Run it alone: two LLM-bound processes on 2 cores slow each other about 10x.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from runstore import fmt  # noqa: E402

RESULTS = _HERE / "results"
DATASETS = ("hotpotqa", "2wiki", "musique")
METHODS = ("naive", "dynakrag:heuristic", "dynakrag:learned", "ircot")
_PREFIX = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens")
_EVAL = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")


def server_log_tokens(text: str) -> tuple[int, int]:
    """(prompt tokens sent, prompt tokens evaluated) in a llama.cpp server log excerpt.

    A call with a prefix-match line sent ``hit + remaining`` tokens and evaluated
    ``remaining``; a call without one (nothing reusable) evaluated all it was sent.
    """
    sent = evaluated = 0
    pending_hit: int | None = None
    for line in text.splitlines():
        prefix = _PREFIX.search(line)
        if prefix:
            pending_hit = int(prefix.group(1))
            continue
        evaluation = _EVAL.search(line)
        if evaluation:
            tokens = int(evaluation.group(1))
            sent += tokens + (pending_hit or 0)
            evaluated += tokens
            pending_hit = None
    return sent, evaluated


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def run_method(dataset: str, spec: str, limit: int, log: Path | None) -> dict[str, Any]:
    from dynakrag.eval.runner import evaluate

    method, _, policy = spec.partition(":")
    options = {"policy": policy} if policy else None
    start = log.stat().st_size if log and log.exists() else 0
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        result = evaluate(
            dataset,
            "eval",
            "open",
            method,
            retriever=None,  # ask's (the configuration's); DS-RAG's methods their bm25
            limit=limit,
            out=Path(scratch) / "run.json",
            progress=True,
            method_options=options,
            cache=False,
            report=False,
        )
    seconds = time.perf_counter() - began
    records = result["questions"]
    n = len(records)
    sent = evaluated = None
    if log and log.exists():
        with log.open("rb") as handle:
            handle.seek(start)
            sent, evaluated = server_log_tokens(handle.read().decode("utf-8", "replace"))
    latencies = [float(r["latency_s"]) for r in records]
    return {
        "dataset": dataset,
        "method": spec,
        "n": n,
        "median_s": statistics.median(latencies) if latencies else None,
        "p90_s": _percentile(latencies, 0.9),
        "total_s": seconds,
        "llm_calls": sum(r["llm_calls"] for r in records) / max(n, 1),
        "prompt_tokens": sum(r["prompt_tokens"] for r in records) / max(n, 1),
        "server_prompt_tokens_sent": None if sent is None else sent / max(n, 1),
        "server_prompt_tokens_evaluated": None if evaluated is None else evaluated / max(n, 1),
        "prefix_reuse": None if not sent else 1 - evaluated / sent,
        "f1": result["summary"].get("f1"),
        "em": result["summary"].get("em"),
        "support_recall": result["summary"].get("support_recall"),
    }


def table(runs: list[dict[str, Any]]) -> str:
    """One markdown table: a row per (label, dataset, method), times as ratios to naive."""
    naive = {(r.get("label"), r["dataset"]): r["median_s"] for r in runs if r["method"] == "naive"}
    lines = [
        "| version | dataset | method | n | median s/q | x naive | p90 s/q | LLM calls | "
        "prompt tok sent | tok evaluated | prefix reuse | F1 | SR |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        base = naive.get((r.get("label"), r["dataset"]))
        ratio = r["median_s"] / base if base and r["median_s"] is not None else None
        lines.append(
            f"| {r.get('label', '')} | {r['dataset']} | {r['method']} | {r['n']} | "
            f"{fmt(r['median_s'], 1)} | {fmt(ratio, 2)} | {fmt(r['p90_s'], 1)} | "
            f"{fmt(r['llm_calls'], 2)} | {fmt(r['server_prompt_tokens_sent'], 0)} | "
            f"{fmt(r['server_prompt_tokens_evaluated'], 0)} | {fmt(r['prefix_reuse'], 2)} | "
            f"{fmt(r['f1'], 3)} | {fmt(r['support_recall'], 3)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--label", default="current")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", nargs="+", type=Path, help="result files to tabulate")
    args = parser.parse_args(argv)

    if args.compare:
        runs = [run for path in args.compare for run in json.loads(path.read_text())["runs"]]
        print(table(runs))
        return 0

    import dynakrag
    from dynakrag.configuration import Configuration
    from dynakrag.llm.factory import embedded_server_from_config

    print(f"dynakrag from {Path(dynakrag.__file__).parent}", file=sys.stderr)
    # The configured server (prompt cache included): the runs below join it.
    log = embedded_server_from_config(Configuration.from_env()).log_path
    out = args.out or RESULTS / f"speed-{args.label}.json"
    runs: list[dict[str, Any]] = []
    if out.exists():  # resumable: keep finished (dataset, method) pairs
        runs = json.loads(out.read_text())["runs"]
    done = {(r["dataset"], r["method"]) for r in runs}
    for dataset in args.datasets:
        for spec in args.methods:
            if (dataset, spec) in done:
                continue
            run = {"label": args.label, **run_method(dataset, spec, args.limit, log)}
            runs.append(run)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps({"label": args.label, "runs": runs}, indent=1) + "\n")
            print(table([run]).splitlines()[-1], file=sys.stderr, flush=True)
    print(table(runs))
    out.with_suffix(".md").write_text(table(runs) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
