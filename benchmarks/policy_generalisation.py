"""Generalisation of the learned controller, judged from collected records alone.

No model and no retriever run here: every number comes from the training records that
``dynakrag collect`` wrote (issue #13, item 4; #32's learning curve). Three checks:

Leave one dataset out
    For each dataset D in the records, the forests are fitted on the other datasets' questions
    and judged on D's (is what the controller learned on HotpotQA and MuSiQue any use on
    2Wiki?).
Training-set size
    The questions are split once (seeded) into a train pool and ``--holdout`` held-out
    questions; the forests are fitted on the first 25 / 50 / 100 % of the pool (nested
    subsets, ``--fractions``) and judged on the same held-out questions.
Generated worlds
    When the records hold generated demo worlds (``collect --dataset demo``) and a real
    dataset: the same split and fractions, fitted with and without the worlds' questions,
    judged on the real datasets' held-out questions (do the worlds still help?).

Judged on the held-out questions' records by
    * label error: mean absolute error and R² of the value model on the held-out labels (per
      action in the JSON, overall in the tables) and of the continuation model;
    * offline replay (:func:`dynakrag.training.offline.replay_on_records`): the fitted policy
      walks each held-out question's recorded tree; SR is the support recall it reached, F1 the
      answer F1 where it answered on the tree, "on tree" the share of walks that did, and
      retrieval calls per question. The heuristic (the rollouts' behaviour policy, which
      favours it: its own choices are always recorded) walks the same trees for reference.

Writes ``<out-dir>/<name>.json`` (every number) and ``<name>.md`` (the two tables).

    .venv/bin/python benchmarks/policy_generalisation.py  # the shipped training records
    .venv/bin/python benchmarks/policy_generalisation.py --records runs/default-policy/*.jsonl
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dynakrag.eval.runner import git_commit
from dynakrag.files import json_safe, write_json, write_text_atomic
from dynakrag.policy.features import FEATURE_SCHEMA_VERSION
from dynakrag.policy.heuristic import HeuristicPolicy
from dynakrag.training.fit import fit_policy, prediction_errors, training_set
from dynakrag.training.offline import replay_on_records
from dynakrag.training.records import read_records

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from runstore import fmt  # noqa: E402

_REPO = Path(__file__).resolve().parent.parent
DEFAULT_RECORDS = _REPO / "dynakrag" / "policy" / "models" / "default_policy.records.jsonl.gz"
RESULTS = _REPO / "benchmarks" / "results"
FRACTIONS = (0.25, 0.5, 1.0)
GENERATED = "demo"
"""The dataset name of the generated demo worlds' records (``dynakrag collect --dataset demo``)."""
Question = tuple[str, str]


def _question(record: Mapping[str, Any]) -> Question:
    return (str(record.get("dataset", "")), str(record.get("example_id", "")))


def judge(
    train: Sequence[Mapping[str, Any]],
    test: Sequence[Mapping[str, Any]],
    *,
    n_estimators: int,
    min_samples_leaf: int,
    seed: int,
    feature_version: int,
) -> dict[str, Any]:
    """Fit on ``train`` (no inner hold-out), judge on ``test``: label errors and replay."""
    policy, _ = fit_policy(
        train,
        n_estimators=n_estimators,
        min_samples_leaf=min_samples_leaf,
        random_state=seed,
        holdout=0.0,
        progress=False,
        feature_version=feature_version,
    )
    errors = prediction_errors(
        policy.value_model, policy.continuation_model, training_set(test, feature_version)
    )
    # Packed records (dynakrag pack-records) carry no state to walk: no replay, not zeros.
    replayable = any("state" in r for r in test)
    learned = replay_on_records(policy, test).to_dict() if replayable else None
    heuristic = replay_on_records(HeuristicPolicy(), test).to_dict() if replayable else None
    return {
        "train_questions": len({_question(r) for r in train}),
        "test_questions": len({_question(r) for r in test}),
        "train_records": len(train),
        "test_records": len(test),
        "errors": errors,
        "learned": learned,
        "heuristic": heuristic,
    }


