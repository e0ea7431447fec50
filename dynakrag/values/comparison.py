"""What comparison a question asks of its entities' values (:func:`comparison_asked`: an
:class:`Ordering` or an :class:`Equality`), and the answer computed from the values
(:func:`compare_values`: a :class:`ComparisonAnswer` or a :class:`CannotCompare`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dynakrag.values.dates import _date_order, _date_text, parse_date
from dynakrag.values.numbers import Quantity, _number_text, parse_number
from dynakrag.values.text import _WORD, _fold

__all__ = [
    "EARLIER",
    "LATER",
    "CannotCompare",
    "ComparisonAnswer",
    "EntityValue",
    "Equality",
    "Ordering",
    "Scale",
    "ValueRecord",
    "compare_values",
    "comparison_asked",
]

# --------------------------------------------------------------------------------------------
# What a question asks

Scale = Literal["time", "amount"]

_EARLY = r"earlier|earliest|older|oldest|elder|eldest|first|before|sooner|soonest|prior"
_LATE = (
    r"later|latest|younger|youngest|last|after|more\s+recent(?:ly)?|most\s+recent(?:ly)?"
    r"|newer|newest"
)
_MORE = (
    r"more|most|larger|largest|bigger|biggest|higher|highest|taller|tallest|longer|longest"
    r"|greater|greatest|heavier|heaviest|wider|widest|deeper|deepest|richer|richest|maximum"
)
_LESS = (
    r"fewer|fewest|less|least|smaller|smallest|lower|lowest|shorter|shortest|lighter"
    r"|lightest|narrower|narrowest|shallower|shallowest|poorer|poorest|minimum"
)
EARLIER = re.compile(rf"\b(?:{_EARLY})\b", re.IGNORECASE)
"""Words that ask for the earlier of dates ("who is older", "which came first")."""
LATER = re.compile(rf"\b(?:{_LATE})\b", re.IGNORECASE)
"""Words that ask for the later of dates."""
_AGE = re.compile(r"^(?:older|oldest|elder|eldest|younger|youngest)$", re.IGNORECASE)
_ORDINALS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
}
_ORDINAL = r"first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th)"
# Alternatives in this order: "more recent" before "more", an ordinal before its cue.
_CUE = re.compile(
    rf"\b(?:(?P<rank>{_ORDINAL})(?:\s*-\s*|\s+)(?P<to>to\s*-?\s*)?)?"
    rf"(?P<cue>{_LATE}|{_EARLY}|{_MORE}|{_LESS})\b",
    re.IGNORECASE,
)
_SAME = re.compile(r"\b(?:same|identical|share|shared|alike)\b", re.IGNORECASE)
_DIFFERENT = re.compile(r"\b(?:different|differ|differs|distinct)\b", re.IGNORECASE)
_YES_NO_START = re.compile(
    r"^\W*(?:is|are|was|were|do|does|did|have|has|had|can|could|will|would|should)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Ordering:
    """A question that orders its entities and asks for the one at ``rank`` (1-based) from the
    ``smallest_first`` end (earliest date, least amount) or from the other end."""

    scale: Scale
    smallest_first: bool
    rank: int = 1
    cue: str = ""
    by_age: bool = False
    """The cue is an age ("older"): earlier birth dates, or larger ages when the values are
    numbers."""


@dataclass(frozen=True)
class Equality:
    """A yes/no question asking whether the values are all the same (``same``) or not."""

    same: bool
    cue: str = ""


def _rank(word: str | None) -> int:
    if not word:
        return 1
    word = word.lower()
    return _ORDINALS.get(word) or int(re.sub(r"\D", "", word) or 1)


def _in_name(question: str, start: int) -> bool:
    """Whether the cue at ``start`` is written with a capital inside the question (a title's
    word, "The Last Samurai"), not as the question's first word."""
    return question[start].isupper() and question[:start].strip() != ""


