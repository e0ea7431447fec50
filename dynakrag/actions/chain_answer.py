"""The chain's own answer: a bridge chain's last hop, a comparison computed from the hops'
parsed values (dates, numbers), and the passages that cite it (:mod:`dynakrag.actions.chain`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from dynakrag.actions.chain import answers_what_is_asked, chain_complete, hop_entities
from dynakrag.actions.grounding import dates_in
from dynakrag.decomposition import EARLIER, LATER, REFERENCE, leads_to_last
from dynakrag.state import Hop

__all__ = ["chain_answer", "chain_passages", "comparison_answer", "is_bridge_chain"]


def _references(hop: Hop) -> set[int]:
    return {int(k) - 1 for k in REFERENCE.findall(hop["question"])}


def is_bridge_chain(hops: Sequence[Hop]) -> bool:
    """Whether the last hop's answer answers the question: every earlier hop leads to it
    (:func:`~dynakrag.decomposition.leads_to_last`), and it is not a yes/no."""
    if not hops or hops[-1]["expects"] == "yes/no":
        return False
    return leads_to_last([hop["question"] for hop in hops])


_MORE = re.compile(
    r"\b(?:more|most|larger|largest|bigger|biggest|higher|highest|taller|tallest|longer|longest|greater|greatest)\b",
    re.I,
)
_LESS = re.compile(
    r"\b(?:fewer|fewest|less|least|smaller|smallest|lower|lowest|shorter|shortest)\b", re.I
)


def _date_key(value: str) -> tuple[int, int, int] | None:
    dates = sorted(d for d in dates_in(value) if d[0])
    if dates:
        return dates[0]
    years = re.findall(r"\b(\d{3,4})\b", value)
    return (int(years[0]), 0, 0) if len(years) == 1 else None


def _number_key(value: str) -> float | None:
    numbers = re.findall(r"\d[\d,]*(?:\.\d+)?", value)
    if len(numbers) != 1:
        return None
    return float(numbers[0].replace(",", ""))


def comparison_answer(question: str, hops: Sequence[Hop]) -> tuple[str, list[Hop]] | None:
    """The answer of a comparison computed from the hops' values, or None when the question
    is no comparison this can compute: the entity whose date (earlier/later) or number
    (more/less) wins, with the hops it compared. Ties and unparsable values give None."""
    leaves = [i for i in range(len(hops)) if not any(i in _references(h) for h in hops[i + 1 :])]
    if len(leaves) < 2 or any(hops[i]["status"] != "resolved" for i in leaves):
        return None
    dated = all(hops[i]["expects"] == "date" for i in leaves)
    counted = all(hops[i]["expects"] == "number" for i in leaves)
    keys: list[Any] = []
    if dated and (EARLIER.search(question) or LATER.search(question)):
        keys = [_date_key(hops[i]["answer"] or "") for i in leaves]
        pick_first = bool(EARLIER.search(question))
    elif counted and (_MORE.search(question) or _LESS.search(question)):
        keys = [_number_key(hops[i]["answer"] or "") for i in leaves]
        pick_first = bool(_LESS.search(question))
    else:
        return None
    if any(key is None for key in keys) or len(set(keys)) != len(keys):
        return None
    subjects = []
    for i in leaves:
        names = [e for e in hop_entities(list(hops), i) if not e.isdigit()]
        if not names:
            return None
        subjects.append(names[0])
    order = sorted(range(len(leaves)), key=lambda j: keys[j])
    winner = order[0] if pick_first else order[-1]
    return subjects[winner], [hops[i] for i in leaves]


def chain_answer(question: str, hops: Sequence[Hop]) -> tuple[str, str] | None:
    """The answer the chain itself gives (answer, how: ``chain`` or ``comparison``), or None
    when a reader must compose it (a yes/no, an aggregation), the chain is not complete, or
    its last hop does not ask for what the question asks for."""
    if not chain_complete(hops):
        return None
    if is_bridge_chain(hops):
        # A plan that stops short of what is asked (a person for "which river") is no answer.
        if not answers_what_is_asked(question, hops[-1]):
            return None
        return str(hops[-1]["answer"]), "chain"
    compared = comparison_answer(question, hops)
    if compared is not None:
        return compared[0], "comparison"
    return None


def chain_passages(hops: Iterable[Hop]) -> list[str]:
    """Ids of the passages that state the resolved hops, in hop order."""
    return list(
        dict.fromkeys(h["passage"] for h in hops if h["status"] == "resolved" and h["passage"])
    )