def leave_one_dataset_out(records: Sequence[Mapping[str, Any]], **fit: Any) -> list[dict]:
    """One row per dataset: fitted on the others, judged on it (none with one dataset)."""
    datasets = sorted({_question(r)[0] for r in records})
    if len(datasets) < 2:
        return []
    rows = []
    for held in datasets:
        train = [r for r in records if _question(r)[0] != held]
        test = [r for r in records if _question(r)[0] == held]
        others = [d for d in datasets if d != held]
        rows.append({"held_out": held, "train_datasets": others, **judge(train, test, **fit)})
    return rows


def _split(records: Sequence[Mapping[str, Any]], holdout: float, seed: int) -> tuple[set, list]:
    """The held-out questions and the train pool in a seeded order (nested subsets)."""
    questions = sorted({_question(r) for r in records})
    order = [questions[i] for i in np.random.default_rng(seed).permutation(len(questions))]
    n_held = min(max(1, round(holdout * len(order))), len(order) - 1)
    return set(order[:n_held]), order[n_held:]


def training_size(
    records: Sequence[Mapping[str, Any]],
    *,
    fractions: Sequence[float],
    holdout: float,
    **fit: Any,
) -> list[dict]:
    """One row per fraction of the train pool, all judged on the same held-out questions."""
    held, pool = _split(records, holdout, fit["seed"])
    test = [r for r in records if _question(r) in held]
    rows = []
    for fraction in fractions:
        chosen = set(pool[: max(1, round(fraction * len(pool)))])
        train = [r for r in records if _question(r) in chosen]
        rows.append({"fraction": fraction, **judge(train, test, **fit)})
    return rows


def generated_worlds(
    records: Sequence[Mapping[str, Any]],
    *,
    fractions: Sequence[float],
    holdout: float,
    **fit: Any,
) -> list[dict]:
    """Do the generated demo worlds' records help on real data? Per fraction of the train
    pool, fitted with and without its :data:`GENERATED` questions, judged on the held-out
    questions of the other datasets (the split of :func:`training_size`). None unless the
    records hold both."""
    datasets = {_question(r)[0] for r in records}
    if GENERATED not in datasets or len(datasets) < 2:
        return []
    held, pool = _split(records, holdout, fit["seed"])
    test = [r for r in records if _question(r) in held and _question(r)[0] != GENERATED]
    if not test:
        return []
    rows = []
    for fraction in fractions:
        chosen = set(pool[: max(1, round(fraction * len(pool)))])
        for with_worlds in (True, False):
            train = [
                r
                for r in records
                if _question(r) in chosen and (with_worlds or _question(r)[0] != GENERATED)
            ]
            if train:
                rows.append(
                    {"fraction": fraction, "demo_worlds": with_worlds, **judge(train, test, **fit)}
                )
    return rows


_COLUMNS = (
    "train questions",
    "test questions",
    "label MAE",
    "label R²",
    "continuation MAE",
    "SR learned",
    "SR heuristic",
    "F1 learned",
    "F1 heuristic",
    "on tree (learned)",
    "retr. calls (learned)",
)


def _cells(row: Mapping[str, Any]) -> list[str]:
    errors = row["errors"]
    no_replay = dict.fromkeys(("support_recall", "f1", "on_tree", "retrieval_calls"))
    learned, heuristic = row["learned"] or no_replay, row["heuristic"] or no_replay
    return [
        fmt(row["train_questions"]),
        fmt(row["test_questions"]),
        fmt(errors["mae_overall"]),
        fmt(errors["r2_overall"]),
        fmt(errors["mae_continuation"]),
        fmt(learned["support_recall"]),
        fmt(heuristic["support_recall"]),
        fmt(learned["f1"]),
        fmt(heuristic["f1"]),
        fmt(learned["on_tree"], 2),
        fmt(learned["retrieval_calls"], 2),
    ]


def _table(first: str, rows: Sequence[Mapping[str, Any]], key: Any) -> list[str]:
    lines = [
        f"| {first} | " + " | ".join(_COLUMNS) + " |",
        "|---" * (len(_COLUMNS) + 1) + "|",
    ]
    lines += [f"| {key(row)} | " + " | ".join(_cells(row)) + " |" for row in rows]
    return lines


