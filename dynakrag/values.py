"""Values written in text (dates, numbers, names), parsed, and compared as a question asks.

One place for what both answer paths compute instead of asking a reader: the graph's
comparison of its hops' answers (:mod:`dynakrag.actions.chain_answer`) and DS-RAG's ranking
and comparison answers from the selected passages (:mod:`dynakrag.dsrag.value_answer`).

Parsing
    * :func:`parse_date`: the one date a value writes: "August 5, 1930", "5 August 1930",
      "Aug. 5th, 1930", "1930-08-05", "August 1930", "1930", "500 BC"; month names of several
      languages. ``d/m/yyyy`` and ``m/d/yyyy`` cannot be told apart without a locale: when both
      readings are dates the value keeps only its year. Unknown parts are 0.
    * :func:`parse_number`: the one quantity a value writes: "1,234", "3.5 million", "$4.2bn",
      "12 km", "twelve"; lengths and masses are converted to one unit per dimension.
    * :func:`dates_in`: every date a text writes (the grounding checks' reading).
    Why not ``dateutil.parser``: it fills the parts a value leaves out from a default (so
    "1955" and "January 1955" parse alike, and partial dates cannot be told apart), reads
    "500 BC" as the year 500, silently picks one reading of "03/04/1930" and does not read
    "5 août 1930".

Questions (:func:`comparison_asked`)
    * An :class:`Ordering` for a wh-question that orders its entities: on a time scale
      ("earlier", "the oldest", "born last", "more recent"), or on an amount ("more", "the
      largest", "fewer", "lower"), with a rank ("the second earliest", "second to last").
    * An :class:`Equality` for a yes/no question asking whether values are the same ("Is the
      nationality of A, B and C the same?", "... different?", "Do A and B share ...?").
    Cue words inside a capitalised name ("The Last Samurai") do not count, and the first cue
    of an ordering wins (a question names its order before describing its entities); the
    last cue of an equality wins (it closes the question).

Comparing (:func:`compare_values`)
    The values of each entity (:class:`EntityValue`) give a :class:`ComparisonAnswer` (the
    chosen entity or entities, tied ones together, and each value with its passage) or a
    :class:`CannotCompare` that says what is missing: an entity without a value, a value that
    is not a date / number, dates too partial to order ("1955" against "March 1955"), values
    in units that do not convert, or a rank beyond the entities. Nothing is guessed.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "EARLIER",
    "LATER",
    "CannotCompare",
    "ComparisonAnswer",
    "DateKey",
    "DateMention",
    "EntityValue",
    "Equality",
    "Ordering",
    "Quantity",
    "Scale",
    "ValueRecord",
    "compare_values",
    "comparison_asked",
    "date_as_asked",
    "date_mentions",
    "dates_in",
    "first_number",
    "folded_words",
    "parse_date",
    "parse_number",
]

DateKey = tuple[int, int, int]
"""``(year, month, day)``; 0 for a part the text leaves out (year 0 never orders)."""

# --------------------------------------------------------------------------------------------
# Dates

_MONTHS: dict[str, int] = {}
for _number, _names in enumerate(
    (
        "january jan januar janvier enero gennaio janeiro januari",
        "february feb februar fevrier febrero febbraio fevereiro februari",
        "march mar marz mars marzo marco maart",
        "april apr avril abril aprile",
        "may mai mayo maggio maio mei",
        "june jun juni juin junio giugno junho",
        "july jul juli juillet julio luglio julho",
        "august aug aout agosto augustus",
        "september sep sept septembre septiembre settembre setembro",
        "october oct oktober octobre octubre ottobre outubro",
        "november nov novembre noviembre novembro",
        "december dec dezember decembre diciembre dicembre dezembro",
    ),
    start=1,
):
    for _name in _names.split():
        _MONTHS[_name] = _number

_WORD = re.compile(r"[^\W_]+")
_ISO_DATE = re.compile(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b")
_NUMERIC_DATE = re.compile(r"\b(\d{1,2})[-/.](\d{1,2})[-/.](\d{4})\b")
_ORDINAL_DAY = re.compile(r"^(\d{1,2})(?:st|nd|rd|th|er|e|º|°)?$")
_YEAR = re.compile(r"(?<![\d.,])(\d{1,4})(?![\d.,]\d)\s*(BCE?|B\.C\.(?:E\.)?|AD|A\.D\.|CE)?(?!\w)")
_DECADE_OR_PART = re.compile(r"^\d+(?:s|st|nd|rd|th)$", re.IGNORECASE)


def _fold(text: str) -> str:
    """Lower-case ``text`` with accents removed ("März" -> "marz")."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def folded_words(text: str) -> list[str]:
    """The words of ``text``, lower-cased with accents removed ("Zoë's" -> ["zoe", "s"])."""
    return _WORD.findall(_fold(text))


