"""Values written in text (dates, numbers, names), parsed, and compared as a question asks.

One place for what both answer paths compute instead of asking a reader: the graph's
comparison of its hops' answers (:mod:`dynakrag.actions.chain_answer`) and DS-RAG's ranking
and comparison answers from the selected passages (:mod:`dynakrag.dsrag.value_answer`).

Parsing (:mod:`dynakrag.values.dates`, :mod:`dynakrag.values.numbers`)
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

Questions (:func:`comparison_asked`, :mod:`dynakrag.values.comparison`)
    * An :class:`Ordering` for a wh-question that orders its entities: on a time scale
      ("earlier", "the oldest", "born last", "more recent"), or on an amount ("more", "the
      largest", "fewer", "lower"), with a rank ("the second earliest", "second to last").
    * An :class:`Equality` for a yes/no question asking whether values are the same ("Is the
      nationality of A, B and C the same?", "... different?", "Do A and B share ...?").
    Cue words inside a capitalised name ("The Last Samurai") do not count, and the first cue
    of an ordering wins (a question names its order before describing its entities); the
    last cue of an equality wins (it closes the question).

Comparing (:func:`compare_values`, :mod:`dynakrag.values.comparison`)
    The values of each entity (:class:`EntityValue`) give a :class:`ComparisonAnswer` (the
    chosen entity or entities, tied ones together, and each value with its passage) or a
    :class:`CannotCompare` that says what is missing: an entity without a value, a value that
    is not a date / number, dates too partial to order ("1955" against "March 1955"), values
    in units that do not convert, or a rank beyond the entities. Nothing is guessed.
"""

from __future__ import annotations

from dynakrag.values.comparison import (
    EARLIER,
    LATER,
    CannotCompare,
    ComparisonAnswer,
    EntityValue,
    Equality,
    Ordering,
    Scale,
    ValueRecord,
    compare_values,
    comparison_asked,
)
from dynakrag.values.dates import (
    DateKey,
    DateMention,
    date_as_asked,
    date_mentions,
    dates_in,
    is_month_name,
    parse_date,
)
from dynakrag.values.numbers import Quantity, first_number, parse_number
from dynakrag.values.text import folded_words

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
    "is_month_name",
    "parse_date",
    "parse_number",
]
