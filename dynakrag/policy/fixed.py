"""``fixed``: a hand-written schedule the learned controller is compared with.

A pipeline that looks at the state only through the validity layer and the sufficiency
verdict: ``retrieve_more`` first; ``sufficiency_check`` after every piece of new evidence;
while the check says something is missing, acquire in the fixed order ``gap_query`` >
``bridge_entity_expand`` > ``retrieve_more`` > ``rewrite_query`` (the first valid one); once
the check says sufficient, or nothing can be acquired any more, ``compress_answer_evidence``
then ``stop_answer``. It ignores ``cost_lambda``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dynakrag.configuration import Configuration
from dynakrag.policy.base import Policy
from dynakrag.state import ACTIONS, State

__all__ = ["FIXED_ACQUISITION_ORDER", "FixedSchedulePolicy"]

FIXED_ACQUISITION_ORDER: tuple[str, ...] = (
    "gap_query",
    "bridge_entity_expand",
    "retrieve_more",
    "rewrite_query",
)
"""The order in which the fixed schedule acquires while evidence is missing."""
_TERMINAL_ORDER = ("compress_answer_evidence", "stop_answer")


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
