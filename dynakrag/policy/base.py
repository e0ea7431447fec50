"""The policy interface: score the valid actions of a state and choose one, in one call."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

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
"""c(s, a): model and retriever calls an action costs (a decomposition adds half a call);
:func:`action_cost` adds the calls of DICS compression's question analysis."""


def action_cost(
    action: str, state: State, cfg: Configuration, costs: Mapping[str, float] = ACTION_COSTS
) -> float:
    """c(s, a): ``costs[action]`` plus, for ``compress_answer_evidence``, the model calls its
    DICS extraction makes in ``state`` (:func:`~dynakrag.dsrag.extraction.compression_model_calls`;
    0 with the lexical compressor or the rules)."""
    extra = 0.0
    if action == "compress_answer_evidence":
        from dynakrag.dsrag.extraction import compression_model_calls

        extra = compression_model_calls(state, cfg)
    return costs.get(action, 0.0) + extra


class Policy(ABC):
    """Ranks the executable actions: the choice is the argmax of v(s,a) - lambda * c(s,a).

    Subclasses give :meth:`value`; they may change how values become scores (:meth:`scores`)
    and how scores become the choice (:meth:`pick`). :meth:`rank` gives both from one
    evaluation of the policy, and :meth:`choose` is its choice.
    """

    name: str = "policy"
    withheld: frozenset[str] = frozenset()
    """Actions this policy never takes (an ablation): a validity rule that makes the run wait
    for one of them (``chain_reads_new_evidence_first`` waits for sufficiency_check) does not
    apply, so the run can still end."""

    @abstractmethod
    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        """v(s, a) for each action in ``actions``."""

    def scores(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        """v(s, a) - lambda * c(s, a) for each valid action."""
        values = self.value(state, actions, cfg)
        return {a: values[a] - cfg.cost_lambda * action_cost(a, state, cfg) for a in actions}

    def pick(
        self, state: State, actions: Sequence[str], scores: Mapping[str, float], cfg: Configuration
    ) -> str:
        """The best-scoring valid action; ties go to the earlier action in ACTIONS."""
        return max(actions, key=lambda a: (scores[a], -ACTIONS.index(a)))

    def rank(
        self, state: State, actions: Sequence[str], cfg: Configuration
    ) -> tuple[dict[str, float], str]:
        """The scores of ``actions`` and the chosen one, evaluating the policy once."""
        scores = self.scores(state, actions, cfg)
        return scores, self.pick(state, actions, scores, cfg)

    def choose(self, state: State, actions: Sequence[str], cfg: Configuration) -> str:
        """The action :meth:`rank` chooses."""
        return self.rank(state, actions, cfg)[1]
