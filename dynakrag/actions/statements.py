"""Sentences that state facts: which sentence of a passage states an answer about an entity,
what class noun it gives a name ("the city of X"), whether an answer is of a kind, and a name
as its sentence writes it whole. Language rules (English), no dataset's templates; used by the
chain (:mod:`dynakrag.actions.chain`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import sentencex

from dynakrag.actions.grounding import is_yes_no, normalised, statement_of
from dynakrag.actions.text import content_words
from dynakrag.entity_classes import CLASS_HEADS, CLASS_NOUNS
from dynakrag.state import Document, HopKind

__all__ = [
    "Statement",
    "about",
    "find_statement",
    "kind_fits",
    "known",
    "label_of",
    "labelled_names",
    "mentions",
    "names_entity",
    "namesake",
    "passage_text",
    "sentences",
    "subject_of",
    "whole_name",
]

_PRONOUN_START = re.compile(
    r"^(?:[^,.;]{0,60},\s+)?(?:he|she|it|they|his|her|its|their)\b", re.IGNORECASE
)
"""A sentence whose subject is a pronoun, after an opening phrase at most ("In 2011, he ...")."""
_DESCRIPTION_START = re.compile(r"^(?:[^,.;]{0,60},\s+)?[Tt]h(?:e|is)\s+[a-z][a-z-]+\b(?!\s+of\b)")
"""A sentence whose subject is a common noun ("The team played ...", "This film ..."): in the
passage whose subject is an entity, its way of going on about it."""
_QUALIFIER = re.compile(r"\s*\([^)]*\)\s*$")
_ALL_CLASS_NOUNS = frozenset().union(*CLASS_NOUNS.values())


def mentions(text: str, name: str) -> bool:
    """Whether ``text`` names ``name`` exactly (folded words, whole words only)."""
    wanted = normalised(name)
    return bool(wanted) and f" {wanted} " in f" {normalised(text)} "


def sentences(text: str) -> list[str]:
    """The sentences of ``text``; an abbreviation or an initial ("Dr. Robotnik", "Roger O.
    Egeberg", "the U.S. Army") ends none."""
    return [s.strip() for s in sentencex.segment("en", text) if s.strip()]


def about(doc: Document, name: str) -> bool:
    """Whether a passage is about ``name``: its title (less a qualifier: "David Jones (rugby)"),
    or its first sentence, names it (in a namesake's passage, standing alone:
    :func:`namesake`)."""
    title = str(doc.get("title", ""))
    if title and normalised(name) in (normalised(title), normalised(bare_title(doc))):
        return True
    if title and but_for_a_class_noun(bare_title(doc), name):
        return True
    first = sentences(str(doc.get("text", "")))[:1]
    return bool(first) and names_entity(doc, first[0], name)


def but_for_a_class_noun(title: str, name: str) -> bool:
    """Whether a title and a name differ only by one class noun ending one of them ("Tikhaya
    Sosna River" for "Tikhaya Sosna", "Bansaan" for "Bansaan Island"; not "Georgia State
    University" for "Georgia", nor "University of Washington" for "Washington")."""
    short, long = sorted((normalised(title).split(), normalised(name).split()), key=len)
    return (
        bool(short)
        and len(long) == len(short) + 1
        and long[:-1] == short
        and (long[-1] in CLASS_HEADS)
    )


def bare_title(doc: Document) -> str:
    """A passage's title less a trailing qualifier ("Keith Bostic (American football)")."""
    return _QUALIFIER.sub("", str(doc.get("title", "")))


def subject_of(doc: Document, name: str) -> bool:
    """Whether ``name`` is the subject of the passage: its title (less a qualifier) or the
    start of its first sentence ("Boston is a town in Lincolnshire" is about Boston, not
    Lincolnshire, though :func:`about` counts it for both)."""
    title = bare_title(doc)
    if normalised(title) == normalised(name):
        return True
    first = sentences(str(doc.get("text", "")))[:1]
    opening = normalised(first[0]).removeprefix("the ") if first else ""
    return bool(normalised(name)) and f"{opening} ".startswith(f"{normalised(name)} ")


def names_entity(doc: Document, sentence: str, name: str) -> bool:
    """Whether ``sentence`` of ``doc`` names ``name``; in a namesake's passage only where the
    name stands alone, not inside the namesake's own longer name ("Kenton Terry
    Richardson")."""
    if not namesake(doc, name):
        return mentions(sentence, name)
    found = False
    for match in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", sentence, re.IGNORECASE):
        found = True
        before = sentence[: match.start()].split()
        if not before or not before[-1][:1].isupper():
            return True
    return not found and mentions(sentence, name)  # written otherwise (accents): as it is


def namesake(doc: Document, name: str) -> bool:
    """Whether a passage is about another bearer of a name like ``name``: its title (less a
    qualifier such as "(footballer)") is another name of two words or more with the same last
    word ("Kenton Richardson" for "Terry Richardson"), so its "Kenton Terry Richardson (born
    1999)" is not the person asked about."""
    title = bare_title(doc)
    wanted, have = normalised(name).split(), normalised(title).split()
    return (
        len(wanted) >= 2
        and len(have) >= 2
        and have[-1] == wanted[-1]
        and have != wanted
        and not mentions(title, name)
        and not mentions(name, title)  # "Elizabeth II" for "Queen Elizabeth II"
    )


def known(name: str, evidence: Sequence[Document]) -> bool:
    """Whether a passage is about ``name``, names it in full, or is titled with a form of it:
    a title within the name but for class nouns ("Kaiser Ventures" for "Kaiser Ventures
    Corporation", "Bansaan" for "Bansaan Island", not "Fishing Lake" for "Brown State Fishing
    Lake"), a title holding the name, or the same last word unless that word is a class noun
    ("Bob Seger" for "Robert C Seger")."""
    words = content_words(name)
    last = name.split()[-1].lower() if name.split() else ""
    for doc in evidence:
        if about(doc, name) or mentions(passage_text(doc), name):
            return True
        title = bare_title(doc)
        title_words = content_words(title)
        if not title_words or not words:
            continue
        if (title_words <= words and words - title_words <= CLASS_HEADS) or words <= title_words:
            return True
        if last not in CLASS_HEADS and title.split()[-1].lower() == last:
            return True
    return False


def passage_text(doc: Document) -> str:
    return f"{doc.get('title', '')}. {doc.get('text', '')}"


@dataclass(frozen=True)
class Statement:
    """A sentence of a passage that states an answer."""

    passage: str
    sentence: str


def _short_name(name: str) -> str | None:
    """The last word of a name of several capitalised words, as a passage about it goes on
    calling it ("Benson" for "Kris Benson"); None for a one-word or lower-case name."""
    words = name.split()
    last = words[-1] if len(words) >= 2 else ""
    hyphenated_alpha = last.replace("-", "").isalpha()  # "Lynch-Staunton"
    return last if len(last) >= 4 and last[:1].isupper() and hyphenated_alpha else None


def find_statement(answer: str, names: Sequence[str], docs: Sequence[Document]) -> Statement | None:
    """The first sentence that states ``answer`` about one of ``names``: the sentence names it,
    or the sentence is in a passage about it and calls it by a pronoun, a common noun ("The
    team played ...") or its last name ("Benson pitched for ..." in Kris Benson's passage); a
    namesake's passage (:func:`namesake`) names it only where the name stands alone.
    With no names, any sentence stating the answer."""
    for doc in docs:
        its_own = not names or any(about(doc, n) for n in names)
        for sentence in sentences(str(doc.get("text", ""))):
            if not statement_of(answer, sentence):
                continue
            if not names or any(names_entity(doc, sentence, n) for n in names):
                return Statement(str(doc.get("id", "")), sentence)
            if its_own and (
                _PRONOUN_START.match(sentence)
                or (_DESCRIPTION_START.match(sentence) and any(subject_of(doc, n) for n in names))
                or len(sentences(doc["text"])) == 1
                or any(mentions(sentence, short) for short in map(_short_name, names) if short)
            ):
                return Statement(str(doc.get("id", "")), sentence)
    return None


_LABEL_PATTERNS = (
    r"\bthe\s+({noun})\s+of\s+{answer}\b",
    r"\b{answer}\s+(?:is|was)\s+(?:an?|the)\s+(?:[\w-]+\s+){{0,3}}?({noun})\b",
    r"\b{answer},\s+(?:an?|the)\s+(?:[\w-]+\s+){{0,3}}?({noun})\b",
    r"\bthe\s+({noun})\s+{answer}\b",
)


def label_of(answer: str, sentence: str) -> str | None:
    """The class noun ``sentence`` gives ``answer`` ("the city of X", "X is a small town",
    "X, a company"), or None."""
    nouns = "|".join(sorted(_ALL_CLASS_NOUNS, key=len, reverse=True))
    escaped = re.escape(answer.strip())
    for pattern in _LABEL_PATTERNS:
        match = re.search(pattern.format(noun=nouns, answer=escaped), sentence, re.IGNORECASE)
        if match:
            return match.group(1).lower()
    return None


_MONTH_WORD = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b", re.IGNORECASE
)
_TIME_PHRASE = re.compile(
    r"^(?:[Dd]uring|[Uu]nder|[Aa]fter|[Bb]efore|[Ss]ince|[Uu]ntil|[Ff]ollowing)\s|"
    r"\b(?:spring|summer|autumn|fall|winter|century|decade|era|reign)\b"
)
"""A time written without a date: "during the Korean War", "under Trajan", "the middle of the
summer" (the season lower-case: "Winter Garden" is a name)."""
_NUMBER_WORD = re.compile(
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    r"forty|fifty|hundred|thousand|million|billion)\b",
    re.IGNORECASE,
)


