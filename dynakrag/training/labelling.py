"""The labels of collection: what running an action from a state gave, and the records of it.

The label definitions (``labels``: :data:`LABELS`; the support-recall and answer-F1 labels and
the continuation label) are :mod:`dynakrag.training.collect`'s module docstring. This module
holds what the exploration rollouts of :func:`~dynakrag.training.collect.collect` and the
logged runs of :func:`~dynakrag.training.logged_runs.records_from_transitions` share: a visited
state (:class:`StateNode`) with the outcome of each action run from it (:class:`Outcome`, run
once through the graph's checkpoints by :class:`~dynakrag.graph.replay.Branches`), the answers
written from states, the continuation labels of a path, and the records of a question's nodes
(:mod:`dynakrag.training.records`' format).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dynakrag.configuration import Configuration
from dynakrag.data.datasets import QAExample
from dynakrag.eval.metrics import f1_score, state_support_recall
from dynakrag.graph.replay import Branches
from dynakrag.policy.features import (
    FEATURE_SCHEMA_VERSION,
    feature_config,
    feature_inputs,
    featurize,
)
from dynakrag.state import ACQUISITION_ACTIONS, State
from dynakrag.training.records import RECORD_SCHEMA, TransitionFields

__all__ = [
    "ANSWER_ACTIONS",
    "COUNTERS",
    "LABELS",
    "LABEL_VERSION",
    "AnsweredStates",
    "GoldItems",
    "Outcome",
    "StateNode",
    "answer_f1",
    "answered_state",
    "counter_deltas",
    "label",
    "node_records",
    "raise_continuation",
    "run_outcome",
    "stop_f1",
    "unrun_outcome",
]

LABEL_VERSION = 2
"""Version of the label definitions (records carry it as ``label_version``; 1 before answers)."""
ANSWER_ACTIONS: frozenset[str] = frozenset(
    {"stop_answer", "compress_answer_evidence", "sufficiency_check"}
)
"""Actions labelled by the answer written right after them."""
COUNTERS: tuple[str, ...] = ("retrieval_calls", "llm_calls", "prompt_tokens", "completion_tokens")
LABELS: tuple[str, ...] = ("recall", "answer", "visited-answer")
"""The label definitions :func:`~dynakrag.training.collect.collect` can write (its module
docstring); the first is the default."""
GoldItems = Sequence[str | frozenset[str] | Iterable[str]]


def label(action: str, sr_before: float, sr_after: float, answer_f1: float | None = None) -> float:
    """v(s, a) for training (see :mod:`dynakrag.training.collect`): the support-recall gain
    ``SR(s') - SR(s)`` of an acquisition action; for an answer action (stop_answer,
    compress_answer_evidence, sufficiency_check) ``answer_f1``, the F1 of the answer written
    right after it. Without ``answer_f1`` (no gold answer known) an answer action keeps its
    label-version-1 support-recall label."""
    if action in ACQUISITION_ACTIONS:
        return sr_after - sr_before
    if action not in ANSWER_ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    if answer_f1 is not None:
        return answer_f1
    if action == "sufficiency_check":
        return 1.0 if sr_before >= 1.0 else 0.0
    if action == "stop_answer":
        return sr_before
    return sr_after


@dataclass
class Outcome:
    """What running one action from a state gave."""

    state: State | None  # None when not run (a logged stop_answer without its final state)
    sr_after: float
    deltas: dict[str, int]
    answer: str | None = None
    """Answer actions: the answer written right after the action (from ``state``)."""
    f1: float | None = None
    """Its F1 against the gold answers (None without gold answers or for acquisition)."""


@dataclass
class StateNode:
    """A visited state, its outcomes and the labels of the state itself."""

    history: tuple[str, ...]
    state: State
    sr: float
    valid: list[str]
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    chosen: set[str] = field(default_factory=set)
    continuation: float = 0.0
    """Answer F1 still to gain by going on (support recall for label-version-1 records)."""
    continuation_support: float | None = None
    """Support recall still to gain by going on (None: same as ``continuation``)."""
    f1: float | None = None
    """F1 of the answer written by stopping here (None: stopping is not valid, or no gold)."""


AnsweredStates = dict[tuple[str, ...], State]
"""Final states of the answers written so far, by the history of the state answered."""


def answered_state(
    state: State,
    history: tuple[str, ...],
    branches: Branches,
    answered: AnsweredStates | None,
) -> State:
    """The state after the graph's own answer step from ``state`` (written once per history
    when ``answered`` keeps them)."""
    if answered is not None and history in answered:
        return answered[history]
    final = branches.step(state, "stop_answer")
    if answered is not None:
        answered[history] = final
    return final


def answer_f1(final: State, answers: Sequence[str]) -> float | None:
    return f1_score(str(final.get("answer") or ""), answers) if answers else None


def counter_deltas(before: State, after: State) -> dict[str, int]:
    return {c: int(after.get(c, 0)) - int(before.get(c, 0)) for c in COUNTERS}


def run_outcome(
    node: StateNode,
    action: str,
    branches: Branches,
    gold: GoldItems,
    *,
    answers: Sequence[str] = (),
    answered: AnsweredStates | None = None,
    answer_after: bool = True,
) -> Outcome:
    """The outcome of ``action`` from ``node`` (run once through the graph's checkpoints by
    ``branches``, then remembered on the node); also what ``dynakrag train --branch`` runs
    from logged states.

    With ``answer_after``, an answer action also gets the answer written right after it
    (``stop_answer`` is that answer; after ``compress_answer_evidence`` or
    ``sufficiency_check`` the graph's answer step runs on the new state) and its F1 against
    ``answers``; an outcome run without it gets its answer when asked again with it.
    ``answered`` shares the answers between outcomes (the state after a check is also the
    next node). An outcome labelled without running (:func:`unrun_outcome`) is run when asked
    for."""
    known = node.outcomes.get(action)
    if known is not None and known.state is not None:
        if answer_after and action in ANSWER_ACTIONS and known.answer is None:
            _answer_after(known, node, action, branches, answers, answered)
        return known
    if action == "stop_answer":
        after = answered_state(node.state, node.history, branches, answered)
    else:
        after = branches.step(node.state, action)
    result = Outcome(after, state_support_recall(after, gold), counter_deltas(node.state, after))
    if action == "stop_answer" or (answer_after and action in ANSWER_ACTIONS):
        _answer_after(result, node, action, branches, answers, answered)
    node.outcomes[action] = result
    return result


def _answer_after(
    result: Outcome,
    node: StateNode,
    action: str,
    branches: Branches,
    answers: Sequence[str],
    answered: AnsweredStates | None,
) -> None:
    """Give an answer action's outcome the answer written right after it, and its F1."""
    after = result.state
    assert after is not None
    final = (
        after
        if action == "stop_answer"
        else answered_state(after, (*node.history, action), branches, answered)
    )
    result.answer = str(final.get("answer") or "")
    result.f1 = answer_f1(final, answers)


def unrun_outcome(node: StateNode) -> Outcome:
    """The outcome of an action labelled without running it (recall labels of stop_answer
    and of a sufficiency_check no rollout chooses: they read only ``SR(s)``)."""
    return Outcome(None, node.sr, dict.fromkeys(COUNTERS, 0))


def stop_f1(
    node: StateNode,
    branches: Branches,
    answers: Sequence[str],
    answered: AnsweredStates,
) -> float | None:
    """F1 of answering at ``node`` (None where stopping is not valid, as before any
    evidence); the stop branch's answer when it ran."""
    if "stop_answer" not in node.valid or not answers:
        return None
    if "stop_answer" in node.outcomes:
        return node.outcomes["stop_answer"].f1
    final = answered_state(node.state, node.history, branches, answered)
    return answer_f1(final, answers)


def raise_continuation(path: Sequence[StateNode], values: Sequence[float], name: str) -> None:
    """Raise each path node's ``name`` to the best later value minus its own (``values``:
    one per node of the path, then the value the rollout ended with, if any)."""
    for index, visited in enumerate(path):
        gain = max(values[index + 1 :], default=values[index]) - values[index]
        setattr(visited, name, max(getattr(visited, name) or 0.0, gain))


def node_records(
    example: QAExample,
    nodes: Mapping[tuple[str, ...], StateNode],
    cfg: Configuration,
    *,
    collection: Mapping[str, Any] | None = None,
    answers: bool = True,
) -> Iterator[TransitionFields]:
    """The records of one example's nodes (:mod:`dynakrag.training.records`' format); without
    ``answers`` (the recall labels) every record is of label version 1."""
    budgets = feature_config(cfg)
    labelled = [(n, a) for n in nodes.values() for a in n.valid if a in n.outcomes]
    inputs = {id(node): feature_inputs(node.state) for node in nodes.values()}
    for node, action in labelled:
        result = node.outcomes[action]
        state = inputs[id(node)]
        answer_label = action in ANSWER_ACTIONS and result.f1 is not None
        record: TransitionFields = {
            "schema": RECORD_SCHEMA,
            "source": "collect",
            "example_id": example.id,
            "dataset": example.dataset,
            "split": example.split,
            "step": len(node.history),
            "history": list(node.history),
            "feature_version": FEATURE_SCHEMA_VERSION,
            "features": featurize(state, action, cfg).tolist(),
            "state": state,
            "budgets": budgets,
            "valid": list(node.valid),
            "action": action,
            "label": label(action, node.sr, result.sr_after, result.f1),
            "label_version": (
                LABEL_VERSION if answer_label or (answers and action not in ANSWER_ACTIONS) else 1
            ),
            "sr_before": node.sr,
            "sr_after": result.sr_after,
            "f1_before": node.f1,
            "f1_after": result.f1,
            "answer": result.answer,
            "continuation": node.continuation,
            "continuation_support": (
                node.continuation
                if node.continuation_support is None
                else node.continuation_support
            ),
            "chosen": action in node.chosen,
            "executed": result.state is not None,
            "deltas": dict(result.deltas),
            "question_records": len(labelled),
        }
        if collection is not None:
            record["collection"] = dict(collection)
        yield record
