"""``dynakrag train``: fit the learned policy from collected trajectories or from logged runs.

``dynakrag train --trajectories FILE... --out POLICY`` fits the learned policy
(:mod:`dynakrag.training.fit`) from the JSONL records of ``dynakrag collect``.

``dynakrag train --log LOG [--gold GOLD.jsonl] [--branch] [--corpus PATH | --index DIR|URL]
[--base default] --out POLICY`` fits it from a trajectory log (a SQLite file or a
``postgresql://`` URL, written by ``ask/demo/eval/collect --log`` or ``dynakrag export``):
the records ``collect --log`` stored there, and with ``--gold`` the logged runs themselves,
labelled with the user's gold (:mod:`dynakrag.training.gold`); ``--branch`` also runs every
other valid action from each logged state against the corpus (``--corpus``/``--index`` as for
``ask``; the demo corpus without them) and the configured model, for counterfactual labels;
``--corpus`` also checks that the gold's support ids are passages of that corpus.
``--base default`` pools the records with the shipped policy's training records
(:mod:`dynakrag.training.retrain`).

It prints how the log was labelled, the held-out error per action, how the new policy's
decisions differ on the logged states from the logged runs' (and the base policy's), and writes
the policy file, usable as ``--policy POLICY``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dynakrag.cli.arguments import EXIT_OK, holdout_fraction, positive_int
from dynakrag.cli.generator import check_model_reached, make_llm
from dynakrag.configuration import Configuration
from dynakrag.errors import UserInputError

if TYPE_CHECKING:
    from dynakrag.training.records import TransitionFields


def add_parser(subparsers: Any) -> None:
    """Add the ``train`` command to ``subparsers`` (from ``add_subparsers``)."""
    parser = subparsers.add_parser(
        "train", help="fit a learned policy from trajectories or logged runs"
    )
    parser.add_argument(
        "--trajectories", type=Path, nargs="+", help="JSONL record files from collect (.gz too)"
    )
    parser.add_argument(
        "--log",
        metavar="FILE|URL",
        help="a trajectory log (SQLite file or postgresql://...) from ask/demo/eval/collect "
        "--log or export",
    )
    parser.add_argument(
        "--gold",
        type=Path,
        help='JSONL of {"question" or "run_id", "answers": [...], "support": [passage ids]}; '
        "labels the logged runs (without support: by answer correctness only, weaker)",
    )
    parser.add_argument(
        "--branch",
        action="store_true",
        help="also run every other valid action from each logged state (counterfactual "
        "labels; calls the model)",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--corpus", type=Path, help="the corpus the runs searched (as for ask)")
    source.add_argument("--index", metavar="DIR|URL", help="the index the runs searched")
    parser.add_argument(
        "--base",
        metavar="default|FILE",
        help="pool with these records: 'default' (the shipped policy's) or a records file",
    )
    parser.add_argument("--out", type=Path, required=True, help="policy file to write (.npz)")
    parser.add_argument("--seed", type=int, default=13, help="forest and split seed")
    parser.add_argument("--n-estimators", type=positive_int, default=300)
    parser.add_argument("--min-samples-leaf", type=positive_int, default=8)
    parser.add_argument("--holdout", type=holdout_fraction, default=0.2, help="held-out questions")
    parser.add_argument("--continuation-margin", type=float, default=None)
    parser.add_argument("--jobs", type=int, default=None, help="parallel jobs for the forests")
    parser.add_argument(
        "--feature-version",
        type=positive_int,
        help="feature schema to train (default: the current one; 1 for records without state)",
    )
    parser.set_defaults(handler=run_train)


def run_train(args: argparse.Namespace) -> int:
    """Gather the records, fit the forests, print the reports and save the policy file."""
    from dynakrag.policy.learned import DEFAULT_CONTINUATION_MARGIN
    from dynakrag.training.fit import fit_policy

    _check_options(args)
    cfg = Configuration.from_env(seed=args.seed)
    pooled: list[TransitionFields] = []
    if args.base is not None:  # read first: a missing base fails before any model call
        from dynakrag.training.retrain import base_records

        pooled = base_records(args.base)
    records, labels, llm = _gather(args, cfg)
    if pooled:
        print(f"pooled with {len(pooled)} base records ({args.base})")
        records += pooled
    if not records:
        raise UserInputError(
            "no training records: the log holds no records from collect --log, and its runs "
            "need --gold to be labelled"
            if args.log
            else "no training records in the --trajectories files"
        )
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
        **({} if args.feature_version is None else {"feature_version": args.feature_version}),
    )
    try:
        path = policy.save(args.out)
    except OSError as exc:
        raise UserInputError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    print(report.format())
    if labels is not None and labels.transitions:
        print(_comparison(args, labels, policy, cfg))
    if llm is not None:
        check_model_reached(llm)
    print(f"Saved the policy to {path} (use --policy {path})")
    sys.stdout.flush()
    return EXIT_OK


def _check_options(args: argparse.Namespace) -> None:
    if args.trajectories is None and args.log is None:
        raise UserInputError("say what to train from: --log LOG and/or --trajectories FILE...")
    for flag, value in (("--gold", args.gold), ("--branch", args.branch)):
        if value and args.log is None:
            raise UserInputError(f"{flag} labels the runs of a log: it needs --log")
    if args.branch and args.gold is None:
        raise UserInputError("--branch labels the branches with your gold: it needs --gold")
    for flag, value in (("--corpus", args.corpus), ("--index", args.index)):
        if value is not None and args.log is None:
            raise UserInputError(f"{flag} applies to --log only")


def _gather(
    args: argparse.Namespace, cfg: Configuration
) -> tuple[list[TransitionFields], Any, Any]:
    """(records, how the log was labelled or None, the model client when branching)."""
    from dynakrag.training.records import read_records

    records = read_records(args.trajectories) if args.trajectories else []
    if args.log is None:
        return records, None, None
    from dynakrag.actions.common import Resources
    from dynakrag.training.gold import read_gold
    from dynakrag.training.retrain import label_log
    from dynakrag.training.trajectories import describe_log

    gold = read_gold(args.gold) if args.gold is not None else None
    if gold is not None and args.corpus is not None:
        _check_support_ids(gold, args.corpus)
    resources, llm = None, None
    if args.branch:
        from dynakrag.cli.searcher import searcher_from_flags  # as ask, for the same flags

        llm = make_llm(cfg)
        searcher = searcher_from_flags(args.index, args.corpus, cfg, progress=True)
        resources = Resources(searcher=searcher, llm=llm)
        print("branching from every logged state (each branch runs the model)...", flush=True)
    labels = label_log(args.log, gold, cfg, branch=resources)
    print(labels.format(describe_log(args.log)))
    return records + labels.records, labels, llm


def _check_support_ids(gold: Any, corpus: Path) -> None:
    """Fail when no support id of the gold file is a passage of ``corpus`` (the wrong corpus,
    or ids that never match), and say how many do not."""
    from dynakrag.retrieval.corpus import load_corpus

    ids = {passage.id for passage in load_corpus(corpus)}
    named = {pid for row in gold.rows for item in row.support for pid in item}
    unknown = sorted(named - ids)
    if named and len(unknown) == len(named):
        raise UserInputError(
            f"none of the support ids in {gold.source} is a passage of {corpus} "
            f"(e.g. {unknown[0]!r}): is it the corpus the runs searched?"
        )
    if unknown:
        print(
            f"warning: {len(unknown)} support ids of the gold file are not in {corpus} "
            f"(e.g. {unknown[0]!r})",
            file=sys.stderr,
        )


def _comparison(args: argparse.Namespace, labels: Any, policy: Any, cfg: Configuration) -> str:
    """How the new policy decides on the logged states, against the runs and the base."""
    from dynakrag.training.retrain import compare_decisions

    base = None
    if args.base == "default":
        from dynakrag.policy.registry import resolve_policy

        base = resolve_policy("learned")
    comparison = compare_decisions(
        labels.transitions, policy, cfg, base=base, base_name="shipped learned"
    )
    return comparison.format()
