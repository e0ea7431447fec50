"""Argument types, exit codes, the parser class and the run options shared by the commands."""

from __future__ import annotations

import argparse
from typing import NoReturn

from dynakrag.configuration import Configuration

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def fraction(text: str) -> float:
    """argparse type: a number in [0, 1] (a probability)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
    return value


def holdout_fraction(text: str) -> float:
    """argparse type: a number in [0, 1) (a held-out share: something must be left to fit)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}")
    return value


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of the commands that answer questions with the graph (demo, ask)."""
    parser.add_argument("--max-steps", type=positive_int, help="control steps before answering")
    parser.add_argument(
        "--policy",
        help="heuristic (default), learned (the shipped trained policy), uniform, fixed or a "
        "trained policy file (.npz)",
    )
    parser.add_argument("--quiet", action="store_true", help="print only the answer")


def run_configuration(args: argparse.Namespace) -> Configuration:
    """Settings from the environment and the run options; the policy is checked before
    anything loads."""
    from dynakrag.policy.registry import resolve_policy

    cfg = Configuration.from_env(max_steps=args.max_steps, policy=args.policy)
    resolve_policy(cfg.policy)
    return cfg