_BORN_RANK = re.compile(
    rf"\bborn\s+(?P<rank>{_ORDINAL})\b|\b(?P<rank_before>{_ORDINAL})[\s-]+born\b", re.IGNORECASE
)
"""An ordinal with "born" and no other cue ("who was born second?"): the birth order."""
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[\"'“(]?[A-Z])")
_COLON = re.compile(r":\s+")
_RELATIVE_CLAUSE = re.compile(r",\s*(?:who|whom|whose|which|where|when)\b|\(", re.IGNORECASE)
_NEXT_LIST_ITEM = re.compile(
    r",\s*(?:and\s+|or\s+)?(?=[\"'“]?[A-Z0-9])|\s(?:and|or)\s+(?=[A-Z])|\)"
    r"|,\s*(?=(?:is|are|was|were|has|have|had)\b)"  # "A, who ..., is the oldest?"
)


def _asking_start(text: str) -> int:
    """Where the sentence that asks begins: after the sentences that only describe ("Neil
    Armstrong ... later transferred to Purdue. Which of A, B and C is the oldest?") and after
    a colon that introduces the question ("Looking at A, B and C: are they from the same
    country?")."""
    breaks = [m.end() for m in _SENTENCE_BREAK.finditer(text)]
    breaks += [m.end() for m in _COLON.finditer(text)]
    asking_from = 0
    for start in sorted(breaks):
        if "?" in text[start:] or not text.rstrip().endswith("?"):
            asking_from = start
    return asking_from


def _asking_part(text: str) -> str:
    """``text`` with what only describes its entities blanked (same length, so positions
    hold): the sentences before the one that asks (:func:`_asking_start`) and the relative
    clauses about a listed entity ("A, who later became a pilot, B and C"). A clause that runs
    to the end is the question's own ("Of A, B and C, who was born first?")."""
    asking_from = _asking_start(text)
    masked = list(" " * asking_from + text[asking_from:])
    position = asking_from
    while (opening := _RELATIVE_CLAUSE.search(text, position)) is not None:
        closing = _NEXT_LIST_ITEM.search(text, opening.end())
        if closing is None:
            break  # it runs to the end: the clause that asks
        masked[opening.start() : closing.start()] = " " * (closing.start() - opening.start())
        position = closing.end()
    return "".join(masked)


def _ordering_at(match: re.Match[str]) -> Ordering:
    """The ordering a cue (or a birth rank) asks."""
    if match.re is _BORN_RANK:
        rank = _rank(match.group("rank") or match.group("rank_before"))
        return Ordering(scale="time", smallest_first=True, rank=rank, cue="born")
    cue = re.sub(r"\s+", " ", match.group("cue").lower())
    cue_scale: Scale
    if re.fullmatch(_EARLY, cue):
        cue_scale, smallest_first = "time", True
    elif re.fullmatch(_LATE, cue):
        cue_scale, smallest_first = "time", False
    elif re.fullmatch(_MORE, cue):
        cue_scale, smallest_first = "amount", False
    else:
        cue_scale, smallest_first = "amount", True
    if match.group("to") and cue == "last":
        smallest_first = False  # "second to last": the second from the late end
    return Ordering(
        scale=cue_scale,
        smallest_first=smallest_first,
        rank=_rank(match.group("rank")),
        cue=cue,
        by_age=bool(_AGE.match(cue)),
    )


def comparison_asked(question: str, scale: Scale | None = None) -> Ordering | Equality | None:
    """What comparison ``question`` asks of its entities' values (see :mod:`dynakrag.values`),
    or None when it asks none this module computes; with ``scale``, only an ordering on that
    scale (the caller knows its values are dates, or numbers). An ordering's cue is looked
    for where the question asks (:func:`_asking_part`), then anywhere in it."""
    text = str(question or "")
    asking_from = _asking_start(text)
    if _YES_NO_START.match(text) or _YES_NO_START.match(text[asking_from:]):
        for searched in (_asking_part(text), text):
            cues = [
                (m.start(), m.group(), True)
                for m in _SAME.finditer(searched)
                if not _in_name(text, m.start())
            ]
            cues += [
                (m.start(), m.group(), False)
                for m in _DIFFERENT.finditer(searched)
                if not _in_name(text, m.start())
            ]
            if cues:
                _, cue, same = max(cues)
                return Equality(same=same, cue=cue.lower())
        return None
    for searched in (_asking_part(text), text):
        matches = sorted(
            [*_CUE.finditer(searched), *_BORN_RANK.finditer(searched)], key=lambda m: m.start()
        )
        for match in matches:
            if match.re is _CUE:
                start = match.start("rank") if match.group("rank") else match.start("cue")
                if _in_name(text, start):
                    continue
            ordering = _ordering_at(match)
            if scale is None or ordering.scale == scale:
                return ordering
    return None


