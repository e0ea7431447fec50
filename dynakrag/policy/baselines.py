"""Comparison policies for the learned controller: a fixed schedule, a gold-aware oracle, and
the action-removal wrapper the ablations use.

``fixed`` (:class:`FixedSchedulePolicy`)
    A hand-written pipeline that looks at the state only through the validity layer and the
    sufficiency verdict: ``retrieve_more`` first; ``sufficiency_check`` after every piece of new
    evidence; while the check says something is missing, acquire in the fixed order
    ``gap_query`` > ``bridge_entity_expand`` > ``retrieve_more`` > ``rewrite_query`` (the first
    valid one); once the check says sufficient, or nothing can be acquired any more,
    ``compress_answer_evidence`` then ``stop_answer``. It ignores ``cost_lambda``.

``oracle`` (:class:`OraclePolicy`)
    An upper bound, never a default: it reads the question's gold support. At each step it runs
    every valid action on a copy of the state (:func:`dynakrag.training.replay.step`, the graph's
    own semantics) and looks ``horizon`` actions ahead; v(s, a) is the best support recall
    reachable through ``a`` within the horizon (for ``stop_answer``: the SR of the passages the
    answer would see; for ``compress_answer_evidence``: the SR it keeps). It stops as soon as no
    action can raise SR within the horizon (compressing first when that loses no gold passage);
    otherwise it takes the action that reaches the best SR, preferring the larger immediate gain,
    then the cheaper action. The look-ahead calls the retriever and the generator: they are
    counted in ``lookahead_steps`` / ``lookahead_llm_calls``, not in the run's accounting.

:class:`WithoutActions`
    Any policy with some actions taken out of the valid set it ranks (the ``sufficiency``
    ablation removes ``sufficiency_check``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dynakrag.actions.common import Resources, evidence_window
from dynakrag.configuration import Configuration
from dynakrag.errors import UserInputError
from dynakrag.graph.state import ACTIONS, TERMINAL_ACTIONS, State
from dynakrag.policy.base import ACTION_COSTS, Policy

__all__ = [
    "FIXED_ACQUISITION_ORDER",
    "FixedSchedulePolicy",
    "OraclePolicy",
    "WithoutActions",
]

FIXED_ACQUISITION_ORDER: tuple[str, ...] = (
    "gap_query",
    "bridge_entity_expand",
    "retrieve_more",
    "rewrite_query",
)
"""The order in which the fixed schedule acquires while evidence is missing."""
_TERMINAL_ORDER = ("compress_answer_evidence", "stop_answer")
_EPS = 1e-9


def _ranked(order: Iterable[str], actions: Sequence[str]) -> dict[str, float]:
    """Scores that rank ``actions`` in ``order`` (first = highest); unlisted ones last."""
    ranking = [a for a in dict.fromkeys(order) if a in actions]
    ranking += [a for a in actions if a not in ranking]
    return {a: float(len(ranking) - i) for i, a in enumerate(ranking)}


class FixedSchedulePolicy(Policy):
    """retrieve -> check -> (gap | bridge | retrieve | rewrite) -> check ... -> compress -> stop."""

    name = "fixed"

    def schedule(self, state: State) -> list[str]:
        """All actions in the order the schedule prefers them in ``state``."""
        evidence = len(state.get("evidence", []))
        checked = state.get("evidence_count_at_check", -1)
        if evidence == 0:
            head: list[str] = ["retrieve_more"]
        elif evidence > checked:
            head = ["sufficiency_check"]
        elif state.get("sufficient"):
            head = list(_TERMINAL_ORDER)
        else:
            head = list(FIXED_ACQUISITION_ORDER)
        return [*head, *FIXED_ACQUISITION_ORDER, *_TERMINAL_ORDER, *ACTIONS]

    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        return _ranked(self.schedule(state), actions)

    def scores(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        # A fixed schedule does not trade quality for cost: lambda is ignored.
        return self.value(state, actions, cfg)


class WithoutActions(Policy):
    """``inner`` choosing among A(s) minus ``removed`` (an ablation of those actions).

    Removing an action never empties the set: if only removed actions are valid, they stay
    (the validity layer's termination guarantee comes first).
    """

    def __init__(self, inner: Policy, removed: Iterable[str]) -> None:
        self.inner = inner
        self.removed = frozenset(removed)
        unknown = self.removed - set(ACTIONS)
        if unknown:
            raise ValueError(f"unknown actions: {', '.join(sorted(unknown))}")
        self.name = f"{inner.name} without {', '.join(sorted(self.removed))}"

    def allowed(self, actions: Sequence[str]) -> list[str]:
        """The valid actions this policy may choose from."""
        kept = [a for a in actions if a not in self.removed]
        return kept or list(actions)

    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        return self.inner.value(state, self.allowed(actions), cfg)

    def scores(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        return self.inner.scores(state, self.allowed(actions), cfg)

    def choose(self, state: State, actions: Sequence[str], cfg: Configuration) -> str:
        return self.inner.choose(state, self.allowed(actions), cfg)


class OraclePolicy(Policy):
    """Gold-aware look-ahead over the valid actions: an upper bound for evaluation only.

    Args:
        gold: the question's gold support (``QAExample.gold_sets``: ids, or one collection of
            interchangeable ids per item); required.
        resources: the searcher and LLM client the run uses (the look-ahead runs actions).
        horizon: how many actions ahead it looks (1: the next action only).
        without: actions it may not take (the ``sufficiency`` ablation).

    One instance serves one question: look-ahead states are memoised by action history and
    evidence ids.
    """

    name = "oracle"

    def __init__(
        self,
        gold: Sequence[Any],
        resources: Resources,
        *,
        horizon: int = 2,
        without: Iterable[str] = (),
    ) -> None:
        if not gold:
            raise UserInputError(
                "the oracle policy needs the question's gold support; it runs only in an "
                "evaluation on questions with gold evidence"
            )
        if horizon < 1:
            raise UserInputError(f"the oracle's horizon must be >= 1, got {horizon}")
        self.gold = list(gold)
        self.resources = resources
        self.horizon = horizon
        self.without = frozenset(without)
        self.lookahead_steps = 0
        self.lookahead_llm_calls = 0
        self._children: dict[tuple[Any, str], State] = {}

    # --- outcomes ---------------------------------------------------------------------------

    def support_recall(self, state: Mapping[str, Any]) -> float:
        """SR of the state's evidence against the gold support."""
        from dynakrag.training.collect import state_support_recall

        return state_support_recall(state, self.gold)

    def _answer_sr(self, state: State, cfg: Configuration) -> float:
        """SR of the passages stop_answer would give the final answer."""
        return self.support_recall({"evidence": evidence_window(state, cfg)})

    @staticmethod
    def _key(state: State) -> tuple[tuple[str, ...], tuple[str, ...]]:
        history = tuple(entry["action"] for entry in state.get("trace", []))
        return history, tuple(doc["id"] for doc in state.get("evidence", []))

    def _after(self, state: State, action: str, cfg: Configuration) -> State:
        """The state after ``action`` (run once per state and action)."""
        from dynakrag.training.replay import step

        key = (self._key(state), action)
        if key not in self._children:
            after = step(state, action, self.resources, cfg)
            self.lookahead_steps += 1
            self.lookahead_llm_calls += int(after.get("llm_calls", 0)) - int(
                state.get("llm_calls", 0)
            )
            self._children[key] = after
        return self._children[key]

    def _allowed(self, state: State, cfg: Configuration) -> list[str]:
        from dynakrag.actions.validity import valid_actions

        return [a for a in valid_actions(state, cfg) if a not in self.without]

    def _reach(self, state: State, cfg: Configuration, depth: int) -> float:
        """Best SR of ``state`` or of a state ``depth`` or fewer non-terminal actions on."""
        best = self.support_recall(state)
        if depth <= 0:
            return best
        for action in self._allowed(state, cfg):
            if best >= 1.0 - _EPS:
                break
            if action not in TERMINAL_ACTIONS:
                best = max(best, self._reach(self._after(state, action, cfg), cfg, depth - 1))
        return best

    # --- the policy -------------------------------------------------------------------------

    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        """The best SR reachable through each action (see the module docstring)."""
        values: dict[str, float] = {}
        for action in actions:
            if action == "stop_answer":
                values[action] = self._answer_sr(state, cfg)
            elif action == "compress_answer_evidence":
                values[action] = self._answer_sr(self._after(state, action, cfg), cfg)
            else:
                values[action] = self._reach(self._after(state, action, cfg), cfg, self.horizon - 1)
        return values

    def scores(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        # An upper bound on quality: costs only break ties (in choose), lambda is ignored.
        return self.value(state, actions, cfg)

    def choose(self, state: State, actions: Sequence[str], cfg: Configuration) -> str:
        actions = [a for a in actions if a not in self.without] or list(actions)
        values = self.value(state, actions, cfg)
        best = max(values.values())
        top = [a for a in actions if values[a] >= best - _EPS]
        # Stop when going on cannot raise SR; compression first when it keeps every gold hit.
        for terminal in _TERMINAL_ORDER:
            if terminal in top:
                return terminal

        def preference(action: str) -> tuple[float, float, int]:
            immediate = self.support_recall(self._after(state, action, cfg))
            return (-immediate, ACTION_COSTS.get(action, 0.0), ACTIONS.index(action))

        return min(top, key=preference)

    def stats(self) -> dict[str, int]:
        """What the look-ahead cost (not part of the run's accounting)."""
        return {
            "horizon": self.horizon,
            "lookahead_steps": self.lookahead_steps,
            "lookahead_llm_calls": self.lookahead_llm_calls,
        }
