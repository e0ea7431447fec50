"""The chain's own answer: a bridge chain's last hop, a comparison computed from the hops'
parsed values (dates, numbers), and the passages that cite it (:mod:`dynakrag.actions.chain`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from dynakrag.actions.answer_kind import (
    answers_what_is_asked,
    asked_for,
    expected_kind,
    not_an_option,
)
from dynakrag.actions.chain import chain_complete, hop_entities
from dynakrag.actions.grounding import is_yes_no, says_no
from dynakrag.actions.statements import mentions, sentences
from dynakrag.choices import offered_options
from dynakrag.decomposition import REFERENCE, leads_to_last
from dynakrag.state import Hop
from dynakrag.values import (
    ComparisonAnswer,
    EntityValue,
    Ordering,
    compare_values,
    comparison_asked,
    date_as_asked,
)

__all__ = [
    "chain_answer",
    "chain_passages",
    "comparison_answer",
    "conjunction_answer",
    "is_bridge_chain",
    "yes_no_choice",
]


def _references(hop: Hop) -> set[int]:
    return {int(k) - 1 for k in REFERENCE.findall(hop["question"])}


def is_bridge_chain(hops: Sequence[Hop]) -> bool:
    """Whether the last hop's answer answers the question: every earlier hop leads to it
    (:func:`~dynakrag.decomposition.leads_to_last`), and it is not a yes/no."""
    if not hops or hops[-1]["expects"] == "yes/no":
        return False
    return leads_to_last([hop["question"] for hop in hops])


def comparison_answer(question: str, hops: Sequence[Hop]) -> tuple[str, list[Hop]] | None:
    """The answer of a comparison computed from the hops' values
    (:func:`dynakrag.values.compare_values`), or None when the question is no comparison this
    can compute: the entity whose date (earlier / later, older / younger) or number (more /
    less) the question asks for, with the hops it compared. A tie, a value that does not
    parse and an undecided order give None (a reader composes the answer then)."""
    leaves = [i for i in range(len(hops)) if not any(i in _references(h) for h in hops[i + 1 :])]
    if len(leaves) < 2 or any(hops[i]["status"] != "resolved" for i in leaves):
        return None
    expects = {hops[i]["expects"] for i in leaves}
    if expects == {"date"}:
        asked = comparison_asked(question, "time")
    elif expects == {"number"}:
        # Numbers order by an amount, or by an age ("who is older" of two ages).
        asked = comparison_asked(question, "amount") or comparison_asked(question, "time")
        if isinstance(asked, Ordering) and asked.scale == "time" and not asked.by_age:
            return None
    else:
        return None
    if not isinstance(asked, Ordering):
        return None
    options = offered_options(question) or []
    values = []
    for i in leaves:
        # The option the hop asks about, as the question words it: a name read off the hop
        # loses words a title keeps ("No Path Through Fire", "Samson And His Mighty Challenge").
        named = sorted((o for o in options if mentions(hops[i]["question"], o)), key=len)[::-1]
        names = named or [e for e in hop_entities(list(hops), i) if not e.isdigit()]
        if not names:
            return None
        values.append(EntityValue(names[0], hops[i]["answer"] or "", hops[i]["passage"]))
    compared = compare_values(question, values, asked)
    if not isinstance(compared, ComparisonAnswer) or compared.tied:
        return None
    return compared.chosen[0], [hops[i] for i in leaves]


def chain_answer(question: str, hops: Sequence[Hop]) -> tuple[str, str] | None:
    """The answer the chain itself gives (answer, how: ``chain`` or ``comparison``), or None
    when a reader must compose it (a yes/no, an aggregation), the chain is not complete, or
    its last hop does not ask for what the question asks for."""
    if not chain_complete(hops):
        return None
    if is_bridge_chain(hops):
        # A plan that stops short of what is asked (a person for "which river") is no answer.
        last = hops[-1]
        if not answers_what_is_asked(question, last):
            return None
        answer = str(last["answer"])
        if last["expects"] == "date":
            # The hop's own wording may have lost it: "born in which year" -> "When was #1 born?"
            answer = date_as_asked(answer, last["sentence"] or "", asked_for(question)[1])
        if not_an_option(answer, question):
            return None  # "..., A or B?" answered by a third thing: the reader chooses
        return answer, "chain"
    compared = comparison_answer(question, hops)
    if compared is not None:
        return compared[0], "comparison"
    both = conjunction_answer(question, hops)
    if both is not None:
        return both, "conjunction"
    chosen = yes_no_choice(question, hops)
    if chosen is not None:
        return chosen, "choice"
    return None


def yes_no_choice(question: str, hops: Sequence[Hop]) -> str | None:
    """The option of ", A or B?" whose yes/no hop says yes while the other's says no ("Which
    singer is American, A or B?" with "Is A American?" no, "Is B American?" yes); None
    unless the question offers two options, each has one resolved yes/no hop, and exactly
    one says yes."""
    options = offered_options(question)
    if options is None or len(hops) != 2:
        return None
    said: dict[str, bool] = {}
    for hop in hops:
        named = [o for o in options if mentions(hop["question"], o)]
        answer = str(hop["answer"] or "")
        if hop["status"] != "resolved" or len(named) != 1 or not is_yes_no(answer):
            return None
        said[named[0]] = not says_no(answer)
    if len(said) != 2 or sum(said.values()) != 1:
        return None
    return next(option for option, yes in said.items() if yes)


_LEADING_CONJUNCTION = re.compile(r"^(?:and|but|also)\s+", re.IGNORECASE)


def conjunction_answer(question: str, hops: Sequence[Hop]) -> str | None:
    """ "yes" or "no" for a yes/no question that holds when each of its yes/no hops does ("Are
    A and B both shrubs?", "Is A found in Africa? And is B found all over?"): "no" as soon as
    one hop says no, "yes" when all say yes. None when the question is not asked yes/no in
    every part, offers a choice ("Is A or B ...?"), or a hop is not a resolved yes/no that
    stands alone (no reference to another hop's answer)."""
    if len(hops) < 2 or offered_options(question) is not None:
        return None
    if re.search(r"\b(?:or|either|neither)\b", question, re.IGNORECASE):
        return None
    asked = [_LEADING_CONJUNCTION.sub("", s) for s in sentences(question) if s.endswith("?")]
    if not asked or any(expected_kind(part)[0] != "yes/no" for part in asked):
        return None
    answers = [str(hop["answer"] or "") for hop in hops]
    if any(
        hop["status"] != "resolved" or _references(hop) or not is_yes_no(answer)
        for hop, answer in zip(hops, answers, strict=True)
    ):
        return None
    return "no" if any(says_no(answer) for answer in answers) else "yes"


def chain_passages(hops: Iterable[Hop]) -> list[str]:
    """Ids of the passages that state the resolved hops, in hop order."""
    return list(
        dict.fromkeys(h["passage"] for h in hops if h["status"] == "resolved" and h["passage"])
    )