def _valid(year: int, month: int, day: int) -> bool:
    return 1 <= month <= 12 and 0 <= day <= 31


@dataclass(frozen=True)
class DateMention:
    """One date written in a text: ``text[start:end]`` states ``key``."""

    start: int
    end: int
    key: DateKey


def _near_index(words: Sequence[str], indices: Sequence[int], test: re.Pattern[str]) -> int | None:
    return next((j for j in indices if 0 <= j < len(words) and test.match(words[j])), None)


_FOUR_DIGITS = re.compile(r"^\d{4}$")


def date_mentions(text: str) -> list[DateMention]:
    """Every date ``text`` writes, in reading order. A month name takes the day beside it
    ("5 August", "August 5th", "the 5th of August") and the 4-digit year nearest after it
    (else before it); an ambiguous ``d/m/yyyy`` gives both readings."""
    found: list[DateMention] = []
    spans = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    words = [_fold(text[a:b]) for a, b in spans]  # folded one by one: offsets stay the text's
    for i, word in enumerate(words):
        month = _MONTHS.get(word)
        if month is None:
            continue
        year_at = _near_index(words, [i + 1, i + 2, i + 3, i - 1, i - 2], _FOUR_DIGITS)
        beside = [i + 1, i - 1] + ([i - 2] if i >= 2 and words[i - 1] == "of" else [])
        day_at = next(
            (
                j
                for j in beside
                if 0 <= j < len(words)
                and (m := _ORDINAL_DAY.match(words[j]))
                and 1 <= int(m.group(1)) <= 31
            ),
            None,
        )
        day_match = _ORDINAL_DAY.match(words[day_at]) if day_at is not None else None
        parts = [i] + [j for j in (year_at, day_at) if j is not None]
        found.append(
            DateMention(
                spans[min(parts)][0],
                spans[max(parts)][1],
                (
                    int(words[year_at]) if year_at is not None else 0,
                    month,
                    int(day_match.group(1)) if day_match else 0,
                ),
            )
        )
    for match in _ISO_DATE.finditer(text):
        y, m, d = (int(g) for g in match.groups())
        if _valid(y, m, d):
            found.append(DateMention(match.start(), match.end(), (y, m, d)))
    for match in _NUMERIC_DATE.finditer(text):
        a, b, y = (int(g) for g in match.groups())
        for month, day in ((b, a), (a, b)):
            if _valid(y, month, day):
                found.append(DateMention(match.start(), match.end(), (y, month, day)))
    return sorted(found, key=lambda mention: (mention.start, mention.end))


def dates_in(text: str) -> set[DateKey]:
    """``(year, month, day)`` of every date ``text`` writes (0 for a part it leaves out):
    month names of several languages in either order with the day, ISO dates, and
    ``d/m/yyyy`` read both ways (ambiguous without a locale)."""
    return {mention.key for mention in date_mentions(text)}


def parse_date(text: str) -> DateKey | None:
    """The date the value ``text`` states: its first date with a year (an ambiguous numeric
    date keeps only its year), else its one year ("1930", "c. 1930", "500 BC"); None when it
    writes no year, or several years and no date."""
    mentions = [mention for mention in date_mentions(text) if mention.key[0]]
    if mentions:
        first = mentions[0].start
        readings = {mention.key for mention in mentions if mention.start == first}
        if len(readings) == 1:
            return readings.pop()
        years = {key[0] for key in readings}
        return (years.pop(), 0, 0) if len(years) == 1 else None
    years = set()
    for match in _YEAR.finditer(text):
        if _DECADE_OR_PART.match(text[match.start() : match.end() + 2].split()[0]):
            continue  # "1950s", "19th": not one year
        era = (match.group(2) or "").upper().replace(".", "")
        digits = match.group(1)
        if len(digits) < 3 and not era:
            continue  # a day or a count, not a year
        years.add(-int(digits) if era.startswith("B") else int(digits))
    return (years.pop(), 0, 0) if len(years) == 1 else None


