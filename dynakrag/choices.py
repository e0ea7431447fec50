"""Questions that set two named things side by side: the two names a question offers to
choose from ("Which band has more members, A or B?"), and one date question per name for a
comparison in time ("Who was born earlier, A or B?" -> "When was A born?", "When was B
born?"). The decomposition plans such questions by them (:mod:`dynakrag.decomposition`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from dynakrag.values import EARLIER, LATER

__all__ = [
    "NAME",
    "compared_dates",
    "compared_quantities",
    "offered_options",
    "options_apart",
    "predicate_choice",
]

_WORDS = r"[A-Z][\w'’-]*(?:\s+(?:(?:of|the|in|on|for|to|de|a|an)\s+)*[A-Z0-9][\w'’-]*)*"
NAME = rf"{_WORDS}(?:,\s+\d+(?:st|nd|rd|th)\s+{_WORDS})?"
"""A name as written in a question: capitalised words, with the small words titles hold, and
a numbered title after a comma ("Edward Baring, 1st Baron Revelstoke")."""

_BETWEEN = re.compile(rf"\b[Bb]etween\s+(?:the\s+)?({NAME})\s+and\s+(?:the\s+)?({NAME})")
_LEAD = r"(?:[,:][\"”’']?\s*|\b(?:[a-z]+er|(?:more|fewer|less)\s+[a-z]+|first|last),?\s+)"
"""What leads into the two options at a question's end: a comma or a colon ("..., A or B?",
"... first: A or B?"), or a comparative with no comma ("higher A or B ?", "more species A or
B ?", "younger A or B ?")."""
_AUXILIARY_CHOICE = re.compile(
    rf"^(?:Is|Was|Are|Were|Did|Does|Do|Has|Have|Had|Will|Would|Can|Could)\s+(?:the\s+)?"
    rf"({NAME}),?\s+or\s+(?:the\s+)?({NAME})(?=\s+[a-z])"
)
""""Is A or B further west?", "Was A or B born first?": the two names right after the
auxiliary, the question's predicate after them."""
_DATE_VERB = re.compile(
    r"\b(born|founded|established|formed|released|published|built|opened|created|launched|"
    r"died|started|came out)\b",
    re.IGNORECASE,
)
_PARTICIPLE_OF = {"came out": "released"}  # "When was X came out?" reads "When was X released?"
_POSSESSED = re.compile(r"\b(?:has|have|had|whose|with)\b", re.IGNORECASE)
"""A thing the options have, named before the date verb: the date is that thing's."""
_AGE = re.compile(r"\b(?:older|oldest|younger|youngest|elder)\b", re.IGNORECASE)


def compared_dates(question: str) -> list[str] | None:
    """One date question per named thing, for a question that sets two names side by side
    by when something happened to them ("Between A and B, who is older?", "Which was founded
    first, A or B?"): the verb is the question's own, "born" for a person's age ("who ...
    older"); None when the question is no such comparison."""
    pair = offered_options(question)
    if pair is None or not (EARLIER.search(question) or LATER.search(question)):
        return None
    verb = _DATE_VERB.search(question)
    age = _AGE.search(question)
    anchor = verb or age
    if anchor is None or _POSSESSED.search(question[: anchor.start()]):
        return None  # "Which film has the director born later, A or B?": the director's date
    if verb is not None:
        action = verb.group(1).lower()
        action = _PARTICIPLE_OF.get(action, action)
    elif re.search(r"\bwho\b", question, re.IGNORECASE):
        action = "born"
    else:
        return None
    first, second = pair
    return [f"When was {first} {action}?", f"When was {second} {action}?"]


_MEASURE = {
    "taller": "tall",
    "tallest": "tall",
    "higher": "high",
    "highest": "high",
    "longer": "long",
    "longest": "long",
    "deeper": "deep",
    "deepest": "deep",
    "heavier": "heavy",
    "heaviest": "heavy",
    "wider": "wide",
    "widest": "wide",
}
"""Comparatives of one measure each, and the adjective "How ... is X?" asks it by ("shorter",
"larger", "bigger" may compare several measures: left to the plan)."""
_MEASURED = re.compile(rf"(?<!\bfor )\b({'|'.join(_MEASURE)})\b", re.IGNORECASE)
"""A measure compared; "for longer" is a time, not a length."""
_COUNTED = re.compile(r"\b(?:more|most|fewer|fewest)\s+((?:[a-z]+\s+)?[a-z]+[^su\W]s)\b")
"""A count compared ("more members", "fewer species", "more academy awards"): a plural noun,
not an adjective ("more famous", "more precious")."""


def compared_quantities(question: str) -> list[str] | None:
    """One question per named thing for a question that sets two names side by side by a
    measure or a count ("Which mountain is taller, A or B?" -> "How tall is A?", "Which band
    has more members, A or B?" -> "How many members does A have?"); None when it compares
    neither."""
    pair = offered_options(question)
    if pair is None:
        return None
    first, second = pair
    counted = _COUNTED.search(question)
    if counted is not None:
        noun = counted.group(1)
        return [f"How many {noun} does {first} have?", f"How many {noun} does {second} have?"]
    measured = _MEASURED.search(question)
    if measured is not None:
        adjective = _MEASURE[measured.group(1).lower()]
        return [f"How {adjective} is {first}?", f"How {adjective} is {second}?"]
    return None


_PREDICATE_HEAD = re.compile(
    r"^(?:which|who|what)(?:\s+[\w'’-]+){0,3}?\s+(is|was|are|were)\s+(.+?)[\s,:]*$",
    re.IGNORECASE,
)


def predicate_choice(question: str) -> list[str] | None:
    """One yes/no question per named thing for a choice by what is said of one of them
    ("Which singer is American, A or B?" -> "Is A American?", "Is B American?"; "Which is a
    genus of ferns, A or B?"); None for any other question."""
    pair = offered_options(question)
    if pair is None:
        return None
    first, second = pair
    at = question.find(first)
    head = _PREDICATE_HEAD.match(question[:at].strip()) if at > 0 else None
    if head is None:
        return None
    auxiliary, predicate = head.group(1).capitalize(), head.group(2).strip()
    return [f"{auxiliary} {first} {predicate}?", f"{auxiliary} {second} {predicate}?"]


_OPTIONS = re.compile(
    rf"{_LEAD}((?:the\s+)?[A-Z0-9][^,?]*?),?\s+or\s+((?:the\s+)?[A-Z0-9][^?]*?)\s*[?.!]*\s*$"
)


def offered_options(question: str) -> tuple[str, str] | None:
    """The two names a question offers to choose from: ", A or B?" (or ": A or B?") at its
    end, "older A or B?" with no comma, "Is A or B further west?", or "Between A and B, ...";
    None when it offers none."""
    found = (
        _BETWEEN.search(question)
        or _OPTIONS.search(question.strip())
        or _AUXILIARY_CHOICE.search(question.strip())
    )
    if found is None:
        return None
    first, second = (part.strip().strip("\"'“”") for part in found.groups())
    if not first or not second or first.lower() == second.lower():
        return None
    return first, second


def options_apart(parts: Sequence[str], options: Sequence[str]) -> bool:
    """Whether every option is in some part of a plan, and no part holds two."""
    folded = [part.lower() for part in parts]
    wanted = [option.lower() for option in options]
    return all(any(o in part for part in folded) for o in wanted) and not any(
        sum(o in part for o in wanted) > 1 for part in folded
    )
