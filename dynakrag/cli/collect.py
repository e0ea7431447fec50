"""``dynakrag collect``: labelled trajectories from exploration rollouts on training questions.

``dynakrag collect --dataset D --split train --out FILE.jsonl [--limit N] [--setting
distractor|open] [--retriever dense|bm25|hybrid|routed] [--seed S] [--epsilon E]
[--rollouts R]`` runs exploration rollouts with branching on the training questions of D and
writes labelled records (:mod:`dynakrag.training.collect`). ``--split eval`` is refused (exit
2): collection is training, and eval rows are for reporting only. ``--dataset demo`` uses the
generated demo corpus. The generator is the configured one (``DYNAKRAG_LLM_BASE_URL`` or the
embedded model).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dynakrag.cli.arguments import EXIT_OK, fraction, positive_int
from dynakrag.cli.generator import make_llm
from dynakrag.configuration import Configuration
from dynakrag.data.datasets import DATASETS, QAExample, load_examples, open_corpus
from dynakrag.errors import UserInputError
from dynakrag.routing.factory import RETRIEVERS


def add_parser(subparsers: Any) -> None:
    """Add the ``collect`` command to ``subparsers`` (from ``add_subparsers``)."""
    parser = subparsers.add_parser(
        "collect", help="collect labelled trajectories on training questions"
    )
    parser.add_argument(
        "--dataset", required=True, choices=[*DATASETS, "demo"], help="benchmark, or 'demo'"
    )
    parser.add_argument(
        "--split", default="train", choices=["train", "eval"], help="only 'train' is allowed"
    )
    parser.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    parser.add_argument("--limit", type=positive_int, help="use the first N questions")
    parser.add_argument(
        "--setting",
        default="distractor",
        choices=["distractor", "open"],
        help="search each question's own passages (distractor) or the pooled ones (open)",
    )
    parser.add_argument(
        "--retriever",
        choices=RETRIEVERS,
        help="default: the configuration's (DYNAKRAG_RETRIEVER, else dense)",
    )
    parser.add_argument("--seed", type=int, default=13, help="exploration seed")
    parser.add_argument(
        "--epsilon", type=fraction, default=0.3, help="chance of a random valid action"
    )
    parser.add_argument("--rollouts", type=positive_int, default=2, help="rollouts a question")
    parser.add_argument(
        "--no-branch", action="store_true", help="label only the actions the rollouts take"
    )
    parser.set_defaults(handler=run_collect)


def run_collect(args: argparse.Namespace) -> int:
    """Roll out on the training questions and write the labelled records."""
    from dynakrag.files import write_jsonl
    from dynakrag.training.collect import (
        collect,
        demo_examples,
        distractor_searcher_factory,
    )

    if args.split != "train":
        raise UserInputError(
            "collection is training: only --split train may be collected (eval rows are "
            "for reporting only)"
        )
    cfg = Configuration.from_env(seed=args.seed, retriever=args.retriever)
    if args.dataset == "demo":
        examples = demo_examples()[: args.limit] if args.limit else demo_examples()
    else:
        examples = load_examples(args.dataset, "train", args.limit)
    if not examples:
        raise UserInputError(f"no training questions in {args.dataset}")
    factory = distractor_searcher_factory(cfg.retriever)
    if args.setting == "open":
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
