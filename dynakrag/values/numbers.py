"""Numbers written in text: the one quantity a value states (:func:`parse_number`: digits,
number words, multipliers, currencies, units converted to one unit per dimension), and the
first quantity a text writes (:func:`first_number`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from dynakrag.values.dates import date_mentions, parse_date
from dynakrag.values.text import _WORD, _fold

__all__ = ["Quantity", "first_number", "parse_number"]

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