# --------------------------------------------------------------------------------------------
# Comparing the entities' values


@dataclass(frozen=True)
class EntityValue:
    """One entity's value as its passage writes it (``value`` None: none was found)."""

    entity: str
    value: str | None
    passage: str | None = None


@dataclass(frozen=True)
class ValueRecord:
    """Provenance of one value: the entity, the value as written, its passage, and how it was
    read (``parsed``: "1930-08-05", "12,000 m", a folded name; "" when it could not be)."""

    entity: str
    value: str | None
    passage: str | None
    parsed: str = ""


@dataclass(frozen=True)
class ComparisonAnswer:
    """The computed answer: the ``chosen`` entities (several when their values tie), or yes/no
    for an equality, with every value compared and its passage."""

    answer: str
    chosen: tuple[str, ...]
    asked: Ordering | Equality
    values: tuple[ValueRecord, ...]
    ordered: tuple[str, ...] = ()
    """The entities in the order the question sets (empty for an equality)."""

    @property
    def tied(self) -> bool:
        return len(self.chosen) > 1


@dataclass(frozen=True)
class CannotCompare:
    """Why no answer was computed: the entities without a value, the values that could not be
    read as what the question compares, and a sentence that says so."""

    reason: str
    asked: Ordering | Equality
    missing: tuple[str, ...] = ()
    unparsed: tuple[ValueRecord, ...] = ()
    values: tuple[ValueRecord, ...] = ()

    @property
    def answer(self) -> str:
        return f"Cannot answer: {self.reason}"


def _joined(names: Sequence[str]) -> str:
    names = list(names)
    if len(names) <= 2:
        return " and ".join(names)
    return ", ".join(names[:-1]) + f" and {names[-1]}"


def _folded_name(value: str) -> str:
    words = _WORD.findall(_fold(value))
    while words and words[0] in {"the", "a", "an"}:
        words = words[1:]
    return " ".join(words)


def compare_values(
    question: str,
    values: Sequence[EntityValue],
    asked: Ordering | Equality | None = None,
) -> ComparisonAnswer | CannotCompare | None:
    """The answer ``question`` asks of ``values`` (one per entity compared), computed; a
    :class:`CannotCompare` that names what is missing; None when the question asks no
    comparison (:func:`comparison_asked`) or fewer than two entities are given."""
    asked = asked or comparison_asked(question)
    if asked is None or len(values) < 2:
        return None
    missing = tuple(v.entity for v in values if not (v.value or "").strip())
    if missing:
        return CannotCompare(
            f"no value was found for {_joined(missing)}",
            asked,
            missing=missing,
            values=tuple(ValueRecord(v.entity, v.value, v.passage) for v in values),
        )
    if isinstance(asked, Equality):
        return _equality(asked, values)
    return _ordering(asked, values)


def _equality(asked: Equality, values: Sequence[EntityValue]) -> ComparisonAnswer:
    dates = [parse_date(v.value or "") for v in values]
    numbers = [parse_number(v.value or "") for v in values]
    keys: list[object]
    shown: list[str]
    if all(d is not None and d[1] for d in dates):
        keys, shown = list(dates), [_date_text(d) for d in dates if d is not None]
    elif all(n is not None for n in numbers) and not any(d is not None for d in dates):
        keys = [(n.dimension, n.amount) for n in numbers if n is not None]
        shown = [_number_text(n) for n in numbers if n is not None]
    else:
        shown = [_folded_name(v.value or "") for v in values]
        keys = list(shown)
    all_same = len(set(keys)) == 1
    records = tuple(
        ValueRecord(v.entity, v.value, v.passage, s) for v, s in zip(values, shown, strict=True)
    )
    answer = "yes" if all_same == asked.same else "no"
    return ComparisonAnswer(answer, (), asked, records)


