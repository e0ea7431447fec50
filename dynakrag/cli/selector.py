"""``dynakrag train-selector``: fit DS-RAG's GS selector on DS-RAG TRAIN rows.

``dynakrag train-selector [--limit N] [--epochs E] [--seed S] [--out PATH.npz]
[--criteria rule|metadata] [--holdout F] [--k-retrieved K] [--batch-size B]
[--temperature T] [--learning-rate LR] [--weight-decay W] [--threads N]`` builds selection examples
(:mod:`dynakrag.dsrag.selector_training`) from the first N train rows of each DS-RAG dataset,
fits with a progress bar, prints the held-out top-1 accuracy (anchors unseen in training)
against the untrained model (plain cosine) and the parameter count, and writes ``PATH.npz``
(weights) plus ``PATH.json`` (metadata with the weights' SHA-256). ``--criteria rule`` (the
default) uses the inference-time rule-based criteria; ``metadata`` builds one criterion per
person from the row's people and attribute. The shipped model is
``dynakrag/dsrag/models/gs-selector.npz``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dynakrag.cli.arguments import EXIT_OK, holdout_fraction, positive_float, positive_int
from dynakrag.errors import UserInputError


def add_parser(subparsers: Any) -> None:
    """Add the ``train-selector`` command to ``subparsers`` (from ``add_subparsers``)."""
    parser = subparsers.add_parser(
        "train-selector", help="fit DS-RAG's graph-based chunk selector on DS-RAG train rows"
    )
    parser.add_argument(
        "--limit", type=positive_int, help="use the first N train questions of each dataset"
    )
    parser.add_argument("--epochs", type=positive_int, default=10)
    parser.add_argument("--seed", type=int, default=13, help="initialisation, order and split")
    parser.add_argument(
        "--out", type=Path, default=Path("gs-selector.npz"), help="weights file (.npz)"
    )
    parser.add_argument(
        "--criteria",
        default="rule",
        choices=["rule", "metadata"],
        help="rule-based criteria from the question, or one per person from the row",
    )
    parser.add_argument(
        "--holdout", type=holdout_fraction, default=0.2, help="held-out anchor share"
    )
    parser.add_argument(
        "--k-retrieved", type=int, default=5, help="BM25 chunks added to each candidate set"
    )
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument("--temperature", type=positive_float, default=0.05)
    parser.add_argument("--learning-rate", type=positive_float, default=2e-3)
    parser.add_argument(
        "--weight-decay", type=float, default=1e-3, help="Adam L2 penalty (0 switches it off)"
    )
    parser.add_argument("--threads", type=positive_int, help="torch CPU threads")
    parser.set_defaults(handler=run_train_selector)


def run_train_selector(args: argparse.Namespace) -> int:
    """Fit the selector, print the held-out report and save the weights with their metadata."""
    import torch

    from dynakrag.dsrag.selector_training import metadata_criteria, rule_criteria, train_selector

    if args.out.suffix != ".npz":
        raise UserInputError(f"--out must end in .npz, got {args.out}")
    if args.k_retrieved < 0:
        raise UserInputError(f"--k-retrieved must be >= 0, got {args.k_retrieved}")
    if not 0.0 <= args.weight_decay < float("inf"):
        raise UserInputError(f"--weight-decay must be >= 0, got {args.weight_decay}")
    if args.threads:
        torch.set_num_threads(args.threads)
    criteria_fn = metadata_criteria if args.criteria == "metadata" else rule_criteria()
    selector, report, stats = train_selector(
        limit=args.limit,
        criteria_fn=criteria_fn,
        holdout=args.holdout,
        k_retrieved=args.k_retrieved,
        progress=True,
        epochs=args.epochs,
        random_state=args.seed,
        batch_size=args.batch_size,
        temperature=args.temperature,
        learning_rate=args.learning_rate,
        weight_decay=args.weight_decay,
    )
    try:
        path = selector.save(args.out)
    except OSError as exc:
        raise UserInputError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    counts = selector.parameter_counts()
    print(f"data: {stats.format()}")
    print(report.format())
    print(
        f"parameters: graph encoder {counts['graph_encoder']:,} + projection "
        f"{counts['projection']:,} = {counts['trainable']:,} (frozen text encoder not counted)"
    )
    print(f"Saved the selector to {path} and {path.with_suffix('.json')}")
    sys.stdout.flush()
    return EXIT_OK
