"""Collection cost: what each lever of ``dynakrag collect`` saves, one at a time (issue #24).

On the first ``--limit`` TRAIN questions of each dataset (never an eval row), collection runs
once per lever, each adding one cheap choice to the one before:

====================  ======================================================================
``old defaults``      answer-F1 labels (every answer branch answered), no memo, 2 rollouts
``+ recall labels``   the paper's support-recall labels: no answer generated in a branch
``+ sub-query memo``  each distinct request of a question asked once (rewrites, decomposition)
``+ rollouts 1``      one exploration rollout a question instead of two (the new defaults)
====================  ======================================================================

(``--levers`` picks some; ``visited-answer`` adds the new defaults with one answer per visited
state.) Reported per lever: seconds, LLM calls, prompt and completion tokens per question
(what the model really answered: :class:`~dynakrag.training.collection_report.
CollectionReport`), requests answered from the memo, records, questions left out (with the
reason), and the held-out R² per action of forests fitted on that lever's records
(:func:`~dynakrag.training.fit.fit_policy`, question-level hold-out; a handful of questions
gives a rough number, and the answer labels' R² is of another target).

Every lever searches the same searcher (the open setting's pool of ALL of a dataset's train
questions, indexed once, not timed) and asks the configured generator with the LLM disk cache
OFF (``--cache`` to use it), as the issue measures. The embedded server keeps a RAM prompt
cache, so a prompt seen by an earlier lever is cheaper for a later one: the levers run from
the cheapest to the most expensive (``--order as-given`` to change that), which can only
understate the savings. Each lever's collection of each dataset is one run, stored whole in
``<out-dir>/<name>-runs/`` when it ends (its row and records): a killed or extended run (more
``--datasets`` or ``--levers``) computes only the missing ones; a run of other settings
(``--limit``, ``--setting``, ``--retriever``, seed, epsilon, cache, generator) is another file.
Progress and an ETA per run go to stderr. Writes ``<out-dir>/<name>.json`` and ``<name>.md``
(the levers' table over all datasets, then per dataset).

    .venv/bin/python benchmarks/collection_cost.py --datasets hotpotqa --limit 3
    .venv/bin/python benchmarks/collection_cost.py --datasets hotpotqa musique --limit 2 --fake
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from dynakrag.configuration import Configuration
from dynakrag.data.datasets import QAExample, load_examples, open_corpus
from dynakrag.errors import UserInputError
from dynakrag.eval.runner import git_commit
from dynakrag.llm.factory import describe_backend, llm_client_from_config
from dynakrag.state import ACTIONS
from dynakrag.training.collect import collect
from dynakrag.training.collection_report import CollectionReport
from dynakrag.training.fit import fit_policy
from dynakrag.training.searchers import collection_searcher_factory

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))  # the shared helpers beside this script, also when imported

from runstore import RunStore, settings_digest  # noqa: E402

RESULTS = _HERE / "results"
QA_DATASETS = ("hotpotqa", "2wiki", "musique")


@dataclass(frozen=True)
class Lever:
    """One collection setting of the table."""

    name: str
    labels: str
    memo: bool
    rollouts: int
    cost: float
    """Rough cost against the new defaults (fake model's LLM calls), for the first ETA."""


LEVERS: tuple[Lever, ...] = (
    Lever("old defaults", "answer", memo=False, rollouts=2, cost=5.0),
    Lever("+ recall labels", "recall", memo=False, rollouts=2, cost=2.5),
    Lever("+ sub-query memo", "recall", memo=True, rollouts=2, cost=2.0),
    Lever("+ rollouts 1", "recall", memo=True, rollouts=1, cost=1.0),
    Lever("visited-answer", "visited-answer", memo=True, rollouts=1, cost=1.5),
)
SECONDS_PER_QUESTION = 28.0
"""The new defaults' seconds a train question, embedded model, 2 cores (docs/collection.md)."""
DEFAULT_LEVERS = tuple(lever.name for lever in LEVERS[:4])
PER_QUESTION = ("seconds", "llm_calls", "prompt_tokens", "completion_tokens", "memo_hits")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", choices=QA_DATASETS, default=["hotpotqa"])
    parser.add_argument("--limit", type=int, default=3, help="first N train questions each")
    parser.add_argument(
        "--levers", nargs="+", choices=[lever.name for lever in LEVERS], default=DEFAULT_LEVERS
    )
    parser.add_argument(
        "--order",
        choices=("cheapest-first", "as-given"),
        default="cheapest-first",
        help="the order the levers run in (the table keeps the given order)",
    )
    parser.add_argument("--setting", choices=("open", "distractor"), default="open")
    parser.add_argument("--retriever", help="default: the configuration's")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--epsilon", type=float, default=0.3)
    parser.add_argument("--fake", action="store_true", help="the scripted test reader")
    parser.add_argument("--cache", action="store_true", help="use the LLM disk cache")
    parser.add_argument("--n-estimators", type=int, default=300)
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--name", default="collection-cost")
    args = parser.parse_args(argv)
    if args.limit < 1:
        parser.error("--limit must be >= 1")
    return args


def fake_chat_model(examples: Sequence[QAExample]) -> BaseChatModel:
    """The test suite's scripted reader (``tests.fakes.demo_chat_model``): knows the gold
    answers, says one only when the evidence states it; for smoke runs without a model."""
    if str(_REPO) not in sys.path:
        sys.path.insert(0, str(_REPO))  # tests/ is a package at the repository root
    from tests.fakes import demo_chat_model

    return demo_chat_model({ex.question: ex.answers[0] if ex.answers else "" for ex in examples})


def collect_run(
    lever: Lever,
    examples: Sequence[QAExample],
    factories: dict[str, Any],
    llm: Any,
    cfg: Configuration,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Collect ``examples`` (one dataset's) with one lever's settings: the report's totals
    and the records (stored with the run, for the lever's R²)."""
    report = CollectionReport(total=len(examples), stream=sys.stderr)
    records = list(
        collect(
            examples,
            lambda example: factories[example.dataset](example),
            llm,
            cfg,
            epsilon=args.epsilon,
            seed=args.seed,
            progress=False,
            rollouts=lever.rollouts,
            labels=lever.labels,
            memo=lever.memo,
            report=report,
        )
    )
    return {**report.to_dict(), "records_list": records}


def lever_row(lever: Lever, runs: Sequence[dict[str, Any]], args: argparse.Namespace) -> dict:
    """One lever's row over its datasets' runs: totals summed, means per collected question,
    and the held-out R² of forests fitted on all its records."""
    questions = sum(run["questions"] for run in runs)
    totals = {key: sum(run[key] for run in runs) for key in PER_QUESTION}
    row: dict[str, Any] = {
        "lever": lever.name,
        "labels": lever.labels,
        "memo": lever.memo,
        "rollouts": lever.rollouts,
        "questions": questions,
        "records": sum(run["records"] for run in runs),
        **totals,
        "per_question": {
            key: (value / questions if questions else None) for key, value in totals.items()
        },
        "left_out": [item for run in runs for item in run["left_out"]],
        "r2_by_action": dict.fromkeys(ACTIONS),
        "r2_overall": None,
        "r2_continuation": None,
        "n_holdout_by_action": dict.fromkeys(ACTIONS, 0),
    }
    records = [record for run in runs for record in run["records_list"]]
    if len({r["example_id"] for r in records}) >= 2:
        _, fit = fit_policy(
            records,
            n_estimators=args.n_estimators,
            random_state=args.seed,
            progress=False,
            refit=False,
            n_jobs=1,
        )
        row.update(
            r2_by_action=fit.r2_by_action,
            r2_overall=fit.r2_overall,
            r2_continuation=fit.r2_continuation,
            n_holdout_by_action=fit.n_holdout_by_action,
        )
    return row


def per_dataset_row(lever: Lever, dataset: str, run: dict[str, Any]) -> dict[str, Any]:
    """One lever's numbers on one dataset (no R²: a handful of questions)."""
    return {
        "lever": lever.name,
        "dataset": dataset,
        "questions": run["questions"],
        "records": run["records"],
        "per_question": run["per_question"],
        "left_out": run["left_out"],
    }


def _number(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def markdown(
    rows: Sequence[dict[str, Any]],
    meta: dict[str, Any],
    by_dataset: Sequence[dict[str, Any]] = (),
) -> str:
    """The cost table, the R² table and the cost per dataset."""
    datasets = ", ".join(meta["datasets"])
    lines = [
        f"# Collection cost per train question ({meta['questions']} questions: first "
        f"{meta['limit']} of {datasets}; {meta['setting']} setting, {meta['retriever']} "
        f"retrieval; {meta['generator']}; LLM disk cache {'on' if meta['cache'] else 'off'})",
        "",
        "| lever | labels | memo | rollouts | s/question | LLM calls | prompt tokens | "
        "completion tokens | memo hits | records | left out |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        per = row["per_question"]
        lines.append(
            f"| {row['lever']} | {row['labels']} | {'yes' if row['memo'] else 'no'} | "
            f"{row['rollouts']} | {_number(per['seconds'])} | {_number(per['llm_calls'])} | "
            f"{_number(per['prompt_tokens'], 0)} | {_number(per['completion_tokens'], 0)} | "
            f"{_number(per['memo_hits'])} | {row['records']} | {len(row['left_out'])} |"
        )
    lines += [
        "",
        "## Held-out R² per action (question-level hold-out of the same questions)",
        "",
        "| lever | " + " | ".join(ACTIONS) + " | overall | continuation |",
        "|---|" + "---|" * (len(ACTIONS) + 2),
    ]
    for row in rows:
        cells = [_number(row["r2_by_action"].get(a), 2) for a in ACTIONS]
        cells += [_number(row["r2_overall"], 2), _number(row["r2_continuation"], 2)]
        lines.append(f"| {row['lever']} | " + " | ".join(cells) + " |")
    if len(meta["datasets"]) > 1 and by_dataset:
        lines += [
            "",
            "## Per dataset",
            "",
            "| dataset | lever | questions | s/question | LLM calls | prompt tokens | left out |",
            "|---|---|---|---|---|---|---|",
        ]
        for part in by_dataset:
            per = part["per_question"]
            lines.append(
                f"| {part['dataset']} | {part['lever']} | {part['questions']} | "
                f"{_number(per['seconds'])} | {_number(per['llm_calls'])} | "
                f"{_number(per['prompt_tokens'], 0)} | {len(part['left_out'])} |"
            )
    left_out = [(row["lever"], item) for row in rows for item in row["left_out"]]
    if left_out:
        lines += ["", "## Questions left out", ""]
        lines += [
            f"- {lever}: {i['dataset']} {i['example_id']}: {i['reason']}" for lever, i in left_out
        ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None, chat_model: BaseChatModel | None = None) -> int:
    """Run the levers; ``chat_model`` replaces the configured generator (tests)."""
    args = parse_args(argv)
    cfg = Configuration.from_env(seed=args.seed, retriever=args.retriever)
    try:
        pools = {d: load_examples(d, "train") for d in args.datasets}
    except UserInputError as exc:
        print(f"collection cost: {exc}", file=sys.stderr)
        return 2
    examples = [ex for d in args.datasets for ex in pools[d][: args.limit]]
    if chat_model is None and args.fake:
        chat_model = fake_chat_model(examples)
    if args.fake:
        generator = "scripted stand-in (--fake)"
    elif chat_model is not None:
        generator = type(chat_model).__name__
    else:
        generator = describe_backend(cfg)
    cache = None
    if args.cache and chat_model is None:
        from dynakrag.llm.cache import SQLiteLLMCache

        cache = SQLiteLLMCache.in_dir(cfg.cache_dir)
    llm = llm_client_from_config(cfg, chat_model=chat_model, cache=cache)
    # One searcher per dataset for every lever: the same pooled corpus, indexed once.
    factories = {
        d: collection_searcher_factory(
            cfg.retriever, open_corpus(pool) if args.setting == "open" else None
        )
        for d, pool in pools.items()
    }
    chosen = [lever for lever in LEVERS if lever.name in args.levers]
    order = chosen[::-1] if args.order == "cheapest-first" else chosen
    settings = {
        "limit": args.limit,
        "setting": args.setting,
        "retriever": cfg.retriever,
        "seed": args.seed,
        "epsilon": args.epsilon,
        "cache": bool(cache),
        "generator": generator,
    }
    signature = settings_digest(settings)
    store = RunStore(
        args.out_dir / f"{args.name}-runs",
        len(order) * len(args.datasets),
        "collection cost",
        quiet=False,
    )
    todo = [
        (lever, d) for lever in order for d in args.datasets
        if f"{lever.name}-{d}-{signature}" not in store.done
    ]  # fmt: skip
    estimate = sum(lever.cost * args.limit for lever, _ in todo) * SECONDS_PER_QUESTION
    print(
        f"collection cost: {len(todo)} of {store.total} runs to compute (lever x dataset, "
        f"{args.limit} questions each); first estimate ~{estimate / 60:.0f} min",
        file=sys.stderr,
        flush=True,
    )
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    for lever in order:
        for dataset in args.datasets:
            mine = [ex for ex in examples if ex.dataset == dataset]
            runs[(lever.name, dataset)] = store.run(
                f"{lever.name}-{dataset}-{signature}",
                lambda lever=lever, mine=mine: collect_run(lever, mine, factories, llm, cfg, args),
            )
    rows = [
        lever_row(lever, [runs[(lever.name, d)] for d in args.datasets], args) for lever in chosen
    ]
    by_dataset = [
        per_dataset_row(lever, d, runs[(lever.name, d)]) for d in args.datasets for lever in chosen
    ]
    meta = {
        "datasets": args.datasets,
        "questions": len(examples),
        **settings,
        "run_order": [lever.name for lever in order],
        "embedded_prompt_cache_mb": cfg.embedded_prompt_cache_mb,
        "git_commit": git_commit(),
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{args.name}.json").write_text(
        json.dumps({"meta": meta, "rows": rows, "by_dataset": by_dataset}, indent=2, sort_keys=True)
        + "\n"
    )
    text = markdown(rows, meta, by_dataset)
    (args.out_dir / f"{args.name}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