def _ordering(asked: Ordering, values: Sequence[EntityValue]) -> ComparisonAnswer | CannotCompare:
    if asked.rank > len(values):
        return CannotCompare(
            f"the question asks for rank {asked.rank} of {len(values)} entities",
            asked,
            values=tuple(ValueRecord(v.entity, v.value, v.passage) for v in values),
        )
    if asked.scale == "time":
        dates = [parse_date(v.value or "") for v in values]
        if all(d is not None for d in dates):
            keys = [d for d in dates if d is not None]
            records = tuple(
                ValueRecord(v.entity, v.value, v.passage, _date_text(k))
                for v, k in zip(values, keys, strict=True)
            )
            return _pick(
                asked, values, records, [(k, _date_order) for k in keys], asked.smallest_first
            )
        numbers = [parse_number(v.value or "") for v in values]
        if asked.by_age and all(n is not None for n in numbers):
            # Ages, not birth dates: the older has the larger number.
            return _by_amount(asked, values, numbers, not asked.smallest_first)
        return _unparsed(asked, values, [d is None for d in dates], "a date")
    numbers = [parse_number(v.value or "") for v in values]
    if all(n is not None for n in numbers):
        return _by_amount(asked, values, numbers, asked.smallest_first)
    return _unparsed(asked, values, [n is None for n in numbers], "a number")


def _unparsed(
    asked: Ordering, values: Sequence[EntityValue], failed: Sequence[bool], what: str
) -> CannotCompare:
    bad = tuple(
        ValueRecord(v.entity, v.value, v.passage) for v, f in zip(values, failed, strict=True) if f
    )
    described = _joined([f"{r.value!r} ({r.entity})" for r in bad])
    verb = "is" if len(bad) == 1 else "are"
    return CannotCompare(
        f"{described} {verb} not {what} that can be compared",
        asked,
        unparsed=bad,
        values=tuple(ValueRecord(v.entity, v.value, v.passage) for v in values),
    )


def _number_order(a: Quantity, b: Quantity) -> int | None:
    if not a.comparable_with(b):
        return None
    return (a.amount > b.amount) - (a.amount < b.amount)


def _by_amount(
    asked: Ordering,
    values: Sequence[EntityValue],
    numbers: Sequence[Quantity | None],
    smallest_first: bool,
) -> ComparisonAnswer | CannotCompare:
    quantities = [n for n in numbers if n is not None]
    records = tuple(
        ValueRecord(v.entity, v.value, v.passage, _number_text(q))
        for v, q in zip(values, quantities, strict=True)
    )
    dimensions = {q.dimension for q in quantities if q.dimension}
    if len(dimensions) > 1:
        units = _joined(sorted({q.unit or "" for q in quantities if q.dimension}))
        return CannotCompare(
            f"the values are in units that do not convert ({units})", asked, values=records
        )
    return _pick(asked, values, records, [(q, _number_order) for q in quantities], smallest_first)


def _pick(
    asked: Ordering,
    values: Sequence[EntityValue],
    records: tuple[ValueRecord, ...],
    keyed: Sequence[tuple[object, object]],
    smallest_first: bool,
) -> ComparisonAnswer | CannotCompare:
    """The entity at ``asked.rank`` in the order of the keys (``(key, order function)``), the
    entities tied with it beside it; a :class:`CannotCompare` when its place is not decided."""
    order_of = keyed[0][1]
    keys = [key for key, _ in keyed]

    def sort_key(i: int) -> tuple[float, ...]:
        key = keys[i]
        if isinstance(key, Quantity):
            return (key.amount,)
        return tuple(float(part) for part in key)  # type: ignore[union-attr]

    order = sorted(range(len(keys)), key=sort_key, reverse=not smallest_first)
    chosen = order[asked.rank - 1]
    tied = []
    for i in range(len(keys)):
        relation = order_of(keys[i], keys[chosen])  # type: ignore[operator]
        if relation is None:
            pair = _joined([records[i].value or "", records[chosen].value or ""])
            return CannotCompare(
                f"the values of {records[i].entity} and {records[chosen].entity} ({pair}) "
                "cannot be ordered",
                asked,
                unparsed=(records[i], records[chosen]),
                values=records,
            )
        if relation == 0:
            tied.append(i)
    # A tie across the rank's edge leaves the rank shared: every tied entity is chosen.
    names = tuple(values[i].entity for i in tied)
    return ComparisonAnswer(
        _joined(names), names, asked, records, tuple(values[i].entity for i in order)
    )