def date_as_asked(answer: str, stated_in: str, asked_noun: str) -> str:
    """A date answer at the precision the question asks for: the year alone when it asks for a
    year ("born in which year": "June 25, 1887" -> "1887"), else, for a bare year, the one
    fuller date the stating sentence writes for that year ("When was he born?": "1949" ->
    "April 1, 1949"). Anything else, a date it cannot parse included, is ``answer`` unchanged."""
    key = parse_date(answer)
    if key is None or key[0] == 0:
        return answer
    if asked_noun == "year":
        return answer if not key[1] else (f"{-key[0]} BC" if key[0] < 0 else str(key[0]))
    if asked_noun not in ("", "date", "day") or key[1]:
        return answer
    fuller = [m for m in date_mentions(stated_in) if m.key[0] == key[0] and m.key[1]]
    if len({m.key for m in fuller}) != 1:
        return answer  # no fuller date, or several for that year: which one is not known
    return stated_in[fuller[0].start : fuller[0].end]


def _date_order(a: DateKey, b: DateKey) -> int | None:
    """-1 / 0 / 1 when ``a`` is before / the same as / after ``b``; None when the parts they
    both state do not decide it ("1955" against "March 1955")."""
    for x, y in zip(a, b, strict=True):
        if x == 0 and y == 0:
            return 0
        if x == 0 or y == 0:
            return None
        if x != y:
            return -1 if x < y else 1
    return 0


def _date_text(key: DateKey) -> str:
    year, month, day = key
    shown = f"{-year} BC" if year < 0 else f"{year:04d}"
    if month:
        shown += f"-{month:02d}"
        if day:
            shown += f"-{day:02d}"
    return shown


# --------------------------------------------------------------------------------------------
# Numbers

