"""Ablations: any policy with some actions taken out of the valid set it ranks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dynakrag.configuration import Configuration
from dynakrag.policy.base import Policy
from dynakrag.state import ACTIONS, State

__all__ = ["WithoutActions"]


class WithoutActions(Policy):
    """``inner`` choosing among A(s) minus ``removed`` (an ablation of those actions).

    Removing an action never empties the set: if only removed actions are valid, they stay
    (the validity layer's termination guarantee comes first).
    """

    def __init__(self, inner: Policy, removed: Iterable[str]) -> None:
        self.inner = inner
        self.withheld = frozenset(removed)
        unknown = self.withheld - set(ACTIONS)
        if unknown:
            raise ValueError(f"unknown actions: {', '.join(sorted(unknown))}")
        self.name = f"{inner.name} without {', '.join(sorted(self.withheld))}"

    def allowed(self, actions: Sequence[str]) -> list[str]:
        """The valid actions this policy may choose from."""
        kept = [a for a in actions if a not in self.withheld]
        return kept or list(actions)

    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        return self.inner.value(state, self.allowed(actions), cfg)

    def scores(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        return self.inner.scores(state, self.allowed(actions), cfg)

    def rank(
        self, state: State, actions: Sequence[str], cfg: Configuration
    ) -> tuple[dict[str, float], str]:
        return self.inner.rank(state, self.allowed(actions), cfg)
