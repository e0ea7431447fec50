"""What a question asks for: the kind of answer (person, place, organisation, date, number,
yes/no, free text) and the noun that names it, read from its question word and the noun after
"which"/"what" ("In which country ..." a place, "Which company ..." an organisation, "which
country music star" a person). A chain's hops and its answer are judged by it
(:mod:`dynakrag.actions.chain`, :mod:`dynakrag.actions.chain_answer`).

English question words and a short list of common nouns; nothing written for a dataset's
wording.
"""

from __future__ import annotations

import re

from dynakrag.actions.grounding import is_yes_no, normalised
from dynakrag.actions.statements import sentences
from dynakrag.choices import offered_options
from dynakrag.entity_classes import PERSON_NOUNS, entity_class
from dynakrag.state import Hop, HopKind

__all__ = [
    "KIND_OF_CLASS",
    "POSSESSIVE",
    "answers_what_is_asked",
    "asked_for",
    "expected_kind",
    "is_an_option",
    "not_an_option",
]

POSSESSIVE = re.compile(r"['’]s?$")
"""A possessive ending ("Ada Voss's", "the Joneses'")."""

KIND_OF_CLASS: dict[str, HopKind] = {
    "settlement": "place",
    "country": "place",
    "region": "place",
    "water": "place",
    "landform": "place",
    "organisation": "organisation",
    "school": "organisation",
    "group": "organisation",
}
"""The kind of answer each entity class is (:data:`dynakrag.entity_classes.CLASS_NOUNS`)."""
_DATE_NOUNS = frozenset("year date day month decade century".split())
_NUMBER_NOUNS = frozenset(
    "number amount population age count percentage percent share proportion rate total sum "
    "capacity size".split()
)
_AUXILIARIES = frozenset(
    "is are was were do does did has have had can could will would should shall may might".split()
)
_ASKED_NOUN = re.compile(
    r"\b(?:which|what|whose)\s+(?:(?:one|kind|type|sort)\s+of\s+)?([a-z]+)|\bname\s+the\s+([a-z]+)",
    re.IGNORECASE,
)
_DESCRIBED_NOUN = re.compile(
    r"\b(?:what|which|who)\s+(?:is|was|are|were)\s+(?:the\s+|its\s+|their\s+)?"
    r"(?:[a-z]+\s+){0,2}?([a-z]+)\s+(?:of|for|in|at|with|from|by|where|that|which|who|whom)\b"
)
_PLACE_NOUNS = frozenset(
    "headquarters birthplace location place seat base address residence whereabouts".split()
)


_QUESTION_WORDS: tuple[tuple[str, HopKind], ...] = (
    (r"\bhow (?:many|much|old|long|far|tall|high|big)\b", "number"),
    (r"\bwhen\b", "date"),
    (r"\bwho(?:m|se)?\b", "person"),
    (r"\bwhere\b", "place"),
)


_PHRASE_ENDS = _AUXILIARIES | frozenset(
    "the a an of in on at for by with from to into that who which whom whose where when and or "
    "as than".split()
)
_PHRASE_WORD = re.compile(r"[^\W\d_][\w-]*(?:['’]s?)?|\S")


def _known_noun(word: str) -> bool:
    return (
        word in _PLACE_NOUNS
        or word in _DATE_NOUNS
        or word in _NUMBER_NOUNS
        or word in PERSON_NOUNS
        or entity_class(word) is not None
    )


def _asked_noun(text: str) -> str:
    """The noun after "which"/"what"/"whose"/"name the": the head of the phrase, its last
    noun of a known kind ("which country music star" -> "star", "which American film
    director" -> "director", "which company's founder" -> "founder"), else its first word. The
    phrase ends at punctuation, an auxiliary, an article or a preposition."""
    match = _ASKED_NOUN.search(text)
    if match is None:
        return ""
    start = match.start(1) if match.group(1) else match.start(2)
    phrase: list[str] = []
    for word in _PHRASE_WORD.findall(text[start:])[:4]:
        bare = POSSESSIVE.sub("", word).lower()
        if not bare[:1].isalpha() or bare in _PHRASE_ENDS:
            break
        phrase.append(bare)
    known = [word for word in phrase if _known_noun(word)]
    return known[-1] if known else (phrase[0] if phrase else "")


