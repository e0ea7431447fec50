"""Why the controller chose what it chose: one JSON-safe explanation per decision.

The controller stores :func:`explain_decision`'s result in the state (``explanation``) and
every action copies it into its trace entry, so ``ask --explain``, ``--json``, evaluation
records and LangGraph Studio all show the same thing:

* ``chosen`` and ``runner_up`` with their scores, the policy, and the λ the run used (with
  where it came from: configured, calibrated for a token budget, or the documented fallback);
* ``blocked``: for every action that could not run, the validity rule that blocked it
  (:mod:`dynakrag.graph.validity`, including ``token_budget``);
* ``tokens``: the chosen action's estimated prompt tokens and completion budget
  (:func:`~dynakrag.policy.token_budget.estimate`), which the run's own correction and
  ``dynakrag calibrate`` compare with what it really cost; ``budget`` with a token budget;
* for a learned policy, ``values``: v̂(s, a) of the chosen action and the runner-up split into
  the forest's bias (its training mean) plus one contribution per feature
  (:meth:`~dynakrag.policy.value_model.TreeEnsemble.path_contributions`: exact, from the stored
  trees), the largest ``TOP_CONTRIBUTIONS`` by size kept and the rest summed, then the guard
  penalty and λ·c(a) that turn the value into the score; and ``continuation``: ĉ(s), the margin
  and whether the guard fired. So ``score == bias + sum(contributions) + rest - guard - cost``.

Hand-written policies (heuristic, fixed, uniform) rank by fixed priorities: their explanation
has the scores, the blocked rules and the budget, but no feature contributions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dynakrag.configuration import Configuration
from dynakrag.policy.base import Policy, action_cost
from dynakrag.policy.features import feature_schema, featurize_many
from dynakrag.policy.learned import LearnedPolicy
from dynakrag.policy.token_budget import BUDGET_RULE, BudgetStatus, estimate
from dynakrag.state import (
    ACTIONS,
    TERMINAL_ACTIONS,
    Contribution,
    Explanation,
    State,
    ValueBreakdown,
)

__all__ = [
    "TOP_CONTRIBUTIONS",
    "describe",
    "explain_decision",
    "learned_policy_in",
    "runner_up",
    "value_breakdown",
]

TOP_CONTRIBUTIONS = 5
"""Feature contributions kept per action in the trace (the rest are summed into ``rest``)."""
ONE_HOT_GROUPS: dict[str, str] = {
    "act_": "candidate action",
    "last_": "previous action",
    "q_wh_": "question word",
}
"""One-hot column families reported as one term (``act_*`` = ``stop_answer``): their
contributions are summed, so "not compress" and "is stop" read as one "candidate action"."""
_SHOWN = 3
"""Contributions per action in the printed lines."""


def learned_policy_in(policy: Policy | None) -> LearnedPolicy | None:
    """The learned policy ``policy`` is or wraps (ablations and replay wrap one as ``inner``)."""
    for _ in range(8):  # wrappers nest a level or two; never follow a cycle for ever
        if policy is None or isinstance(policy, LearnedPolicy):
            return policy
        policy = getattr(policy, "inner", None)
    return None


def _action_order(action: str) -> int:
    return ACTIONS.index(action) if action in ACTIONS else len(ACTIONS)


def runner_up(scores: Mapping[str, float], choice: str) -> str | None:
    """The best-scoring other action (ties to the earlier action, as ``Policy.pick``)."""
    others = [a for a in scores if a != choice]
    if not others:
        return None
    return max(others, key=lambda a: (scores[a], -_action_order(a)))


def value_breakdown(
    policy: LearnedPolicy,
    state: State,
    actions: Sequence[str],
    valid: Sequence[str],
    cfg: Configuration,
    *,
    top: int = TOP_CONTRIBUTIONS,
) -> dict[str, ValueBreakdown]:
    """For each of ``actions``: bias + feature contributions = v̂(s, a), then guard and cost.

    ``valid`` is the action set the policy ranked (the guard depends on it).
    """
    schema = feature_schema(policy.feature_version)
    rows = featurize_many(state, actions, cfg, version=policy.feature_version)
    bias, contributions = policy.value_model.path_contributions(rows)
    guard = policy.guard_active(state, valid, cfg)
    out: dict[str, ValueBreakdown] = {}
    for index, action in enumerate(actions):
        terms = _terms(schema.names, rows[index], contributions[index])
        kept = sorted(terms, key=lambda t: -abs(t["contribution"]))[:top]
        kept = [t for t in kept if t["contribution"] != 0.0]
        total = float(contributions[index].sum())
        penalty = policy.guard_penalty if guard and action in TERMINAL_ACTIONS else 0.0
        cost = cfg.cost_lambda * action_cost(action, state, cfg, policy.action_costs)
        out[action] = {
            "value": bias + total,
            "bias": bias,
            "contributions": kept,
            "rest": total - sum(t["contribution"] for t in kept),
            "guard_penalty": penalty,
            "cost": cost,
            "score": bias + total - penalty - cost,
        }
    return out


def _terms(
    names: Sequence[str], values: np.ndarray, contributions: np.ndarray
) -> list[Contribution]:
    """One term per feature, the :data:`ONE_HOT_GROUPS` families merged into one each."""
    terms: list[Contribution] = []
    groups: dict[str, Contribution] = {}
    for name, value, contribution in zip(names, values, contributions, strict=True):
        prefix = next((p for p in ONE_HOT_GROUPS if name.startswith(p)), None)
        if prefix is None:
            terms.append(
                {"feature": name, "value": float(value), "contribution": float(contribution)}
            )
            continue
        group = groups.get(prefix)
        if group is None:
            group = groups[prefix] = {"feature": f"{prefix}*", "value": "", "contribution": 0.0}
            terms.append(group)
        group["contribution"] += float(contribution)
        if value == 1.0:
            group["value"] = name[len(prefix) :]
    return terms


def explain_decision(
    policy: Policy,
    state: State,
    valid: Sequence[str],
    scores: Mapping[str, float],
    choice: str,
    cfg: Configuration,
    blocked: Mapping[str, str],
    *,
    lambda_source: str = "configured cost_lambda",
    budget: BudgetStatus | None = None,
) -> Explanation:
    """The explanation of choosing ``choice`` among ``valid`` (see the module doc)."""
    second = runner_up(scores, choice)
    shown = [a for a in (choice, second) if a is not None]
    explanation: Explanation = {
        "policy": policy.name,
        "chosen": choice,
        "runner_up": second,
        "scores": {a: round(float(scores[a]), 6) for a in shown if a in scores},
        "blocked": {a: blocked[a] for a in sorted(blocked, key=_action_order)},
        "cost_lambda": cfg.cost_lambda,
        "lambda_source": lambda_source,
        "tokens": estimate(state, choice, cfg).to_json(),
    }
    if budget is not None:
        explanation["budget"] = budget.to_json()
    learned = learned_policy_in(policy)
    if learned is not None:
        explanation["feature_version"] = learned.feature_version
        explanation["values"] = value_breakdown(learned, state, shown, valid, cfg)
        explanation["continuation"] = {
            "estimate": learned.continuation(state, cfg),
            "margin": learned.continuation_margin,
            "guard": learned.guard_active(state, valid, cfg),
        }
    return explanation


# --------------------------------------------------------------------------------------------
# Readable lines


def _meaning(name: str, version: int | None) -> str:
    """A short reading of a feature name (its schema meaning, without the parenthesis)."""
    if name.endswith("*") and name[:-1] in ONE_HOT_GROUPS:
        return ONE_HOT_GROUPS[name[:-1]]
    try:
        meaning = feature_schema(version).meanings().get(name, name) if version else name
    except ValueError:
        meaning = name
    return meaning.split(" (")[0]


def _shown_value(value: Any) -> str:
    return f"{value:.2g}".join("[]") if isinstance(value, float) else f"[{value or 'none'}]"


def _signed(value: float) -> str:
    return f"{value:+.2f}"


def describe(explanation: Explanation, *, with_lambda: bool = True) -> list[str]:
    """A few readable lines: the choice and what drove it (features named by their schema
    meanings), the guard, the blocking rules, the budget and (``with_lambda``) where λ came
    from, which stays the same for a whole run."""
    feature_version = explanation.get("feature_version")
    chosen, second = explanation.get("chosen"), explanation.get("runner_up")
    scores = explanation.get("scores") or {}
    lines = []
    if "fixed_edge" in explanation:
        return [f"why: {explanation['fixed_edge']}"]
    if not chosen:
        return []
    head = f"why: {chosen}"
    if chosen in scores:
        head += f" {scores[chosen]:.2f}"
    if second:
        head += f" over {second}" + (f" {scores[second]:.2f}" if second in scores else "")
    lines.append(f"{head} (policy {explanation.get('policy')})")
    for action, part in (explanation.get("values") or {}).items():
        drivers = [
            f"{_meaning(c['feature'], feature_version)} {_shown_value(c['value'])} "
            f"{_signed(c['contribution'])}"
            for c in part["contributions"][:_SHOWN]
        ]
        extras = [f"bias {part['bias']:.2f}", *drivers]
        if part.get("guard_penalty"):
            extras.append(f"guard {-part['guard_penalty']:+.2f}")
        if part.get("cost"):
            extras.append(f"λ·cost {-part['cost']:+.2f}")
        lines.append(f"  {action}: " + ", ".join(extras))
    continuation = explanation.get("continuation")
    if continuation:
        verdict = "stopping down-weighted" if continuation["guard"] else "guard off"
        lines.append(
            f"continuation estimate {continuation['estimate']:.2f} "
            f"(margin {continuation['margin']:.2f}): {verdict}"
        )
    by_rule: dict[str, list[str]] = {}
    for action, rule in (explanation.get("blocked") or {}).items():
        by_rule.setdefault(rule, []).append(action)
    if by_rule:
        groups = [f"{', '.join(actions)} by {rule}" for rule, actions in by_rule.items()]
        lines.append("blocked: " + "; ".join(groups))
    budget = explanation.get("budget")
    if budget:
        line = (
            f"budget: {budget['spent']} of {budget['token_budget']} tokens spent, "
            f"{budget['remaining']} left"
        )
        unpaid = [a for a in by_rule.get(BUDGET_RULE, []) if a in budget.get("price", {})]
        if unpaid:
            line += "; with the answer after it, " + ", ".join(
                f"{a} would cost {budget['price'][a]:.0f}" for a in unpaid
            )
        lines.append(line)
    source = explanation.get("lambda_source")
    if with_lambda and source and source != "configured cost_lambda":
        lines.append(f"λ={explanation.get('cost_lambda'):g}: {source}")
    return lines
