"""Chain following on real multi-hop data: the graph before and after hop-by-hop resolution.

Reads finished ``dynakrag eval`` runs (their JSON), one per method and dataset, and puts them
side by side: EM and F1 with bootstrap 95% intervals, final-evidence support recall, retrieval
and LLM calls, prompt tokens and seconds per question, the abstention rate, and for MuSiQue the
F1 by hop count (its ids start with ``2hop`` / ``3hop`` / ``4hop``). Nothing is fitted or tuned
here; the runs are eval rows, scored by the runner.

The runs are made with the CLI (each one resumable: rerun the same command after a cut), e.g.::

    export DYNAKRAG_DATA_DIR=/work/shared/data
    dynakrag eval --method naive --dataset musique --setting open --limit 60 \\
        --out R/musique-naive.json
    DYNAKRAG_SUB_QUESTION_ANSWERING=chain DYNAKRAG_MAX_STEPS=16 DYNAKRAG_MAX_RETRIEVAL_CALLS=10 \\
        dynakrag eval --method dynakrag --dataset musique --setting open --limit 60 \\
        --out R/musique-chain.json
    # "before": the same dynakrag command from a checkout of the commit before the change
    # (benchmarks/chain_real_data_queue.sh runs all four per dataset, resumable)

then::

    .venv/bin/python benchmarks/chain_real_data.py --runs-dir R --name chain-real-data \\
        --store benchmarks/results/chain-real-runs

``--store`` keeps a copy of each run and each unfinished run's journal with the dataset's text
blanked (ids, predictions, metrics and the hops' plan kept): a later session copies the
journals back beside ``--out`` and reruns the same commands to finish them.

Writes ``benchmarks/results/<name>.json``, ``.md`` and ``.png`` (F1 with its interval per method
and dataset).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from runstore import fmt  # noqa: E402

RESULTS = _HERE / "results"
DATASETS = ("musique", "hotpotqa", "2wiki")
METHODS = (
    "naive",
    "before",
    "chain",
    "chain-read",
    "chain-read-hybrid",
    "learned",
    "naive-gold",
    "chain-read-gold",
)
LABELS = {
    "naive": "naive (top-5, one reader call)",
    "before": "graph before (joint sub-questions, 4 steps)",
    "chain": "graph, chain, incomplete_chain=abstain",
    "chain-read": "graph, chain, incomplete_chain=read",
    "chain-read-hybrid": "graph, chain, read, hybrid retriever",
    "learned": "graph, chain, read, --policy learned (the forest of the run's commit)",
    "naive-gold": "naive over the gold paragraphs only (reading's upper bound)",
    "chain-read-gold": "graph, chain, read, over the gold paragraphs only",
}
PAIRS = (
    ("chain-read", "before"),
    ("chain-read", "naive"),
    ("chain-read-hybrid", "chain-read"),
    ("learned", "chain-read"),
    ("learned", "naive"),
)
"""Methods compared question by question (paired bootstrap of the F1 difference)."""
HOP_ID = re.compile(r"^(\d)hop")


def bootstrap_interval(
    values: Sequence[float], *, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the mean over ``resamples`` resamples."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def _mean(records: Sequence[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in records if isinstance(r.get(key), int | float)]
    return float(np.mean(values)) if values else None


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One row: n, EM, F1 (with interval), SR, calls, tokens, seconds, abstentions."""
    f1 = [float(r["f1"]) for r in records if isinstance(r.get("f1"), int | float)]
    low, high = bootstrap_interval(f1)
    return {
        "n": len(records),
        "em": _mean(records, "em"),
        "f1": _mean(records, "f1"),
        "f1_low": low,
        "f1_high": high,
        "support_recall": _mean(records, "support_recall"),
        "retrieval_calls": _mean(records, "retrieval_calls"),
        "llm_calls": _mean(records, "llm_calls"),
        "prompt_tokens": _mean(records, "prompt_tokens"),
        "seconds": _mean(records, "latency_s"),
        "abstain_rate": _mean(records, "abstained"),
    }


