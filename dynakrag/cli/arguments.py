"""Argument types, exit codes, the parser class and the run options shared by the commands."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any, NoReturn

from dynakrag.cli.runlog import add_log_option
from dynakrag.configuration import Configuration

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130


def policy_help(*extra: str) -> str:
    """``--policy``'s help: the policies every command takes, ``extra`` ones, and the default
    (read from the configuration, so the help cannot go stale when it changes)."""
    choices = [
        "heuristic (hand-written)",
        "learned (the shipped trained policy)",
        "uniform (random valid action)",
        "fixed (hand-written schedule)",
        *extra,
        "or a trained policy file (.npz)",
    ]
    default = Configuration.model_fields["policy"].default
    return f"{', '.join(choices)}; default: {default}"


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def _number_type(
    cast: Callable[[str], float], accepts: Callable[[float], bool], expected: str, name: str
) -> Callable[[str], Any]:
    """An argparse type: ``cast(text)`` when it parses and ``accepts`` it, else a one-line error
    saying what was ``expected``."""

    def parse(text: str) -> Any:
        try:
            value = cast(text)
        except ValueError:
            value = None
        if value is None or not accepts(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    parse.__name__ = parse.__qualname__ = name  # argparse names the type in its messages
    return parse


positive_int = _number_type(int, lambda v: v >= 1, "a positive integer", "positive_int")
"""argparse type: an integer >= 1."""
positive_float = _number_type(
    float, lambda v: 0 < v < math.inf, "a positive number", "positive_float"
)
"""argparse type: a finite number > 0."""
fraction = _number_type(float, lambda v: 0.0 <= v <= 1.0, "a number in [0, 1]", "fraction")
"""argparse type: a number in [0, 1] (a probability)."""
holdout_fraction = _number_type(
    float, lambda v: 0.0 <= v < 1.0, "a number in [0, 1)", "holdout_fraction"
)
"""argparse type: a number in [0, 1) (a held-out share: something must be left to fit)."""


def add_worker_options(parser: argparse.ArgumentParser) -> None:
    """``--workers N`` / ``--scheduler ADDRESS``: the commands that run many questions
    (collect, eval) fan them out over Dask workers (:mod:`dynakrag.workers`)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="run the questions on N worker processes of a local Dask cluster (a rerun "
        "resumes an interrupted one)",
    )
    group.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the questions on an existing Dask cluster, e.g. tcp://HOST:8786",
    )


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of the commands that answer questions with the graph (demo, ask)."""
    parser.add_argument("--max-steps", type=positive_int, help="control steps before answering")
    parser.add_argument("--policy", help=policy_help())
    add_llm_option(parser)
    add_token_budget_option(parser)
    parser.add_argument("--quiet", action="store_true", help="print only the answer")
    add_log_option(parser)


def add_llm_option(parser: argparse.ArgumentParser) -> None:
    """``--llm PROVIDER:MODEL``: the ``llm`` setting (ask, demo, eval)."""
    parser.add_argument(
        "--llm",
        metavar="PROVIDER:MODEL",
        help="answer with this provider's chat model, built by LangChain's init_chat_model, "
        "e.g. openai:gpt-4o-mini (the provider's package and API key must be there; "
        "default: DYNAKRAG_LLM, else the endpoint or the embedded model)",
    )


def add_token_budget_option(parser: argparse.ArgumentParser) -> None:
    """``--token-budget N``: the ``token_budget`` setting (ask, demo, eval)."""
    parser.add_argument(
        "--token-budget",
        type=positive_int,
        metavar="N",
        help="tokens (prompt + completion) a question may cost: the controller stops acquiring "
        "when the rest cannot pay for another action and the answer; a calibrated policy also "
        "picks its lambda for N",
    )


def run_configuration(args: argparse.Namespace) -> Configuration:
    """Settings from the environment and the run options; the policy is checked before
    anything loads."""
    from dynakrag.policy.registry import resolve_policy

    cfg = Configuration.from_env(
        max_steps=args.max_steps, policy=args.policy, token_budget=args.token_budget, llm=args.llm
    )
    resolve_policy(cfg.policy)
    return cfg
