"""The controller step: validity layer, then policy, then the action to go to.

Each decision also records its explanation (:func:`dynakrag.policy.explain.explain_decision`:
the chosen action and the runner-up, what drove their values, the rule behind every blocked
action, the λ used and the token budget), which the next action copies into its trace entry.
With a ``token_budget``, λ comes from the learned policy's calibration curve when it has one
(:func:`dynakrag.policy.token_budget.choose_lambda`) and the ``token_budget`` rule prices the
actions with its token cost table.
"""

from __future__ import annotations

import logging

from dynakrag.configuration import Configuration
from dynakrag.graph.validity import action_set
from dynakrag.policy.base import Policy
from dynakrag.policy.explain import explain_decision, learned_policy_in
from dynakrag.policy.token_budget import budget_status, choose_lambda
from dynakrag.state import ACTIONS, Decision, State

logger = logging.getLogger(__name__)


def decide(state: State, policy: Policy, cfg: Configuration) -> Decision:
    """Compute A(s), score it with the policy and record the chosen action and why."""
    learned = learned_policy_in(policy)
    calibration = learned.calibration if learned is not None else None
    cost_lambda, lambda_source = choose_lambda(cfg, calibration, policy.name)
    if cost_lambda != cfg.cost_lambda:
        cfg = cfg.merged({"cost_lambda": cost_lambda})
    costs = calibration.costs if calibration is not None else None
    budget = budget_status(state, cfg, costs)
    # An action the policy never takes (an ablation) is one the chain rule cannot wait for;
    # getattr: a duck-typed policy need not subclass Policy.
    withheld = frozenset(getattr(policy, "withheld", frozenset()))
    actions, reasons = action_set(state, cfg, budget, withheld)
    scores, choice = policy.rank(state, actions, cfg)
    if choice not in actions:
        # The validity layer is a hard constraint: a policy cannot override it.
        logger.warning("policy %s chose invalid action %r", policy.name, choice)
        choice = max(actions, key=lambda a: (scores.get(a, float("-inf")), -ACTIONS.index(a)))
    explanation = explain_decision(
        policy,
        state,
        actions,
        scores,
        choice,
        cfg,
        reasons,
        lambda_source=lambda_source,
        budget=budget,
    )
    return Decision(
        valid_actions=actions,
        invalid_reasons=reasons,
        policy_scores={action: round(score, 6) for action, score in scores.items()},
        next_action=choice,
        explanation=explanation,
    )
