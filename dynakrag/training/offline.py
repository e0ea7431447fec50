"""Judge a policy on collected records alone: no retriever, no model calls.

Collection records a tree per question: every state a rollout visited, with every valid
action's outcome (support recall after it, and for the answer actions the F1 of the answer
written right after it). :func:`replay_on_records` lets a policy walk that tree from the
initial state, choosing from each recorded state's valid actions on the state's stored
``feature_inputs``, until it answers (``stop_answer`` or ``compress_answer_evidence``) or
chooses an action whose next state no rollout visited ("off the tree"). The walk's support
recall is that of the last outcome it reached, so it is exact while on the tree and a lower
bound of what the policy would reach after leaving it; its answer F1 is known only when it
answered on the tree.

This is how the generalisation checks (``benchmarks/policy_generalisation.py``: leave one
dataset out, smaller training sets) compare policies without running the model. The
behaviour policy the rollouts followed (the heuristic) stays on its own tree more often than
another policy, which favours it in this comparison.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dynakrag.configuration import Configuration
from dynakrag.policy.base import Policy
from dynakrag.policy.features import CONFIG_FIELDS

__all__ = ["QuestionWalk", "RecordedState", "WalkSummary", "recorded_trees", "replay_on_records"]

_ANSWERS = frozenset({"stop_answer", "compress_answer_evidence"})


@dataclass
class RecordedState:
    """One recorded state: its stored inputs, valid actions and the record of each action."""

    state: Mapping[str, Any]
    budgets: Mapping[str, int]
    valid: list[str]
    records: dict[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass
class QuestionWalk:
    """Where one policy's walk through one question's tree ended."""

    dataset: str
    example_id: str
    actions: list[str]
    support_recall: float
    f1: float | None
    """F1 of the answer when the walk answered on the tree, else None."""
    on_tree: bool
    """The walk answered within the recorded tree."""
    retrieval_calls: int


@dataclass
class WalkSummary:
    """Means over the questions of :func:`replay_on_records`."""

    questions: int
    support_recall: float
    f1: float | None
    """Mean answer F1 over the walks that answered on the tree (None if none did)."""
    on_tree: float
    """Share of walks that answered on the tree."""
    retrieval_calls: float
    walks: list[QuestionWalk] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The means (not the walks), JSON-ready."""
        return {
            "questions": self.questions,
            "support_recall": self.support_recall,
            "f1": self.f1,
            "on_tree": self.on_tree,
            "retrieval_calls": self.retrieval_calls,
        }


def recorded_trees(
    records: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, str], dict[tuple[str, ...], RecordedState]]:
    """``{(dataset, example_id): {history: RecordedState}}`` of records that carry ``state``
    (records without one cannot be replayed and are left out)."""
    trees: dict[tuple[str, str], dict[tuple[str, ...], RecordedState]] = {}
    for record in records:
        if not isinstance(record.get("state"), Mapping):
            continue
        question = (str(record.get("dataset", "")), str(record.get("example_id", "")))
        history = tuple(record.get("history") or [])
        tree = trees.setdefault(question, {})
        node = tree.get(history)
        if node is None:
            node = tree[history] = RecordedState(
                record["state"], record.get("budgets") or {}, list(record.get("valid") or [])
            )
        node.records[str(record["action"])] = record
    return trees


def _config(budgets: Mapping[str, int], base: Configuration) -> Configuration:
    return base.merged({name: budgets[name] for name in CONFIG_FIELDS if name in budgets})


def _walk(
    policy: Policy,
    question: tuple[str, str],
    tree: Mapping[tuple[str, ...], RecordedState],
    base: Configuration,
) -> QuestionWalk | None:
    history: tuple[str, ...] = ()
    if history not in tree:
        return None  # the initial state was not recorded (a partial log)
    actions: list[str] = []
    calls = 0
    sr = float(tree[history].records[next(iter(tree[history].records))]["sr_before"])
    while True:
        node = tree[history]
        cfg = _config(node.budgets, base)
        choice = policy.choose(node.state, node.valid, cfg)  # type: ignore[arg-type]
        actions.append(choice)
        record = node.records.get(choice)
        if record is None:  # no outcome recorded for it (collected without branching)
            return QuestionWalk(*question, actions, sr, None, False, calls)
        sr = float(record["sr_after"])
        calls += int((record.get("deltas") or {}).get("retrieval_calls", 0))
        if choice in _ANSWERS:
            f1 = record.get("f1_after")
            return QuestionWalk(*question, actions, sr, f1, f1 is not None, calls)
        history = (*history, choice)
        if history not in tree or not tree[history].valid:
            return QuestionWalk(*question, actions, sr, None, False, calls)


def replay_on_records(
    policy: Policy,
    records: Iterable[Mapping[str, Any]],
    *,
    base: Configuration | None = None,
) -> WalkSummary:
    """Walk ``policy`` through each question's recorded tree (see the module docstring).

    ``base`` gives the settings the records do not store (``cost_lambda``); each state's
    budgets come from its records.
    """
    base = base or Configuration()
    trees = recorded_trees(records)
    walks = [
        walk
        for question in sorted(trees)
        if (walk := _walk(policy, question, trees[question], base)) is not None
    ]
    if not walks:
        return WalkSummary(0, 0.0, None, 0.0, 0.0, [])
    answered = [w.f1 for w in walks if w.f1 is not None]
    return WalkSummary(
        questions=len(walks),
        support_recall=sum(w.support_recall for w in walks) / len(walks),
        f1=sum(answered) / len(answered) if answered else None,
        on_tree=sum(w.on_tree for w in walks) / len(walks),
        retrieval_calls=sum(w.retrieval_calls for w in walks) / len(walks),
        walks=walks,
    )
