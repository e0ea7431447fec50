"""The gold-aware oracle: an upper bound for the learned controller, for evaluation only.

It reads the question's gold support, so it is an evaluation device, never a policy a user can
ship. At each step it runs every valid action on a copy of the state
(:func:`dynakrag.graph.replay.step`, the graph's own semantics) and looks ``horizon`` actions
ahead; v(s, a) is the best support recall reachable through ``a`` within the horizon (for
``stop_answer``: the SR of the passages the answer would see; for ``compress_answer_evidence``:
the SR it keeps). It stops as soon as no action can raise SR within the horizon (compressing
first when that loses no gold passage); otherwise it takes the action that reaches the best SR,
preferring the larger immediate gain, then the cheaper action. The look-ahead calls the
retriever and the generator: they are counted in ``lookahead_steps`` /
``lookahead_llm_calls``, not in the run's accounting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dynakrag.actions.common import Resources, evidence_window
from dynakrag.configuration import Configuration
from dynakrag.errors import UserInputError
from dynakrag.eval.metrics import state_support_recall
from dynakrag.graph.replay import step
from dynakrag.graph.validity import valid_actions
from dynakrag.policy.base import ACTION_COSTS, Policy
from dynakrag.state import ACQUISITION_ACTIONS, ACTIONS, TERMINAL_ACTIONS, State

__all__ = ["OraclePolicy"]

_TERMINAL_ORDER = ("compress_answer_evidence", "stop_answer")
_EPS = 1e-9


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
        self.withheld = frozenset(without)
        self.lookahead_steps = 0
        self.lookahead_llm_calls = 0
        self._children: dict[tuple[Any, str], State] = {}

    # --- outcomes ---------------------------------------------------------------------------

    def support_recall(self, state: Mapping[str, Any]) -> float:
        """SR of the state's evidence against the gold support."""

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

        key = (self._key(state), action)
        if key not in self._children:
            after = step(state, action, self.resources, cfg, withheld=self.withheld)
            self.lookahead_steps += 1
            self.lookahead_llm_calls += int(after.get("llm_calls", 0)) - int(
                state.get("llm_calls", 0)
            )
            self._children[key] = after
        return self._children[key]

    def _allowed(self, state: State, cfg: Configuration) -> list[str]:
        valid = valid_actions(state, cfg, withheld=self.withheld)
        return [a for a in valid if a not in self.withheld]

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
        # An upper bound on quality: costs only break ties (in pick), lambda is ignored.
        return self.value(state, actions, cfg)

    def pick(
        self, state: State, actions: Sequence[str], scores: Mapping[str, float], cfg: Configuration
    ) -> str:
        actions = [a for a in actions if a not in self.withheld] or list(actions)
        values = {a: scores[a] for a in actions}  # the values of the allowed actions
        best = max(values.values())
        top = [a for a in actions if values[a] >= best - _EPS]
        # Stop when going on cannot raise SR; compression first when it keeps every gold hit.
        for terminal in _TERMINAL_ORDER:
            if terminal in top:
                return terminal

        # When nothing can raise SR but no terminal action is valid yet (a chain reads its new
        # evidence first), a step that adds no evidence leads to the end; another search
        # would only add more evidence to read.
        stuck = best <= self.support_recall(state) + _EPS

        def preference(action: str) -> tuple[float, bool, float, int]:
            immediate = self.support_recall(self._after(state, action, cfg))
            acquires = stuck and action in ACQUISITION_ACTIONS
            return (-immediate, acquires, ACTION_COSTS.get(action, 0.0), ACTIONS.index(action))

        return min(top, key=preference)

    def stats(self) -> dict[str, int]:
        """What the look-ahead cost (not part of the run's accounting)."""
        return {
            "horizon": self.horizon,
            "lookahead_steps": self.lookahead_steps,
            "lookahead_llm_calls": self.lookahead_llm_calls,
        }