def paired_difference(
    first: Sequence[dict[str, Any]], second: Sequence[dict[str, Any]], *, seed: int = 0
) -> dict[str, Any] | None:
    """F1 of ``first`` minus ``second`` over the questions both answered: the mean and its
    bootstrap 95% interval (questions resampled together, so the pairing is kept)."""
    by_id = {r["id"]: r for r in second if isinstance(r.get("f1"), int | float)}
    diffs = [
        float(r["f1"]) - float(by_id[r["id"]]["f1"])
        for r in first
        if r["id"] in by_id and isinstance(r.get("f1"), int | float)
    ]
    if not diffs:
        return None
    low, high = bootstrap_interval(diffs, seed=seed)
    return {"n": len(diffs), "difference": float(np.mean(diffs)), "low": low, "high": high}


def paired_rows(runs_dir: Path, datasets: Sequence[str]) -> list[dict[str, Any]]:
    """:func:`paired_difference` of each pair of :data:`PAIRS` whose two runs exist."""
    rows = []
    for dataset in datasets:
        for first, second in PAIRS:
            paths = [runs_dir / f"{dataset}-{method}.json" for method in (first, second)]
            if not all(path.is_file() for path in paths):
                continue
            found = paired_difference(*(load_run(path)["questions"] for path in paths))
            if found is not None:
                rows.append({"dataset": dataset, "first": first, "second": second, **found})
    return rows


def hop_count(record: dict[str, Any]) -> int | None:
    """MuSiQue's hop count from its id (``3hop1__...``); None for other datasets."""
    match = HOP_ID.match(str(record.get("id", "")))
    return int(match.group(1)) if match else None


