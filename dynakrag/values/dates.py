"""Dates written in text: month names of several languages, the dates a text writes
(:func:`date_mentions`, :func:`dates_in`), the one date a value states (:func:`parse_date`),
a date at the precision a question asks (:func:`date_as_asked`), and how two dates order."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from dynakrag.values.text import _WORD, _fold

__all__ = [
    "DateKey",
    "DateMention",
    "date_as_asked",
    "date_mentions",
    "dates_in",
    "is_month_name",
    "parse_date",
]

DateKey = tuple[int, int, int]
"""``(year, month, day)``; 0 for a part the text leaves out (year 0 never orders)."""

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


def is_month_name(word: str) -> bool:
    """Whether ``word`` is a month's name written out ("October", "Oktober"; not "Oct")."""
    folded = _fold(word)
    return len(folded) > 3 and folded in _MONTHS


_ISO_DATE = re.compile(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b")
_NUMERIC_DATE = re.compile(r"\b(\d{1,2})[-/.](\d{1,2})[-/.](\d{4})\b")
_ORDINAL_DAY = re.compile(r"^(\d{1,2})(?:st|nd|rd|th|er|e|º|°)?$")
_YEAR = re.compile(r"(?<![\d.,])(\d{1,4})(?![\d.,]\d)\s*(BCE?|B\.C\.(?:E\.)?|AD|A\.D\.|CE)?(?!\w)")
_DECADE_OR_PART = re.compile(r"^\d+(?:s|st|nd|rd|th)$", re.IGNORECASE)


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
