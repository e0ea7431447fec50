"""The ``dynakrag collect`` and ``dynakrag train`` commands.

``dynakrag collect --dataset D --split train --out FILE.jsonl [--limit N] [--setting
distractor|open] [--retriever bm25|dense] [--seed S] [--epsilon E] [--rollouts R]`` runs
exploration rollouts with branching on the training questions of D and writes labelled
records (:mod:`dynakrag.training.collect`). ``--split eval`` is refused (exit 2): collection
is training, and eval rows are for reporting only. ``--dataset demo`` uses the generated demo
corpus. The generator is the configured one (``DYNAKRAG_LLM_BASE_URL`` or the embedded model).

``dynakrag train --trajectories FILE... --out POLICY [--seed S]`` fits the learned policy
(:mod:`dynakrag.training.fit`), prints held-out R² per action and the top feature importances,
and writes the policy file, usable as ``--policy POLICY``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dynakrag.cli.arguments import positive_int
from dynakrag.configuration import Configuration
from dynakrag.errors import UserInputError

__all__ = ["TRAIN_HANDLERS", "add_train_parsers", "make_llm", "run_collect", "run_train"]

EXIT_OK = 0


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
    return value


def add_train_parsers(subparsers: Any) -> None:
    """Add the ``collect`` and ``train`` sub-commands to ``subparsers``."""
    from dynakrag.data.datasets import DATASETS

    collect = subparsers.add_parser(
        "collect", help="collect labelled trajectories on training questions"
    )
    collect.add_argument(
        "--dataset", required=True, choices=[*DATASETS, "demo"], help="benchmark, or 'demo'"
    )
    collect.add_argument(
        "--split", default="train", choices=["train", "eval"], help="only 'train' is allowed"
    )
    collect.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    collect.add_argument("--limit", type=positive_int, help="use the first N questions")
    collect.add_argument(
        "--setting",
        default="distractor",
        choices=["distractor", "open"],
        help="search each question's own passages (distractor) or the pooled ones (open)",
    )
    collect.add_argument("--retriever", default="dense", choices=["bm25", "dense"])
    collect.add_argument("--seed", type=int, default=13, help="exploration seed")
    collect.add_argument(
        "--epsilon", type=_fraction, default=0.3, help="chance of a random valid action"
    )
    collect.add_argument("--rollouts", type=positive_int, default=2, help="rollouts a question")
    collect.add_argument(
        "--no-branch", action="store_true", help="label only the actions the rollouts take"
    )

    train = subparsers.add_parser("train", help="fit a learned policy from trajectories")
    train.add_argument(
        "--trajectories", type=Path, nargs="+", required=True, help="JSONL files from collect"
    )
    train.add_argument("--out", type=Path, required=True, help="policy file to write (.npz)")
    train.add_argument("--seed", type=int, default=13, help="forest and split seed")
    train.add_argument("--n-estimators", type=positive_int, default=300)
    train.add_argument("--min-samples-leaf", type=positive_int, default=8)
    train.add_argument("--holdout", type=_fraction, default=0.2, help="held-out questions")
    train.add_argument("--continuation-margin", type=float, default=None)
    train.add_argument("--jobs", type=int, default=None, help="parallel jobs for the forests")


def make_llm(cfg: Configuration) -> Any:
    """The configured generator as an LLMClient (created on first use)."""
    from dynakrag.llm.factory import llm_client_from_config

    return llm_client_from_config(cfg)


def run_collect(args: argparse.Namespace) -> int:
    """Handler of ``dynakrag collect``."""
    from dynakrag.data.datasets import load_examples, open_corpus
    from dynakrag.training.collect import (
        collect,
        demo_examples,
        distractor_searcher_factory,
        write_jsonl,
    )

    if args.split != "train":
        raise UserInputError(
            "collection is training: only --split train may be collected (eval rows are "
            "for reporting only)"
        )
    cfg = Configuration.from_env(seed=args.seed)
    if args.dataset == "demo":
        examples = demo_examples()[: args.limit] if args.limit else demo_examples()
    else:
        examples = load_examples(args.dataset, "train", args.limit)
    if not examples:
        raise UserInputError(f"no training questions in {args.dataset}")
    factory = distractor_searcher_factory(args.retriever)
    if args.setting == "open":
        from dynakrag.data.datasets import QAExample

        pooled = QAExample(
            id="open",
            question="",
            answers=(),
            support=(),
            passages=tuple(open_corpus(examples)),
            dataset=args.dataset,
            row=-1,
            split="train",
        )
        searcher = factory(pooled)

        def searcher_factory(example: Any) -> Any:
            return searcher

    else:
        searcher_factory = factory
    records = collect(
        examples,
        searcher_factory,
        make_llm(cfg),
        cfg,
        epsilon=args.epsilon,
        seed=args.seed,
        branch=not args.no_branch,
        progress=True,
        rollouts=args.rollouts,
    )
    questions: set[str] = set()

    def counted(stream: Any) -> Any:
        for record in stream:
            questions.add(record["example_id"])
            yield record

    try:
        count = write_jsonl(counted(records), args.out)
    except OSError as exc:
        raise UserInputError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    print(f"Wrote {count} records from {len(questions)} questions to {args.out}")
    return EXIT_OK


def run_train(args: argparse.Namespace) -> int:
    """Handler of ``dynakrag train``."""
    from dynakrag.policy.learned import DEFAULT_CONTINUATION_MARGIN
    from dynakrag.training.collect import read_jsonl
    from dynakrag.training.fit import fit_policy

    records = read_jsonl(args.trajectories)
    margin = args.continuation_margin
    policy, report = fit_policy(
        records,
        n_estimators=args.n_estimators,
        min_samples_leaf=args.min_samples_leaf,
        random_state=args.seed,
        holdout=args.holdout,
        progress=True,
        continuation_margin=DEFAULT_CONTINUATION_MARGIN if margin is None else margin,
        n_jobs=args.jobs,
    )
    try:
        path = policy.save(args.out)
    except OSError as exc:
        raise UserInputError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    print(report.format())
    print(f"Saved the policy to {path} (use --policy {path})")
    sys.stdout.flush()
    return EXIT_OK


TRAIN_HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "collect": run_collect,
    "train": run_train,
}
"""Handlers of the commands :func:`add_train_parsers` adds, by command name."""
