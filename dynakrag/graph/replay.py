"""Run actions outside the graph, with the graph's own semantics, for trajectory collection.

The compiled graph runs ``prepare -> controller -> action -> controller -> ...``; collection
needs to branch (try every valid action from one state), which the graph cannot do. This module
reproduces one graph step on a plain dict:

* :func:`initial_state` is the state after ``prepare``
  (:func:`dynakrag.graph.nodes.prepared_state`).
* :func:`decision_update` is what the ``controller`` node writes (``valid_actions``,
  ``invalid_reasons``, ``policy_scores``, ``next_action``), by the graph's own
  :func:`dynakrag.graph.controller.decide`, with the action forced.
* :func:`apply_update` merges a node's partial update the way LangGraph's channels do: the
  ``Annotated`` reducers of :class:`~dynakrag.state.State` (``operator.add`` for the trace
  and counters, ``merge_accounting`` for the accounting), plain replacement for the other keys,
  and ``langgraph.types.Overwrite`` values written as they are.
* :func:`step` = decision, then the action's node
  (:func:`dynakrag.graph.nodes.run_action`, as in the graph); an action a fixed edge forces
  (:data:`dynakrag.graph.nodes.FIXED_EDGES`: ``stop_answer`` right after
  ``compress_answer_evidence``) follows with no decision in between.

Replaying the actions of a finished run with the same policy, searcher and model gives the
graph's final state exactly. Inputs are never mutated.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langgraph.types import Overwrite

from dynakrag.actions.common import Resources
from dynakrag.configuration import Configuration
from dynakrag.graph.controller import decide
from dynakrag.graph.nodes import fixed_successor, prepared_state, run_action
from dynakrag.graph.validity import valid_actions
from dynakrag.policy.base import Policy
from dynakrag.state import ACTIONS, State

__all__ = ["REDUCERS", "apply_update", "decision_update", "initial_state", "replay", "step"]


def _reducers() -> dict[str, tuple[Callable[[Any, Any], Any], Callable[[], Any]]]:
    """``{field: (reducer, default factory)}`` of State's ``Annotated`` fields."""
    hints = typing.get_type_hints(State, include_extras=True)
    reducers: dict[str, tuple[Callable[[Any, Any], Any], Callable[[], Any]]] = {}
    for name, hint in hints.items():
        if typing.get_origin(hint) is typing.Annotated:
            base, reducer = typing.get_args(hint)[:2]
            origin = typing.get_origin(base) or base
            reducers[name] = (reducer, origin)
    return reducers


REDUCERS = _reducers()
"""The reducer and the empty value (a channel's start) of each reduced State field."""


def apply_update(state: Mapping[str, Any], update: Mapping[str, Any] | None) -> State:
    """A new state: ``state`` with a node's partial ``update`` merged as LangGraph merges it."""
    merged: dict[str, Any] = dict(state)
    for key, value in (update or {}).items():
        if isinstance(value, Overwrite):
            merged[key] = value.value
        elif key in REDUCERS:
            reducer, empty = REDUCERS[key]
            merged[key] = reducer(merged.get(key, empty()), value)
        else:
            merged[key] = value
    return typing.cast(State, merged)


def initial_state(question: str, cfg: Configuration) -> State:
    """The state after the graph's ``prepare`` node (the question validated and cleaned)."""
    return prepared_state(question, cfg)


class _Forced(Policy):
    """Scores like ``inner`` (zeros without one) but always chooses ``action``."""

    def __init__(self, inner: Policy | None, action: str) -> None:
        self.inner = inner
        self.action = action
        self.name = inner.name if inner is not None else "replay"

    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        if self.inner is None:
            return {a: 0.0 for a in actions}
        return self.inner.value(state, actions, cfg)

    def scores(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        if self.inner is None:
            return {a: 0.0 for a in actions}
        return self.inner.scores(state, actions, cfg)

    def pick(
        self,
        state: State,
        actions: Sequence[str],
        scores: Mapping[str, float],
        cfg: Configuration,
    ) -> str:
        return self.action


def decision_update(
    state: State, action: str, cfg: Configuration, policy: Policy | None = None
) -> dict[str, Any]:
    """What the controller writes when it chooses ``action`` (ValueError if it is not valid).

    ``policy`` only provides the recorded ``policy_scores`` (zeros without one).
    """
    valid = valid_actions(state, cfg)
    if action not in valid:
        raise ValueError(f"action {action!r} is not valid here (valid: {valid})")
    return decide(state, _Forced(policy, action), cfg)


def step(
    state: State,
    action: str,
    resources: Resources,
    cfg: Configuration,
    *,
    policy: Policy | None = None,
) -> State:
    """The state after the controller chooses ``action`` and its node runs."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    forced = fixed_successor(state)
    if forced is None:
        decided = apply_update(state, decision_update(state, action, cfg, policy))
    elif action == forced:
        decided = state  # the graph's fixed edge: no controller step
    else:
        previous = state["trace"][-1]["action"]
        raise ValueError(f"only {forced} may follow {previous}")
    return apply_update(decided, run_action(action, decided, resources, cfg))


def replay(
    question: str,
    actions: Sequence[str],
    resources: Resources,
    cfg: Configuration,
    *,
    policy: Policy | None = None,
) -> State:
    """The state after running ``actions`` in order from the initial state of ``question``."""
    state = initial_state(question, cfg)
    for action in actions:
        state = step(state, action, resources, cfg, policy=policy)
    return state