def markdown(result: Mapping[str, Any]) -> str:
    """The two tables of ``result`` (what :func:`run` returns)."""
    meta = result["meta"]
    lines = [
        "# Learned controller: generalisation from the training records (no model calls)",
        "",
        f"{meta['records']} records of {meta['questions']} questions "
        f"({', '.join(meta['datasets'])}); feature schema {meta['feature_version']}, "
        f"{meta['n_estimators']} trees, min_samples_leaf {meta['min_samples_leaf']}, "
        f"seed {meta['seed']}. SR / F1 / on tree: offline replay on the held-out questions' "
        "recorded trees (the heuristic was the rollouts' behaviour policy, which favours it); "
        "'–' where the records are packed (no state to walk: label errors only).",
        "",
        "## Leave one dataset out",
        "",
    ]
    if result["leave_one_dataset_out"]:
        lines += _table(
            "held-out dataset", result["leave_one_dataset_out"], lambda r: r["held_out"]
        )
    else:
        lines.append("(the records hold one dataset: nothing to leave out)")
    lines += [
        "",
        f"## Training-set size (held out: {meta['holdout']:.0%} of the questions)",
        "",
    ]
    lines += _table("train share", result["training_size"], lambda r: f"{r['fraction']:.0%}")
    if result.get("generated_worlds"):
        lines += [
            "",
            "## With and without the generated demo worlds (judged on the other datasets' "
            "held-out questions)",
            "",
        ]
        lines += _table(
            "train share, demo worlds",
            result["generated_worlds"],
            lambda r: f"{r['fraction']:.0%}, {'with' if r['demo_worlds'] else 'without'}",
        )
    return "\n".join(lines) + "\n"


def run(
    records: Sequence[Mapping[str, Any]],
    *,
    fractions: Sequence[float] = FRACTIONS,
    holdout: float = 0.2,
    n_estimators: int = 300,
    min_samples_leaf: int = 8,
    seed: int = 13,
    feature_version: int = FEATURE_SCHEMA_VERSION,
) -> dict[str, Any]:
    """Both checks on ``records``; JSON-ready."""
    started = time.perf_counter()
    fit = {
        "n_estimators": n_estimators,
        "min_samples_leaf": min_samples_leaf,
        "seed": seed,
        "feature_version": feature_version,
    }
    result = {
        "leave_one_dataset_out": leave_one_dataset_out(records, **fit),
        "training_size": training_size(records, fractions=fractions, holdout=holdout, **fit),
        "generated_worlds": generated_worlds(records, fractions=fractions, holdout=holdout, **fit),
    }
    questions = {_question(r) for r in records}
    result["meta"] = {
        "records": len(records),
        "questions": len(questions),
        "datasets": sorted({q[0] for q in questions}),
        "holdout": holdout,
        "fractions": list(fractions),
        **fit,
        "git_commit": git_commit(),
        "seconds": round(time.perf_counter() - started, 1),
    }
    return json_safe(result)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--records",
        type=Path,
        nargs="+",
        default=[DEFAULT_RECORDS],
        help="training records (JSONL, from dynakrag collect; default: the shipped ones)",
    )
    parser.add_argument("--fractions", type=float, nargs="+", default=list(FRACTIONS))
    parser.add_argument("--holdout", type=float, default=0.2, help="held-out question share")
    parser.add_argument("--n-estimators", type=int, default=300)
    parser.add_argument("--min-samples-leaf", type=int, default=8)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--feature-version", type=int, default=FEATURE_SCHEMA_VERSION)
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--name", default="policy-generalisation")
    args = parser.parse_args(argv)
    if not all(0.0 < f <= 1.0 for f in args.fractions) or not 0.0 < args.holdout < 1.0:
        parser.error("fractions must be in (0, 1] and the holdout in (0, 1)")
    records = read_records(args.records)
    result = run(
        records,
        fractions=args.fractions,
        holdout=args.holdout,
        n_estimators=args.n_estimators,
        min_samples_leaf=args.min_samples_leaf,
        seed=args.seed,
        feature_version=args.feature_version,
    )
    result["meta"]["record_files"] = [str(path) for path in args.records]
    text = markdown(result)
    print(text)
    write_json(args.out_dir / f"{args.name}.json", result)
    write_text_atomic(args.out_dir / f"{args.name}.md", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
