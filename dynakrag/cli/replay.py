"""``dynakrag replay THREAD --step K --action A``: what if the controller had chosen A at step K
of a logged run. The logged state before that decision is written into an in-memory
checkpoint, the action forced there and the run finished by the graph itself
(:func:`dynakrag.graph.replay.what_if`); both traces are printed side by side."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dynakrag.cli.arguments import EXIT_OK, add_llm_option, policy_help, run_configuration
from dynakrag.errors import UserInputError
from dynakrag.state import ACTIONS, State

COLUMN = 34
"""Width of the logged run's column."""


def add_parser(subparsers: Any) -> None:
    """Add the ``replay`` command to ``subparsers`` (from ``add_subparsers``)."""
    parser = subparsers.add_parser(
        "replay", help="what if the controller had chosen another action at one step of a run"
    )
    parser.add_argument("thread", help="the run's id (its thread; 'ask --log --json' prints it)")
    parser.add_argument(
        "--step", type=int, required=True, metavar="K", help="the K-th action of the run (1: first)"
    )
    parser.add_argument("--action", required=True, choices=ACTIONS, help="the action to force")
    parser.add_argument(
        "--log",
        metavar="FILE|URL",
        required=True,
        help="the trajectory log the run is in: a SQLite file or postgresql://...",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--corpus", type=Path, help="the corpus the run searched (JSONL/folder)")
    source.add_argument("--index", metavar="DIR|URL", help="the index the run searched")
    parser.add_argument("--policy", help="the policy that chooses after step K: " + policy_help())
    parser.add_argument("--max-steps", type=int, help="control steps before answering")
    add_llm_option(parser)
    parser.set_defaults(handler=run_replay, token_budget=None, quiet=False, json=False)


def run_replay(args: argparse.Namespace) -> int:
    from dynakrag.actions.common import Resources
    from dynakrag.cli.generator import make_llm
    from dynakrag.cli.searcher import searcher_from_flags
    from dynakrag.graph.replay import what_if
    from dynakrag.policy.registry import resolve_policy
    from dynakrag.training.trajectories import read_transitions

    transitions = read_transitions(args.log, args.thread)
    if not transitions:
        raise UserInputError(f"no run {args.thread!r} in {args.log}")
    if not 1 <= args.step <= len(transitions):
        raise UserInputError(
            f"--step must be 1..{len(transitions)}: the run took that many actions"
        )
    cfg = run_configuration(args)
    resources = Resources(
        searcher=searcher_from_flags(args.index, args.corpus, cfg, progress=False),
        llm=make_llm(cfg),
    )
    decision = transitions[args.step - 1]
    try:
        final = what_if(decision.state, args.action, resources, cfg, resolve_policy(cfg.policy))
    except ValueError as exc:  # the action is not valid at that step
        raise UserInputError(f"step {args.step}: {exc}") from None
    for line in side_by_side(transitions[-1].next_state, final):
        print(line)
    return EXIT_OK


def side_by_side(logged: State, replayed: State) -> list[str]:
    """The two runs' actions, step by step, then their answers."""
    left = [entry["action"] for entry in logged.get("trace") or []]
    right = [entry["action"] for entry in replayed.get("trace") or []]
    lines = [f"{'step':>4}  {'logged':<{COLUMN}}what if"]
    for index in range(max(len(left), len(right))):
        before = left[index] if index < len(left) else ""
        after = right[index] if index < len(right) else ""
        mark = "" if before == after else "  *"
        lines.append(f"{index + 1:>4}  {before:<{COLUMN}}{after}{mark}")
    lines.append(f"{'':>4}  {_answer(logged):<{COLUMN}}{_answer(replayed)}")
    return lines


def _answer(state: State) -> str:
    if state.get("abstained"):
        return "(abstained)"
    return f"answer: {state.get('answer') or ''}"
