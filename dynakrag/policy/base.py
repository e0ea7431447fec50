"""The policy interface: score the valid actions of a state, choose the best."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from dynakrag.configuration import Configuration
from dynakrag.state import ACTIONS, State

ACTION_COSTS: dict[str, float] = {
    "retrieve_more": 1.0,
    "gap_query": 1.0,
    "bridge_entity_expand": 1.0,
    "rewrite_query": 2.0,
    "sufficiency_check": 1.5,
    "stop_answer": 1.0,
    "compress_answer_evidence": 0.0,
}
"""c(s, a): model and retriever calls an action costs (a decomposition adds half a call)."""


class Policy(ABC):
    """Ranks the executable actions: ``choose`` = argmax of v(s,a) - lambda * c(s,a)."""

    name: str = "policy"

    @abstractmethod
    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        """v(s, a) for each action in ``actions``."""

    def scores(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        """v(s, a) - lambda * c(s, a) for each valid action."""
        values = self.value(state, actions, cfg)
        return {a: values[a] - cfg.cost_lambda * ACTION_COSTS.get(a, 0.0) for a in actions}

    def choose(self, state: State, actions: Sequence[str], cfg: Configuration) -> str:
        """The best-scoring valid action; ties go to the earlier action in ACTIONS."""
        scores = self.scores(state, actions, cfg)
        return max(actions, key=lambda a: (scores[a], -ACTIONS.index(a)))
