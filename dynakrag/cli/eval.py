"""``dynakrag eval``: run one method over a benchmark split and write JSON, markdown and plots.

Controller comparisons are one method, ``dynakrag``, with a different ``--policy``:
``learned`` (the default: the shipped forest), ``heuristic`` (hand-written), ``uniform``
(random among valid actions), ``fixed`` (hand-written schedule), ``oracle`` (gold-aware
look-ahead: an upper bound that reads the gold support, for evaluation only) or a trained
policy file. ``--ablate sufficiency|compression|continuation``
(repeatable) switches parts of the method off (see
:data:`dynakrag.eval.methods.dynakrag.ABLATIONS`). ``--workers N`` / ``--scheduler ADDRESS``
answer the questions on Dask workers (:mod:`dynakrag.eval.workers`): the same records, and a
rerun after an interruption skips the questions journalled in ``<out>.partial.jsonl``.
``--token-budget N`` (dynakrag only) sets ``token_budget``: the stop rule, and λ from the
policy's calibration curve when it has one.

User errors (missing data, bad options) raise :class:`UserInputError` subclasses, which
:func:`dynakrag.cli.main.main` reports in one line with exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dynakrag.cli.arguments import (
    EXIT_OK,
    add_llm_option,
    add_token_budget_option,
    add_worker_options,
    policy_help,
    positive_int,
)
from dynakrag.cli.runlog import add_log_option
from dynakrag.data.datasets import DATASETS, default_setting
from dynakrag.errors import UserInputError
from dynakrag.eval.methods import METHODS, get_method
from dynakrag.eval.methods.dynakrag import ABLATIONS, ORACLE
from dynakrag.eval.runner import SETTINGS
from dynakrag.routing.factory import RETRIEVERS


def add_parser(subparsers: Any) -> None:
    """Add the ``eval`` command to ``subparsers`` (from ``add_subparsers``)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "eval",
        help="evaluate a method on a benchmark split",
        description="Run a method over a benchmark split; write FILE.json, FILE.md, FILE.png.",
    )
    parser.add_argument("--dataset", required=True, choices=DATASETS)
    parser.add_argument("--split", default="eval", choices=("train", "eval"), help="default: eval")
    parser.add_argument(
        "--setting",
        choices=SETTINGS,
        help="distractor: each question's own paragraphs; open: the split's pooled corpus; "
        "gold: each question's gold paragraphs only (an upper bound for reading) "
        "(default: distractor, open for the DS-RAG datasets, which have only their corpus)",
    )
    parser.add_argument("--method", required=True, choices=tuple(METHODS))
    parser.add_argument(
        "--retriever",
        choices=RETRIEVERS,
        help="default: the configuration's (DYNAKRAG_RETRIEVER, else dense; bm25 for the DS-RAG "
        "methods, whose chunks differ by the names they mention); 'routed' sends each "
        "query to bm25, dense, hybrid or hybrid+decompose by its average IDF (thresholds "
        "fitted on the searched corpus)",
    )
    parser.add_argument("--limit", type=positive_int, help="the first N questions only")
    parser.add_argument("--seed", type=int, help="default: the configuration's seed")
    parser.add_argument(
        "--no-answer",
        action="store_true",
        help="skip the final answer step (control and retrieval metrics only)",
    )
    parser.add_argument(
        "--policy",
        metavar="POLICY",
        help="dynakrag only: " + policy_help("oracle (gold-aware upper bound, evaluation only)"),
    )
    parser.add_argument(
        "--ablate",
        action="append",
        choices=tuple(ABLATIONS),
        default=[],
        help="dynakrag only, repeatable: sufficiency (no sufficiency_check), compression "
        "(final compression passes evidence through), continuation (learned policy's "
        "continuation guard off; needs a policy file)",
    )
    parser.add_argument(
        "--oracle-horizon",
        type=positive_int,
        help="--policy oracle only: actions it looks ahead (default 2)",
    )
    add_token_budget_option(parser)
    add_llm_option(parser)
    parser.add_argument("--k", type=positive_int, help="naive only: passages retrieved (5)")
    parser.add_argument("--no-cache", action="store_true", help="do not use the LLM disk cache")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON")
    add_worker_options(parser)
    add_log_option(
        parser,
        "dynakrag only: log each question's run to this trajectory log (SQLite file or "
        "postgresql://...), tagged with the dataset and split (runs of eval rows never train)",
    )
    parser.set_defaults(handler=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    """Run the method over the split, write the reports and print the summary table."""
    from dynakrag.configuration import Configuration
    from dynakrag.eval.report import compare_table, report_paths
    from dynakrag.eval.runner import evaluate

    budget = ("--token-budget", args.token_budget)
    log = ("--log", args.log)
    for flag, value in (("--policy", args.policy), ("--ablate", args.ablate), budget, log):
        if value and args.method != "dynakrag":
            raise UserInputError(f"{flag} applies to --method dynakrag only")
    if args.k is not None and args.method != "naive":
        raise UserInputError("--k applies to --method naive only")
    if args.oracle_horizon is not None and args.policy != ORACLE:
        raise UserInputError("--oracle-horizon applies to --policy oracle only")
    # The oracle is not a configured policy (resolve_policy refuses it): pass it to the method.
    cfg = Configuration.from_env(
        policy=None if args.policy == ORACLE else args.policy,
        retriever=args.retriever,
        token_budget=args.token_budget,
        llm=args.llm,
    )
    if cfg.llm:
        from dynakrag.llm.factory import provider_chat_model

        provider_chat_model(cfg)  # a model that cannot be built fails before the data loads
    options: dict[str, Any] = {}
    if args.method == "dynakrag":
        options["policy"] = args.policy if args.policy == ORACLE else cfg.policy
        options["ablate"] = args.ablate
        options["oracle_horizon"] = args.oracle_horizon
    if args.log:
        from dynakrag.graph.runlog import close_trajectory_log, open_trajectory_log

        close_trajectory_log(open_trajectory_log(args.log))  # a bad log fails before the data
        options["log"] = args.log
        options["log_tags"] = {"dataset": args.dataset, "split": args.split}
    if args.k is not None:
        options["k"] = args.k
    # Built now so a bad policy or ablation fails before any data or model loads.
    method = get_method(args.method, no_answer=args.no_answer, **options)
    setting = args.setting or default_setting(args.dataset)
    try:
        result = evaluate(
            args.dataset,
            args.split,
            setting,
            method,
            retriever=args.retriever,  # None: the method's own unless DYNAKRAG_RETRIEVER
            limit=args.limit,
            seed=args.seed,
            no_answer=args.no_answer,
            out=args.out,
            cfg=cfg,
            progress=not args.quiet,
            cache=not args.no_cache,
            workers=args.workers,
            scheduler=args.scheduler,
        )
    finally:
        if args.log:
            method.close()  # type: ignore[attr-defined]  # the dynakrag method's log
    print(compare_table([result]), end="")
    cache = result["meta"]["llm_cache"]
    if cache.get("enabled"):
        print(f"LLM cache: {cache['hits']} hits, {cache['misses']} misses ({cache['path']})")
    md_path, png_path = report_paths(args.out)
    print(f"Wrote {args.out}, {md_path}, {png_path}", file=sys.stdout)
    return EXIT_OK
