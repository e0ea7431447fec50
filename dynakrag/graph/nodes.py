"""The graph's nodes and the edges between them.

:func:`dynakrag.graph.builder.build_graph` wires these into LangGraph (and
:mod:`dynakrag.graph.replay` branches through that graph's checkpoints); it takes from here what
the ``prepare`` node starts a run with (:func:`prepared_state`), what each action node runs
(:func:`run_action`) and where each action leads: back to the controller
(:data:`RETURNS_TO_CONTROLLER`), along a fixed edge (:data:`FIXED_EDGES`), or to the end of the
run (:data:`ENDS_RUN`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from dynakrag.actions.bridge_entity_expand import bridge_entity_expand
from dynakrag.actions.common import Resources
from dynakrag.actions.compress_answer_evidence import compress_answer_evidence
from dynakrag.actions.gap_query import gap_query
from dynakrag.actions.retrieve_more import retrieve_more
from dynakrag.actions.rewrite_query import rewrite_query
from dynakrag.actions.stop_answer import stop_answer
from dynakrag.actions.sufficiency_check import sufficiency_check
from dynakrag.configuration import Configuration
from dynakrag.errors import UserInputError
from dynakrag.state import ACTIONS, ActionName, State, StateUpdate, initial_state

__all__ = [
    "ACTION_FUNCTIONS",
    "ENDS_RUN",
    "FIXED_EDGES",
    "RETURNS_TO_CONTROLLER",
    "ActionFn",
    "ActionName",
    "fixed_edge_decision",
    "fixed_successor",
    "prepared_state",
    "run_action",
    "validate_question",
]

ActionFn = Callable[[State, Resources, Configuration], StateUpdate]

ACTION_FUNCTIONS: Mapping[str, ActionFn] = MappingProxyType(
    {
        "retrieve_more": retrieve_more,
        "gap_query": gap_query,
        "bridge_entity_expand": bridge_entity_expand,
        "rewrite_query": rewrite_query,
        "sufficiency_check": sufficiency_check,
        "stop_answer": stop_answer,
        "compress_answer_evidence": compress_answer_evidence,
    }
)
"""The function each action node runs."""

FIXED_EDGES: Mapping[str, str] = MappingProxyType({"compress_answer_evidence": "stop_answer"})
"""Action -> the action that always follows it, with no controller step in between."""

ENDS_RUN: frozenset[str] = frozenset({"stop_answer"})
"""Actions after which the run ends."""

RETURNS_TO_CONTROLLER: frozenset[str] = frozenset(ACTIONS) - FIXED_EDGES.keys() - ENDS_RUN
"""Actions after which the controller chooses again."""


def fixed_successor(state: Mapping[str, Any]) -> str | None:
    """The action a fixed edge forces next in ``state`` (None: the controller decides)."""
    trace = state.get("trace") or []
    return FIXED_EDGES.get(trace[-1].get("action", "")) if trace else None


def fixed_edge_decision(successor: str) -> StateUpdate:
    """The controller fields a fixed edge records: ``successor`` is the only choice, unscored.

    The next action's trace entry copies ``valid_actions``, ``policy_scores`` and
    ``explanation`` from the state, so it shows the edge rather than the controller's previous,
    stale decision.
    """
    return {
        "valid_actions": [successor],
        "invalid_reasons": {},
        "policy_scores": {},
        "next_action": successor,
        "explanation": {"fixed_edge": f"{successor} always follows this action (fixed edge)"},
    }


def run_action(action: str, state: State, resources: Resources, cfg: Configuration) -> StateUpdate:
    """The update of ``action``'s node: the action's own update, plus the decision of its
    fixed edge when it has one."""
    update = ACTION_FUNCTIONS[action](state, resources, cfg)
    successor = FIXED_EDGES.get(action)
    if successor is not None:
        update = {**update, **fixed_edge_decision(successor)}
    return update


# Joiners are format characters that words and emoji need (Persian, Indic scripts, 👩‍🔬).
_KEPT_FORMAT_CHARS = frozenset("\n\t\u200c\u200d")


def prepared_state(question: object, cfg: Configuration) -> State:
    """What the ``prepare`` node starts a run with: the initial state of the validated
    question."""
    return initial_state(validate_question(question, cfg))


def validate_question(question: object, cfg: Configuration) -> str:
    """The question with control characters removed; UserInputError when unusable."""
    if not isinstance(question, str):
        raise UserInputError("the question must be a string")
    cleaned = "".join(
        ch if ch in _KEPT_FORMAT_CHARS or unicodedata.category(ch)[0] != "C" else " "
        for ch in question
    )
    cleaned = " ".join(cleaned.split())
    if not cleaned:
        raise UserInputError("the question is empty")
    if len(cleaned) > cfg.max_question_chars:
        raise UserInputError(
            f"the question has {len(cleaned)} characters; the limit is {cfg.max_question_chars} "
            "(setting max_question_chars)"
        )
    return cleaned