def kind_fits(answer: str, kind: HopKind) -> bool:
    """Whether ``answer`` can be of ``kind``: dates and numbers hold a digit (or a month or
    number word; a date may be a time phrase: "during the Korean War"), names hold a letter
    and are not bare numbers, yes/no is yes or no."""
    text = answer.strip()
    has_digit = any(ch.isdigit() for ch in text)
    if kind == "yes/no":
        return is_yes_no(text)
    if kind == "date":
        return has_digit or bool(_MONTH_WORD.search(text) or _TIME_PHRASE.search(text))
    if kind == "number":
        return has_digit or bool(_NUMBER_WORD.search(text))
    if kind in ("person", "organisation", "place"):
        return (
            any(ch.isalpha() for ch in text)
            and not is_yes_no(text)
            and not (has_digit and not any(ch.isupper() for ch in text))
        )
    return bool(text)


_LABELLED_NAME = re.compile(r"\bthe\s+([a-z]+)\s+of\s+([A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*)")


_NAME_RUN = re.compile(r"[A-Z][\w'’-]*(?:\s+(?:of\s+|de\s+|the\s+)?[A-Z][\w'’-]*)*")
_LEADING = frozenset({"The", "A", "An"})
MAX_NAME_WORDS = 6
"""The longest name a shortened answer is given back as."""


def whole_name(answer: str, sentence: str) -> str:
    """``answer`` as the sentence names it: a name the generator shortened ("Essane" for "the
    Essane River", "Ilsa" for "Ilsa Marr") becomes the whole run of capitalised words it sits
    in; anything else comes back as it is."""
    wanted = normalised(answer)
    if not wanted or not answer[:1].isupper():
        return answer
    for match in _NAME_RUN.finditer(sentence):
        words = match.group(0).split()
        while words and words[0] in _LEADING:
            words = words[1:]
        name = " ".join(words)
        if (
            f" {wanted} " in f" {normalised(name)} "
            and len(name) > len(answer)
            and len(words) <= min(MAX_NAME_WORDS, len(answer.split()) + 2)
        ):
            return name  # a run longer than a name is a list of names ("Starring A B C ...")
    return answer


def labelled_names(sentence: str) -> list[tuple[str, str]]:
    """``(class noun, name)`` for each "the <noun> of <Name>" in ``sentence``."""
    return _LABELLED_NAME.findall(sentence)
