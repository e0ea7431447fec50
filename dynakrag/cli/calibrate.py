"""``dynakrag calibrate``: store a λ calibration curve in a learned policy file.

``dynakrag calibrate --policy P --dataset D [D ...] --split train --limit N [--lambdas ...]
--out P2`` runs the learned policy P at each λ on the first N train questions of each dataset
(:func:`dynakrag.training.calibrate.calibrate`), prints mean tokens, support recall and F1 per λ,
and writes P2: the same policy with the curve and its token cost table, so that
``--token-budget`` runs with ``--policy P2`` choose λ from it. ``--split eval`` is refused (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dynakrag.cli.arguments import EXIT_OK, positive_int
from dynakrag.data.datasets import DATASETS, require_train_split
from dynakrag.errors import UserInputError
from dynakrag.eval.runner import SETTINGS
from dynakrag.routing.factory import RETRIEVERS


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0.0 <= value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def add_parser(subparsers: Any) -> None:
    """Add the ``calibrate`` command to ``subparsers`` (from ``add_subparsers``)."""
    from dynakrag.training.calibrate import DEFAULT_LAMBDAS

    parser = subparsers.add_parser(
        "calibrate",
        help="measure lambda against tokens on train rows and store it in a policy file",
        description="Run a learned policy at several lambdas on train rows; write the policy "
        "with the calibration curve that --token-budget runs choose lambda from.",
    )
    parser.add_argument(
        "--policy", required=True, help="learned (the shipped policy) or a policy file (.npz)"
    )
    parser.add_argument("--dataset", required=True, nargs="+", choices=DATASETS)
    parser.add_argument(
        "--split", default="train", choices=("train", "eval"), help="only 'train' is allowed"
    )
    parser.add_argument("--limit", type=positive_int, help="the first N questions per dataset")
    parser.add_argument(
        "--lambdas",
        nargs="+",
        type=_non_negative,
        default=list(DEFAULT_LAMBDAS),
        help=f"lambda values to measure (default {' '.join(f'{v:g}' for v in DEFAULT_LAMBDAS)})",
    )
    parser.add_argument(
        "--setting", choices=SETTINGS, help="default: each dataset's default, as in eval"
    )
    parser.add_argument(
        "--retriever", choices=RETRIEVERS, help="default: the configuration's retriever"
    )
    parser.add_argument("--no-cache", action="store_true", help="do not use the LLM disk cache")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--out", type=Path, required=True, help="policy file to write (.npz)")
    parser.set_defaults(handler=run_calibrate)


def run_calibrate(args: argparse.Namespace) -> int:
    """Calibrate the policy, print the curve and save the calibrated policy file."""
    from dynakrag.configuration import Configuration
    from dynakrag.policy.learned import LearnedPolicy
    from dynakrag.policy.registry import resolve_policy
    from dynakrag.training.calibrate import calibrate, describe_costs

    require_train_split(args.split, "calibration fits the policy")
    policy = resolve_policy(args.policy)
    if not isinstance(policy, LearnedPolicy):
        raise UserInputError(
            f"--policy {args.policy!r} is not a learned policy: only a trained policy file "
            "(or 'learned') has a lambda to calibrate"
        )
    cfg = Configuration.from_env(retriever=args.retriever)

    def report(point: Any) -> None:
        f1 = "-" if point.f1 is None else f"{point.f1:.3f}"
        print(
            f"λ={point.cost_lambda:g}: {point.tokens:.0f} tokens, SR {point.support_recall:.3f}, "
            f"F1 {f1} (n={point.n})",
            flush=True,
        )

    curve = calibrate(
        policy,
        args.dataset,
        split=args.split,
        limit=args.limit,
        lambdas=args.lambdas,
        setting=args.setting,
        retriever=args.retriever,
        cfg=cfg,
        cache=not args.no_cache,
        progress=not args.quiet,
        on_point=report,
    )
    try:
        path = policy.with_calibration(curve).save(args.out)
    except OSError as exc:
        raise UserInputError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    print(f"Token cost table: {describe_costs(curve.costs)}")
    print(f"Saved the calibrated policy to {path} (use --policy {path} --token-budget N)")
    sys.stdout.flush()
    return EXIT_OK
