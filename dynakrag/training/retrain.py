"""Retraining the controller from a trajectory log: what ``dynakrag train --log`` does.

* :func:`label_log`: the labelled records a log yields: those stored in it by
  ``dynakrag collect --log`` and, with a gold file, those of its logged runs
  (:func:`~dynakrag.training.logged_runs.records_from_transitions`, optionally with counterfactual
  branches from every logged state).
* :func:`base_records`: the training records of the shipped policy (or of a records file), to
  pool with the user's so that a few dozen logged questions adapt the shipped policy instead of
  replacing it. They ship next to the policy file, gzip-compressed JSONL
  (:data:`DEFAULT_POLICY_RECORDS`, written by ``make default-policy``).
* :func:`compare_decisions`: on the logged states, the action a new policy chooses against the
  action the run took and the one a base policy chooses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dynakrag.actions.common import Resources
from dynakrag.configuration import Configuration
from dynakrag.errors import UserInputError
from dynakrag.graph.controller import decide
from dynakrag.graph.nodes import fixed_successor
from dynakrag.graph.validity import valid_actions
from dynakrag.policy.base import Policy
from dynakrag.policy.registry import DEFAULT_POLICY_FILE
from dynakrag.training.gold import GoldBook
from dynakrag.training.logged_runs import records_from_transitions, split_runs
from dynakrag.training.records import TransitionFields, checked_records, read_records
from dynakrag.training.trajectories import (
    LogTarget,
    Transition,
    describe_log,
    log_exists,
    read_log_records,
    read_transitions,
)

__all__ = [
    "DEFAULT_POLICY_RECORDS",
    "DecisionComparison",
    "LogLabels",
    "base_records",
    "compare_decisions",
    "label_log",
]

DEFAULT_POLICY_RECORDS = DEFAULT_POLICY_FILE.with_name("default_policy.records.jsonl.gz")
"""The shipped policy's training records (gzip-compressed JSONL, ``make default-policy``)."""


@dataclass
class LogLabels:
    """The records a log yields, and how its runs were matched to gold."""

    records: list[TransitionFields]
    stored: int
    """Records read from the log's records table (``collect --log``)."""
    runs: int
    by_support: list[str] = field(default_factory=list)
    """Run ids labelled with gold support."""
    by_answer: list[str] = field(default_factory=list)
    """Run ids labelled by answer correctness alone (no support in their gold row)."""
    without_gold: list[str] = field(default_factory=list)
    eval_runs: list[str] = field(default_factory=list)
    """Runs of eval rows (``eval --log``), never trained on."""
    transitions: list[Transition] = field(default_factory=list)

    def format(self, target: str) -> str:
        """A few lines for the command line."""
        lines = [f"log {target}: {self.runs} logged runs, {self.stored} stored records"]
        if self.by_support or self.by_answer or self.without_gold:
            lines.append(
                f"  gold: {len(self.by_support)} runs by support, {len(self.by_answer)} by "
                f"answers only (weaker labels), {len(self.without_gold)} without gold (skipped)"
            )
        if self.eval_runs:
            lines.append(f"  {len(self.eval_runs)} runs of eval rows skipped (never trained on)")
        lines.append(f"  {len(self.records)} labelled records in all")
        return "\n".join(lines)


def label_log(
    target: LogTarget,
    gold: GoldBook | None,
    cfg: Configuration,
    *,
    branch: Resources | None = None,
    behaviour: Policy | None = None,
) -> LogLabels:
    """The labelled records of the log at ``target`` (see the module docstring); runs are
    labelled only with ``gold``, branched only with ``branch`` resources."""
    if not log_exists(target):
        raise UserInputError(f"no trajectory log at {describe_log(target)}")
    stored = checked_records(read_log_records(target), describe_log(target))
    transitions = read_transitions(target)
    labels = LogLabels(records=list(stored), stored=len(stored), runs=0, transitions=transitions)
    for run in split_runs(transitions):
        labels.runs += 1
        run_id = run[0].thread_id
        if run[0].run.get("split") == "eval":
            labels.eval_runs.append(run_id)
            continue
        if gold is None:
            continue
        question = run[0].state.get("question")
        row = gold.match(run_id, question if isinstance(question, str) else None)
        if row is None:
            labels.without_gold.append(run_id)
        else:
            (labels.by_support if row.has_support else labels.by_answer).append(run_id)
    if gold is not None:
        labels.records += records_from_transitions(
            transitions, gold, cfg, branch=branch, behaviour=behaviour
        )
    return labels


def base_records(spec: str) -> list[TransitionFields]:
    """The records to pool with: ``"default"`` (the shipped policy's) or a records file."""
    if spec == "default":
        if not DEFAULT_POLICY_RECORDS.is_file():
            raise UserInputError(
                "--base default needs the shipped policy's training records, which are not "
                f"installed ({DEFAULT_POLICY_RECORDS}): rebuild them with 'make default-policy' "
                "(it writes them next to the policy), pass a records file to --base, or train "
                "without --base"
            )
        return read_records(DEFAULT_POLICY_RECORDS)
    if not Path(spec).is_file():
        raise UserInputError(f"--base: no records file at {spec} (or say 'default')")
    return read_records(spec)


@dataclass
class DecisionComparison:
    """How a new policy decides on logged states, against the logged and a base policy's."""

    decisions: int = 0
    """Logged states with more than one valid action."""
    changed_vs_logged: Counter[tuple[str, str]] = field(default_factory=Counter)
    """``(logged action, new action)`` where they differ."""
    changed_vs_base: Counter[tuple[str, str]] | None = None
    """``(base policy's action, new action)`` where they differ (None without a base)."""
    base_name: str = "base"

    def format(self, top: int = 8) -> str:
        """A few lines for the command line."""

        def moves(counter: Counter[tuple[str, str]], source: str) -> list[str]:
            total = sum(counter.values())
            lines = [f"  differs from {source} on {total} of {self.decisions} decisions"]
            lines.extend(
                f"    {before} -> {after}: {count}"
                for (before, after), count in counter.most_common(top)
            )
            return lines

        lines = ["decisions of the new policy on the logged states:"]
        lines += moves(self.changed_vs_logged, "the logged runs")
        if self.changed_vs_base is not None:
            lines += moves(self.changed_vs_base, f"the {self.base_name} policy")
        return "\n".join(lines)


def compare_decisions(
    transitions: Iterable[Transition],
    policy: Policy,
    cfg: Configuration,
    *,
    base: Policy | None = None,
    base_name: str = "base",
) -> DecisionComparison:
    """Decide every logged decision state again with ``policy`` (and ``base``) through the
    controller's own :func:`~dynakrag.graph.controller.decide`; count where choices differ."""
    comparison = DecisionComparison(
        changed_vs_base=Counter() if base is not None else None, base_name=base_name
    )
    for transition in transitions:
        state: Mapping[str, Any] = transition.state
        if fixed_successor(state) is not None or len(valid_actions(state, cfg)) < 2:
            continue  # a fixed edge (no controller step) or a forced step: no choice
        comparison.decisions += 1
        new = decide(state, policy, cfg)["next_action"]
        if new != transition.action:
            comparison.changed_vs_logged[(transition.action, new)] += 1
        if base is not None and comparison.changed_vs_base is not None:
            old = decide(state, base, cfg)["next_action"]
            if old != new:
                comparison.changed_vs_base[(old, new)] += 1
    return comparison
