"""Gaps: what the evidence does not answer yet, as sub-questions to search for.

``sufficiency_check`` records them (every UNKNOWN sub-question); ``gap_query`` takes them
one at a time, oldest first, and remembers which it searched so they are not recorded again.
"""

from __future__ import annotations

from collections.abc import Sequence

from dynakrag.decomposition import REFERENCE
from dynakrag.state import State, SubQuestion


def open_gaps(sub_questions: Sequence[SubQuestion], queried_gaps: Sequence[str]) -> list[str]:
    """The unanswered sub-questions worth a search.

    A sub-question that still refers to another's unknown answer (``#k``) is no searchable
    query, and one searched before (case-insensitively) would only repeat that search.
    """
    queried = {gap.lower() for gap in queried_gaps}
    return [
        sub["question"]
        for sub in sub_questions
        if sub["answer"] is None
        and not REFERENCE.search(sub["question"])
        and sub["question"].lower() not in queried
    ]


def take_gap(state: State) -> tuple[str, list[str], list[str]]:
    """The oldest pending gap, the gaps left and the queried gaps including it."""
    gaps = list(state.get("gaps", []))
    gap = gaps.pop(0)
    return gap, gaps, [*state.get("queried_gaps", []), gap]
