"""The controller step: validity layer, then policy, then the conditional edge to the action."""

from __future__ import annotations

import logging
from typing import Any

from dynakrag.configuration import Configuration
from dynakrag.graph.validity import invalid_reasons, valid_actions
from dynakrag.policy.base import Policy
from dynakrag.state import ACTIONS, State

logger = logging.getLogger(__name__)


def decide(state: State, policy: Policy, cfg: Configuration) -> dict[str, Any]:
    """Compute A(s), score it with the policy and record the chosen action."""
    actions = valid_actions(state, cfg)
    scores, choice = policy.rank(state, actions, cfg)
    if choice not in actions:
        # The validity layer is a hard constraint: a policy cannot override it.
        logger.warning("policy %s chose invalid action %r", policy.name, choice)
        choice = max(actions, key=lambda a: (scores.get(a, float("-inf")), -ACTIONS.index(a)))
    return {
        "valid_actions": actions,
        "invalid_reasons": invalid_reasons(state, cfg),
        "policy_scores": {action: round(score, 6) for action, score in scores.items()},
        "next_action": choice,
    }


def route(state: State) -> str:
    """The conditional edge: go to the node the controller chose."""
    return state["next_action"]
