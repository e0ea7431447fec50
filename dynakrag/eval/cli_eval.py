"""``dynakrag eval``: run one method over a benchmark split and write JSON, markdown and plots.

Wired into :mod:`dynakrag.cli` with :func:`add_eval_parser` (the parser) and :func:`run_eval`
(the handler). User errors (missing data, bad options) raise :class:`UserInputError`
subclasses, which the CLI reports in one line with exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dynakrag.cli import positive_int
from dynakrag.errors import UserInputError
from dynakrag.eval.datasets import DATASETS
from dynakrag.eval.methods import METHODS
from dynakrag.eval.runner import RETRIEVERS, SETTINGS

__all__ = ["add_eval_parser", "run_eval"]


def add_eval_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``eval`` sub-command to ``subparsers`` (from ``add_subparsers``)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "eval",
        help="evaluate a method on a benchmark split",
        description="Run a method over a benchmark split; write FILE.json, FILE.md, FILE.png.",
    )
    parser.add_argument("--dataset", required=True, choices=DATASETS)
    parser.add_argument("--split", default="eval", choices=("train", "eval"), help="default: eval")
    parser.add_argument(
        "--setting",
        default="distractor",
        choices=SETTINGS,
        help="distractor: each question's own paragraphs; open: the split's pooled corpus "
        "(default: distractor)",
    )
    parser.add_argument("--method", required=True, choices=tuple(METHODS))
    parser.add_argument("--retriever", default="dense", choices=RETRIEVERS, help="default: dense")
    parser.add_argument("--limit", type=positive_int, help="the first N questions only")
    parser.add_argument("--seed", type=int, help="default: the configuration's seed")
    parser.add_argument(
        "--no-answer",
        action="store_true",
        help="skip the final answer step (control and retrieval metrics only)",
    )
    parser.add_argument("--policy", help="dynakrag only: 'heuristic' or 'uniform'")
    parser.add_argument("--k", type=positive_int, help="naive only: passages retrieved (5)")
    parser.add_argument("--no-cache", action="store_true", help="do not use the LLM disk cache")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON")
    return parser


def run_eval(args: argparse.Namespace) -> int:
    """Handle ``dynakrag eval``; returns the exit code (0)."""
    from dynakrag.configuration import Configuration
    from dynakrag.eval.report import compare_table, report_paths
    from dynakrag.eval.runner import evaluate
    from dynakrag.policy.registry import resolve_policy

    if args.policy is not None and args.method != "dynakrag":
        raise UserInputError("--policy applies to --method dynakrag only")
    if args.k is not None and args.method != "naive":
        raise UserInputError("--k applies to --method naive only")
    cfg = Configuration.from_env(policy=args.policy)
    options: dict[str, Any] = {}
    if args.method == "dynakrag":
        resolve_policy(cfg.policy)  # a bad name fails before any data or model loads
        options["policy"] = cfg.policy
    if args.k is not None:
        options["k"] = args.k
    result = evaluate(
        args.dataset,
        args.split,
        args.setting,
        args.method,
        retriever=args.retriever,
        limit=args.limit,
        seed=args.seed,
        no_answer=args.no_answer,
        out=args.out,
        cfg=cfg,
        progress=not args.quiet,
        method_options=options,
        cache=not args.no_cache,
    )
    print(compare_table([result]), end="")
    cache = result["meta"]["llm_cache"]
    if cache.get("enabled"):
        print(f"LLM cache: {cache['hits']} hits, {cache['misses']} misses ({cache['path']})")
    md_path, png_path = report_paths(args.out)
    print(f"Wrote {args.out}, {md_path}, {png_path}", file=sys.stdout)
    return 0
