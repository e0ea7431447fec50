"""The validity layer: hard rules that build the executable action set A(s).

Validity is kept apart from utility: these rules only say what may run now (an action must be
defined, not exhausted and not premature); the policy then ranks what is left. Every rule is a
named, documented predicate; ``valid_actions`` always returns at least one action, so a run
always ends.

With a ``token_budget`` one more rule, ``token_budget``, blocks each action whose price (its own
tokens plus the final answer after it) exceeds what is left of the budget
(:func:`dynakrag.policy.token_budget.budget_status`; ``costs`` is the policy's token cost table).
It never blocks ``stop_answer``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dynakrag.actions.bridge_entities import pending_bridge_entities
from dynakrag.actions.chain import chain_complete, chain_failed, hop_to_close
from dynakrag.actions.grounding import has_answerable_content
from dynakrag.configuration import Configuration
from dynakrag.policy.token_budget import BUDGET_RULE, BudgetStatus, TokenCosts, budget_status
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
    return bool(state.get("answer")) or bool(state.get("abstained"))


def _nothing_to_answer(state: State, cfg: Configuration) -> bool:
    return cfg.abstain and not has_answerable_content(state["question"])


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
        "question_needs_content",
        frozenset(ACTIONS) - {"stop_answer"},
        "A question without content ('?', a run of commas) is answered at once, by abstaining "
        "(setting abstain).",
        _nothing_to_answer,
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
        "sufficiency_check needs evidence added since the last check (or, with a chain, a "
        "hop whose searches are spent, to close).",
        lambda s, c: (
            not _has_evidence(s)
            or (
                len(s.get("evidence", [])) <= s.get("evidence_count_at_check", -1)
                and hop_to_close(s.get("hops") or []) is None
            )
        ),
    ),
    Rule(
        "complete_chain_searches_no_more",
        frozenset(ACQUISITION_ACTIONS | {"sufficiency_check"}),
        "With every hop of the chain resolved there is nothing left to find or check: the "
        "chain's answer stands, so only compression and the answer may run.",
        lambda s, c: chain_complete(s.get("hops") or []),
    ),
    Rule(
        "compress_once_on_the_way_to_answer",
        frozenset({"compress_answer_evidence"}),
        "Compression runs once, only when answering is allowed, on more than one passage.",
        lambda s, c: s.get("compressed", False) or len(s.get("evidence", [])) < 2,
    ),
)


MAX_UNREAD_SEARCHES = 2
"""Searches a chain run may make in a row before a check reads them: two lets a search and
its bridge expansion be read together; the chain forest, free of it, made up to 10 in a row
(8 of 60 MuSiQue eval runs made 3 or more, none answered better than the heuristic, which
never made 2)."""

CHAIN_READS_FIRST = "chain_reads_new_evidence_first"
"""With a chain still to finish (sub_question_answering='chain'), evidence added since the
last check is read by sufficiency_check before the run compresses or answers, and before a
search beyond MAX_UNREAD_SEARCHES in a row: the check is what resolves a hop, so stopping there
answers without the hop its search found, and searching on only piles up passages no hop has
read. Applies only while sufficiency_check may run (and the policy does not withhold it)."""


def _chain_to_finish(state: State, cfg: Configuration) -> bool:
    if cfg.sub_question_answering != "chain":
        return False
    hops = state.get("hops") or []
    return not (chain_complete(hops) or chain_failed(hops))


def _unread_chain_evidence(state: State) -> bool:
    """The state holds evidence no check has read yet."""
    return len(state.get("evidence", [])) > state.get("evidence_count_at_check", -1)


def _searches_since_check(state: State) -> int:
    """Acquisitions since the last sufficiency_check (or the start)."""
    count = 0
    for entry in reversed(state.get("trace") or []):
        if entry.get("action") == "sufficiency_check":
            break
        count += entry.get("action") in ACQUISITION_ACTIONS
    return count


def invalid_reasons(
    state: State,
    cfg: Configuration,
    costs: TokenCosts | None = None,
    withheld: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """For each blocked action, the name of the first rule that blocks it (the named rules,
    then ``token_budget`` with the policy's token cost table ``costs``); ``withheld`` as in
    :func:`_blocking_rules`."""
    return _blocking_rules(state, cfg, budget_status(state, cfg, costs), withheld)


def _blocking_rules(
    state: State,
    cfg: Configuration,
    budget: BudgetStatus | None,
    withheld: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """:func:`invalid_reasons` with the token budget already computed; ``withheld``: actions
    the policy never takes (an ablation), which the chain rule cannot wait for."""
    reasons: dict[str, str] = {}
    for rule in RULES:
        if rule.blocks(state, cfg):
            for action in rule.actions:
                reasons.setdefault(action, rule.name)
    if budget is not None:
        for action in sorted(budget.blocked, key=ACTIONS.index):
            reasons.setdefault(action, BUDGET_RULE)
    check_can_run = "sufficiency_check" not in reasons and "sufficiency_check" not in withheld
    if check_can_run and _chain_to_finish(state, cfg) and _unread_chain_evidence(state):
        waiting = ["compress_answer_evidence", "stop_answer"]
        if _searches_since_check(state) >= MAX_UNREAD_SEARCHES:
            waiting += sorted(ACQUISITION_ACTIONS, key=ACTIONS.index)
        for action in waiting:
            reasons.setdefault(action, CHAIN_READS_FIRST)
    if not _answered(state) and len(reasons) == len(ACTIONS):
        reasons.pop("stop_answer")  # the termination guarantee below overrides every rule
    return reasons


def actions_left(state: State, reasons: Mapping[str, str]) -> list[str]:
    """A(s) given the blocked actions ``reasons`` of :func:`invalid_reasons`."""
    if _answered(state):
        return []
    # Termination guarantee: when rules block everything else, answering is always possible.
    return [action for action in ACTIONS if action not in reasons]


def action_set(
    state: State,
    cfg: Configuration,
    budget: BudgetStatus | None,
    withheld: frozenset[str] = frozenset(),
) -> tuple[list[str], dict[str, str]]:
    """A(s) and, for each other action, the rule that blocks it (the controller's one call;
    ``withheld`` as in :func:`_blocking_rules`)."""
    reasons = _blocking_rules(state, cfg, budget, withheld)
    return actions_left(state, reasons), reasons


def valid_actions(
    state: State,
    cfg: Configuration,
    costs: TokenCosts | None = None,
    withheld: frozenset[str] = frozenset(),
) -> list[str]:
    """A(s): the actions that may run now, in canonical order; never empty before an answer
    (``withheld``: the policy's :attr:`~dynakrag.policy.base.Policy.withheld` actions)."""
    return actions_left(state, invalid_reasons(state, cfg, costs, withheld))
