"""The validity layer: hard rules that build the executable action set A(s).

Validity is kept apart from utility: these rules only say what may run now (an action must be
defined, not exhausted and not premature); the policy then ranks what is left. Every rule is a
named, documented predicate; ``valid_actions`` always returns at least one action, so a run
always ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dynakrag.actions.bridge_entities import pending_bridge_entities
from dynakrag.configuration import Configuration
from dynakrag.state import ACQUISITION_ACTIONS, ACTIONS, State

MAX_REWRITES = 2


@dataclass(frozen=True)
class Rule:
    """A named rule: ``blocks(state, cfg)`` is True when the actions it governs may not run."""

    name: str
    actions: frozenset[str]
    description: str
    blocks: Callable[[State, Configuration], bool]


def _steps_spent(state: State, cfg: Configuration) -> bool:
    return state.get("steps", 0) >= cfg.max_steps


def _retrieval_spent(state: State, cfg: Configuration) -> bool:
    return state.get("retrieval_calls", 0) >= cfg.max_retrieval_calls


def _budget_spent(state: State, cfg: Configuration) -> bool:
    return _steps_spent(state, cfg) or _retrieval_spent(state, cfg)


def _has_evidence(state: State) -> bool:
    return bool(state.get("evidence"))


def _answered(state: State) -> bool:
    return bool(state.get("answer"))


def _frontier_exhausted(state: State) -> bool:
    current = state.get("query") or state["question"]
    return current in state.get("exhausted_queries", [])


RULES: tuple[Rule, ...] = (
    Rule(
        "answered_ends_run",
        frozenset(ACTIONS),
        "Once an answer is written nothing else may run.",
        lambda s, c: _answered(s),
    ),
    Rule(
        "step_budget",
        frozenset(ACQUISITION_ACTIONS | {"sufficiency_check"}),
        "No further control step once max_steps steps were taken.",
        _steps_spent,
    ),
    Rule(
        "retrieval_budget",
        frozenset(ACQUISITION_ACTIONS),
        "No retrieval once max_retrieval_calls calls were made.",
        _retrieval_spent,
    ),
    Rule(
        "first_step_retrieves",
        frozenset(ACTIONS) - {"retrieve_more"},
        "Before any evidence exists, only retrieve_more may run (unless the budget is spent).",
        lambda s, c: not _has_evidence(s) and not _budget_spent(s, c),
    ),
    Rule(
        "retrieve_more_needs_frontier",
        frozenset({"retrieve_more"}),
        "retrieve_more needs unseen candidates left in the current query's frontier.",
        lambda s, c: _frontier_exhausted(s),
    ),
    Rule(
        "gap_query_needs_gap",
        frozenset({"gap_query"}),
        "gap_query needs a recorded gap (missing information) that was not queried yet.",
        lambda s, c: not s.get("gaps"),
    ),
    Rule(
        "bridge_needs_unexpanded_entity",
        frozenset({"bridge_entity_expand"}),
        "bridge_entity_expand needs a detected bridge entity that was not expanded yet.",
        lambda s, c: not pending_bridge_entities(s),
    ),
    Rule(
        "rewrite_needs_evidence_and_limit",
        frozenset({"rewrite_query"}),
        f"rewrite_query rewrites from evidence, at most {MAX_REWRITES} times a run.",
        lambda s, c: not _has_evidence(s) or s.get("rewrites", 0) >= MAX_REWRITES,
    ),
    Rule(
        "sufficiency_needs_new_evidence",
        frozenset({"sufficiency_check"}),
        "sufficiency_check needs evidence added since the last check.",
        lambda s, c: (
            len(s.get("evidence", [])) <= s.get("evidence_count_at_check", -1)
            or not _has_evidence(s)
        ),
    ),
    Rule(
        "compress_once_on_the_way_to_answer",
        frozenset({"compress_answer_evidence"}),
        "Compression runs once, only when answering is allowed, on more than one passage.",
        lambda s, c: s.get("compressed", False) or len(s.get("evidence", [])) < 2,
    ),
)


def invalid_reasons(state: State, cfg: Configuration) -> dict[str, str]:
    """For each blocked action, the name of the first rule that blocks it."""
    reasons: dict[str, str] = {}
    for rule in RULES:
        if rule.blocks(state, cfg):
            for action in rule.actions:
                reasons.setdefault(action, rule.name)
    if not _answered(state) and len(reasons) == len(ACTIONS):
        reasons.pop("stop_answer")  # the termination guarantee below overrides every rule
    return reasons


def valid_actions(state: State, cfg: Configuration) -> list[str]:
    """A(s): the actions that may run now, in canonical order; never empty before an answer."""
    if _answered(state):
        return []
    blocked = invalid_reasons(state, cfg)
    # Termination guarantee: when rules block everything else, answering is always possible.
    return [action for action in ACTIONS if action not in blocked]
