"""Text helpers the actions and the policy features share: content words, names, values."""

from __future__ import annotations

import re

STOP_NAMES = frozenset(
    "The A An In On At For From By With After Before During Since Outside Inside Of To As "
    "When Where Who What Which Whose How It Its He She They This That These Those His Her "
    "Their Our We I".split()
)
"""Words capitalised only because they start a sentence: never part of a name."""

_WORD = re.compile(r"[a-z0-9]+")
_FUNCTION_WORDS = frozenset(
    "a an the of in on at to for by with from and or is was were are be been which who whom "
    "what where when how did does do that this as its it his her their founded".split()
)
_CAPITALISED = re.compile(r"[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*")


def looks_like_value(text: str) -> bool:
    """Dates, numbers and yes/no answers are facts, not entities to expand."""
    stripped = text.strip().lower()
    return stripped in {"yes", "no", "unknown"} or bool(re.fullmatch(r"[\d\s,./-]+", stripped))


def content_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` without function words."""
    return {w for w in _WORD.findall(text.lower()) if w not in _FUNCTION_WORDS and len(w) > 1}


def _stop_name(word: str) -> bool:
    """A word that names nothing: one of :data:`STOP_NAMES`, or one of them shouted in
    capitals ("FROM" in "SELECT * FROM passages;"); short capitals stay names ("IT", "US")."""
    return word in STOP_NAMES or (
        len(word) > 3 and word.isupper() and word.capitalize() in STOP_NAMES
    )


def capitalised_words(question: str) -> list[str]:
    """Each capitalised word of the question, the first one included, less a possessive and
    words capitalised only to open a sentence ("Suicide's 1977 album ..." gives "Suicide")."""
    words = [re.sub(r"['’]s$", "", w.strip(".,;:!?\"'()")) for w in question.split()]
    return [w for w in words if w[:1].isupper() and not _stop_name(w) and len(w) > 1]


def question_names(text: str) -> list[str]:
    """Capitalised names in a question, leaving out its first word and question words."""
    body = text.strip()
    _, _, rest = body.partition(" ")
    names = []
    for match in _CAPITALISED.findall(rest):
        words = [w for w in match.split() if not _stop_name(w)]
        if words:
            names.append(" ".join(words))
    return names