def load_run(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or "questions" not in data:
        raise SystemExit(f"{path} is not a dynakrag eval run (no 'questions')")
    return data


def collect_rows(runs_dir: Path, datasets: Sequence[str], methods: Sequence[str]) -> list[dict]:
    """One row per (dataset, method, group) for the runs found in ``runs_dir``; groups are
    ``all`` and, for MuSiQue, each hop count."""
    rows: list[dict[str, Any]] = []
    for dataset in datasets:
        for method in methods:
            path = runs_dir / f"{dataset}-{method}.json"
            if not path.is_file():
                print(f"missing: {path} (skipped)", file=sys.stderr)
                continue
            run = load_run(path)
            records = run["questions"]
            groups: dict[str, list[dict[str, Any]]] = {"all": records}
            for record in records:
                hops = hop_count(record)
                if hops is not None:
                    groups.setdefault(f"{hops}-hop", []).append(record)
            meta = run.get("meta", {})
            for group, members in sorted(groups.items(), key=lambda item: item[0] != "all"):
                rows.append(
                    {
                        "dataset": dataset,
                        "method": method,
                        "group": group,
                        "git_commit": str(meta.get("git_commit", ""))[:7],
                        "retriever": meta.get("retriever"),
                        **summarise(members),
                    }
                )
    return rows


def strip_record(record: dict[str, Any]) -> dict[str, Any]:
    """A question record without the dataset's text: the question, gold answers and passage
    texts blanked, hop sentences and the step trace left out; ids, the prediction, metrics,
    calls and the hops' plan and answers kept. Still a valid eval record, so a stored journal
    resumes a run."""
    out = dict(record)
    out["question"] = ""
    out["gold_answers"] = []
    out["evidence"] = [
        {"id": e.get("id", ""), "title": "", "text": ""} for e in record.get("evidence", [])
    ]
    details = dict(record.get("details") or {})
    details.pop("trace", None)
    details["hops"] = [
        {k: v for k, v in hop.items() if k not in ("sentence", "via_sentences")}
        for hop in details.get("hops") or []
    ]
    out["details"] = details
    return out


def store_runs(runs_dir: Path, store: Path) -> list[Path]:
    """Copy every run (``*.json``) and journal (``*.partial.jsonl``) of ``runs_dir`` into
    ``store`` with :func:`strip_record` applied: committed, a later session resumes from them."""
    store.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(runs_dir.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "questions" not in data:
            continue
        data["questions"] = [strip_record(r) for r in data["questions"]]
        target = store / path.name
        target.write_text(json.dumps(data, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(target)
    for path in sorted(runs_dir.glob("*.partial.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines()
        kept = lines[:1]
        for line in lines[1:]:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a crash: its question is redone
            entry["value"] = strip_record(entry["value"])
            kept.append(json.dumps(entry, ensure_ascii=False))
        target = store / path.name
        target.write_text("\n".join(kept) + "\n", encoding="utf-8")
        written.append(target)
    return written


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    header = (
        "| dataset | group | method | commit | n | EM | F1 | F1 95% CI | SR | retr. | LLM | "
        "prompt tok | s/q | abstain |"
    )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for row in rows:
        lines.append(
            "| "
            + " | ".join(
                [
                    row["dataset"],
                    row["group"],
                    LABELS.get(row["method"], row["method"]),
                    row["git_commit"],
                    str(row["n"]),
                    fmt(row["em"]),
                    fmt(row["f1"]),
                    f"[{fmt(row['f1_low'])}, {fmt(row['f1_high'])}]",
                    fmt(row["support_recall"]),
                    fmt(row["retrieval_calls"], 2),
                    fmt(row["llm_calls"], 2),
                    fmt(row["prompt_tokens"], 0),
                    fmt(row["seconds"], 1),
                    fmt(row["abstain_rate"], 2),
                ]
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [row for row in rows if row["group"] == "all" or row["dataset"] == "musique"]
    groups = list(dict.fromkeys(f"{row['dataset']}\n{row['group']}" for row in shown))
    methods = list(dict.fromkeys(row["method"] for row in shown))
    width = 0.8 / max(1, len(methods))
    fig, axis = plt.subplots(figsize=(max(6, 1.4 * len(groups)), 4))
    for index, method in enumerate(methods):
        xs, ys, errors = [], [], [[], []]
        for row in shown:
            if row["method"] != method or row["f1"] is None:
                continue
            x = groups.index(f"{row['dataset']}\n{row['group']}") + index * width
            xs.append(x)
            ys.append(row["f1"])
            errors[0].append(max(0.0, row["f1"] - row["f1_low"]))
            errors[1].append(max(0.0, row["f1_high"] - row["f1"]))
        axis.bar(xs, ys, width, yerr=errors, capsize=3, label=LABELS.get(method, method))
    axis.set_xticks([i + width * (len(methods) - 1) / 2 for i in range(len(groups))], groups)
    axis.set_ylabel("F1 (bootstrap 95% CI)")
    axis.set_ylim(0, 1)
    axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-dir", type=Path, required=True, help="where the run JSONs are")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--name", default="chain-real-data")
    parser.add_argument(
        "--store",
        type=Path,
        default=None,
        help="also copy the runs and journals, dataset text blanked, into this folder",
    )
    args = parser.parse_args(argv)
    if args.store is not None:
        for path in store_runs(args.runs_dir, args.store):
            print(f"stored {path}", file=sys.stderr)
    rows = collect_rows(args.runs_dir, args.datasets, args.methods)
    if not rows:
        raise SystemExit(f"no runs found in {args.runs_dir}")
    table = markdown(rows)
    pairs = paired_rows(args.runs_dir, args.datasets)
    if pairs:
        table += (
            "\nPaired F1 differences (same questions; bootstrap 95% interval):\n\n"
            "| dataset | difference | n | F1 difference | 95% CI |\n|---|---|---|---|---|\n"
        )
        table += "".join(
            f"| {p['dataset']} | {p['first']} - {p['second']} | {p['n']} | "
            f"{fmt(p['difference'])} | [{fmt(p['low'])}, {fmt(p['high'])}] |\n"
            for p in pairs
        )
    print(table)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{args.name}.json").write_text(
        json.dumps({"rows": rows, "paired": pairs}, indent=1, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    (args.out_dir / f"{args.name}.md").write_text(
        "# Chain following on real data (first eval rows, open setting)\n\n" + table,
        encoding="utf-8",
    )
    plot(rows, args.out_dir / f"{args.name}.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
