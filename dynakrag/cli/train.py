"""``dynakrag train``: fit the learned policy from collected trajectories.

``dynakrag train --trajectories FILE... --out POLICY [--seed S]`` fits the learned policy
(:mod:`dynakrag.training.fit`), prints held-out R² per action and the top feature importances,
and writes the policy file, usable as ``--policy POLICY``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dynakrag.cli.arguments import EXIT_OK, fraction, positive_int
from dynakrag.errors import UserInputError


def add_parser(subparsers: Any) -> None:
    """Add the ``train`` command to ``subparsers`` (from ``add_subparsers``)."""
    parser = subparsers.add_parser("train", help="fit a learned policy from trajectories")
    parser.add_argument(
        "--trajectories", type=Path, nargs="+", required=True, help="JSONL files from collect"
    )
    parser.add_argument("--out", type=Path, required=True, help="policy file to write (.npz)")
    parser.add_argument("--seed", type=int, default=13, help="forest and split seed")
    parser.add_argument("--n-estimators", type=positive_int, default=300)
    parser.add_argument("--min-samples-leaf", type=positive_int, default=8)
    parser.add_argument("--holdout", type=fraction, default=0.2, help="held-out questions")
    parser.add_argument("--continuation-margin", type=float, default=None)
    parser.add_argument("--jobs", type=int, default=None, help="parallel jobs for the forests")
    parser.set_defaults(handler=run_train)


def run_train(args: argparse.Namespace) -> int:
    """Fit the value model's forests, print the fit report and save the policy file."""
    from dynakrag.policy.learned import DEFAULT_CONTINUATION_MARGIN
    from dynakrag.training.collect import read_records
    from dynakrag.training.fit import fit_policy

    records = read_records(args.trajectories)
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