_NUMBER_WORDS = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_MULTIPLIERS = {
    "hundred": 1e2,
    "thousand": 1e3,
    "k": 1e3,
    "million": 1e6,
    "m": 1e6,
    "mn": 1e6,
    "billion": 1e9,
    "bn": 1e9,
    "b": 1e9,
    "trillion": 1e12,
    "tn": 1e12,
}
_UNITS: dict[str, tuple[str, float]] = {
    # Units that convert: (dimension, size in the dimension's base unit).
    "mm": ("length", 1e-3),
    "cm": ("length", 1e-2),
    "m": ("length", 1.0),
    "metre": ("length", 1.0),
    "meter": ("length", 1.0),
    "km": ("length", 1e3),
    "kilometre": ("length", 1e3),
    "kilometer": ("length", 1e3),
    "inch": ("length", 0.0254),
    "ft": ("length", 0.3048),
    "foot": ("length", 0.3048),
    "feet": ("length", 0.3048),
    "yd": ("length", 0.9144),
    "yard": ("length", 0.9144),
    "mi": ("length", 1609.344),
    "mile": ("length", 1609.344),
    "g": ("mass", 1e-3),
    "gram": ("mass", 1e-3),
    "kg": ("mass", 1.0),
    "kilogram": ("mass", 1.0),
    "lb": ("mass", 0.45359237),
    "pound": ("mass", 0.45359237),
    "tonne": ("mass", 1e3),
    "ton": ("mass", 1e3),
    "km2": ("area", 1e6),
    "sq km": ("area", 1e6),
    "square kilometre": ("area", 1e6),
    "square kilometer": ("area", 1e6),
    "sq mi": ("area", 2589988.110336),
    "square mile": ("area", 2589988.110336),
    "ha": ("area", 1e4),
    "hectare": ("area", 1e4),
    "acre": ("area", 4046.8564224),
}
_CURRENCIES = {"$": "USD", "us$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
_CURRENCY_WORDS = {
    "dollar": "USD",
    "usd": "USD",
    "euro": "EUR",
    "eur": "EUR",
    "pound sterling": "GBP",
    "gbp": "GBP",
}
_NUMBER = re.compile(
    r"(?P<currency>US\$|[$€£¥])?\s*(?P<digits>(?<![\w.,])[-−]?\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.,])[-−]?\d+(?:\.\d+)?)"
    r"(?P<suffix>(?:\s*(?:%|(?:hundred|thousand|million|billion|trillion|bn|mn|tn|k|m|b)\b)))?"
    r"(?P<unit>\s*(?:square\s+\w+|sq\s+\w+|[^\W\d_]+2?))?",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Quantity:
    """A parsed number: ``amount`` in the base unit of ``dimension`` (metres, kilograms,
    square metres) when its unit converts, else as written; ``unit`` as written or None."""

    amount: float
    unit: str | None = None
    dimension: str | None = None

    def comparable_with(self, other: Quantity) -> bool:
        """Whether the two amounts are on one scale (same dimension or currency, or a unit
        only one of them names)."""
        if self.dimension and other.dimension:
            return self.dimension == other.dimension
        return True


def _unit_of(word: str) -> tuple[str | None, str | None, float]:
    """(unit as read, dimension, factor) of the word after a number."""
    text = _fold(word.strip())
    if not text:
        return None, None, 1.0
    for candidate in (text, text.removesuffix("s"), text.removesuffix("es")):
        if candidate in _UNITS:
            dimension, factor = _UNITS[candidate]
            return candidate, dimension, factor
        if candidate in _CURRENCY_WORDS:
            return _CURRENCY_WORDS[candidate], "currency:" + _CURRENCY_WORDS[candidate], 1.0
    return text, None, 1.0


def parse_number(text: str) -> Quantity | None:
    """The one quantity the value ``text`` states ("1,234", "3.5 million", "$4.2bn", "12 km",
    "twelve"); None when it states none or several different ones. A date is no number."""
    if parse_date(text) is not None and date_mentions(text):
        return None  # "August 5, 1930" writes two numbers, neither a quantity
    found: list[Quantity] = []
    for match in _NUMBER.finditer(text):
        amount = float(match.group("digits").replace(",", "").replace("−", "-"))
        suffix = (match.group("suffix") or "").strip().lower()
        unit_word = match.group("unit") or ""
        currency = match.group("currency")
        unit, dimension, factor = _unit_of(unit_word)
        if suffix == "m" and unit_word.strip() == "" and currency is None:
            unit, dimension, factor = "m", "length", 1.0  # "12 m" is metres, "$12m" millions
            suffix = ""
        if suffix == "%":
            unit, dimension = "%", "percent"
        elif suffix:
            amount *= _MULTIPLIERS[suffix]
        if currency:
            code = _CURRENCIES[currency.lower()]
            unit, dimension = code, "currency:" + code
        found.append(Quantity(amount * factor, unit, dimension))
    if not found:
        words = [_NUMBER_WORDS[w] for w in _WORD.findall(_fold(text)) if w in _NUMBER_WORDS]
        return Quantity(float(words[0])) if len(words) == 1 else None
    if len({q.amount for q in found}) != 1:
        return None
    return found[0]


def first_number(text: str) -> str | None:
    """The first quantity ``text`` writes, as written with its multiplier and unit ("2,850
    km" of "a length of 2,850 km, and ..."), outside its dates; None when it writes none."""
    dated = [(m.start, m.end) for m in date_mentions(text)]
    for match in _NUMBER.finditer(text):
        if any(a <= match.start("digits") < b for a, b in dated):
            continue
        written = match.group().strip()
        if parse_number(written) is not None:
            return written
    return None


def _number_text(quantity: Quantity) -> str:
    amount = quantity.amount
    shown = f"{int(amount):,}" if amount == int(amount) else f"{amount:,.4g}"
    base = {"length": "m", "mass": "kg", "area": "m2"}.get(quantity.dimension or "")
    unit = base or quantity.unit
    return f"{shown} {unit}" if unit else shown


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


def comparison_asked(question: str, scale: Scale | None = None) -> Ordering | Equality | None:
    """What comparison ``question`` asks of its entities' values (see the module doc), or None
    when it asks none this module computes; with ``scale``, only an ordering on that scale
    (the caller knows its values are dates, or numbers)."""
    text = str(question or "")
    if _YES_NO_START.match(text):
        cues = [
            (m.start(), m.group(), True)
            for m in _SAME.finditer(text)
            if not _in_name(text, m.start())
        ]
        cues += [
            (m.start(), m.group(), False)
            for m in _DIFFERENT.finditer(text)
            if not _in_name(text, m.start())
        ]
        if not cues:
            return None
        _, cue, same = max(cues)
        return Equality(same=same, cue=cue.lower())
    for match in _CUE.finditer(text):
        start = match.start("rank") if match.group("rank") else match.start("cue")
        if _in_name(text, start):
            continue
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
        if scale is not None and scale != cue_scale:
            continue
        rank = _rank(match.group("rank"))
        if match.group("to") and cue == "last":
            smallest_first = False  # "second to last": the second from the late end
        return Ordering(
            scale=cue_scale,
            smallest_first=smallest_first,
            rank=rank,
            cue=cue,
            by_age=bool(_AGE.match(cue)),
        )
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