def expected_kind(question: str) -> tuple[HopKind, str]:
    """The kind of answer ``question`` asks for and the noun it names for it ("" when none).

    From its question word ("who" a person, "when" a date, "how many" a number, "where" a
    place, an auxiliary first a yes/no) and the noun after "which"/"what"/"name the"
    ("In which country" a place, "Which company" an organisation).
    """
    text = question.strip()
    lowered = text.lower()
    first = lowered.split()[0] if lowered.split() else ""
    described = _DESCRIBED_NOUN.search(lowered)
    # "What is the birth city of X?": the noun before "of"; else the head after "which".
    noun = described.group(1) if described else _asked_noun(text)
    if noun in _PLACE_NOUNS:
        return "place", ""
    if noun in _DATE_NOUNS:
        return "date", noun
    if noun in _NUMBER_NOUNS:
        return "number", noun
    cls = entity_class(noun) if noun else None
    if cls is not None:
        return KIND_OF_CLASS[cls], noun
    if noun in PERSON_NOUNS:
        return "person", noun
    # The first question word asks ("Who managed the club when Beckham joined?": a person;
    # "What was the name of the fanzine that interviewed him when ...": the name, not a date).
    asked = [
        (found.start(), kind)
        for pattern, kind in _QUESTION_WORDS
        if (found := re.search(pattern, lowered)) and not (kind == "person" and noun)
    ]
    opening = _ASKED_NOUN.search(lowered)
    if noun and opening is not None and all(opening.start() < start for start, _ in asked):
        asked = []
    if asked:
        return min(asked)[1], ""
    if first in _AUXILIARIES and offered_options(text) is None:
        # "Is A or B further west?" offers a choice: one of them answers it, not yes or no.
        return "yes/no", ""
    return "text", noun


def asked_for(question: str) -> tuple[HopKind, str]:
    """The kind and noun the question asks for, read from its last sentence (the asked part of
    "X works for a firm. Which river runs through that city?")."""
    asked = sentences(question.strip())[-1:] or [question]
    return expected_kind(asked[0])


def answers_what_is_asked(question: str, hop: Hop) -> bool:
    """Whether the last hop asks for what the question asks for: the same entity class when
    both name one ("Which river ..." and "Which river flows through #3?"), else the same kind
    when both expect a person, place, organisation, date or number. The question's asked part
    is its last sentence ("X works for a firm. Which river runs through that city?")."""
    kind, noun = asked_for(question)
    wanted = entity_class(noun) if noun else None
    found = entity_class(hop["type_noun"]) if hop["type_noun"] else None
    if wanted is not None and found is not None:
        return wanted == found
    if kind == "text" and noun and hop["expects"] in ("date", "number"):
        return False  # "which war ...?" is not answered by a count of its casualties
    specific = ("person", "place", "organisation", "date", "number")
    return not (kind in specific and hop["expects"] in specific and kind != hop["expects"])


def is_an_option(answer: str, question: str) -> bool:
    """Whether ``answer`` is one of the two things ``question`` offers to choose from
    (:func:`~dynakrag.choices.offered_options`): the same words, or all of one's words
    in the other ("Otto Ludwig Preminger" for "Otto Preminger"; initials aside), matching one
    option only."""
    options = offered_options(question)
    words = _name_words(answer)
    if options is None or not words:
        return False
    matching = [
        option
        for option in options
        if (wanted := _name_words(option)) and (wanted <= words or words <= wanted)
    ]
    return len(matching) == 1


def _name_words(text: str) -> set[str]:
    """A name's words less its initials ("Joseph L. Mankiewicz" = "Joseph Leo Mankiewicz")."""
    return {word for word in normalised(text).split() if len(word) > 1}


def not_an_option(answer: str, question: str) -> bool:
    """Whether ``answer`` fails a question that offers two things to choose from: it names
    neither (a third entity, a value). A yes/no question offering a choice ("Is A or B
    older?") and a question offering none fail nothing."""
    if offered_options(question) is None or is_yes_no(answer):
        return False
    if asked_for(question)[0] == "yes/no":
        return False
    return not is_an_option(answer, question)
