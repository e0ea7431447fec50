"""Values parsed from text and compared as a question asks (:mod:`dynakrag.values`)."""

from __future__ import annotations

import pytest

from dynakrag.values import (
    CannotCompare,
    ComparisonAnswer,
    EntityValue,
    Equality,
    Ordering,
    compare_values,
    comparison_asked,
    date_as_asked,
    dates_in,
    parse_date,
    parse_number,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("August 5, 1930", (1930, 8, 5)),
        ("5 August 1930", (1930, 8, 5)),
        ("Aug. 5th, 1930", (1930, 8, 5)),
        ("born on October 07, 1952.", (1952, 10, 7)),
        ("1930-08-05", (1930, 8, 5)),
        ("13/04/1930", (1930, 4, 13)),
        ("04/13/1930", (1930, 4, 13)),
        ("03/04/1930", (1930, 0, 0)),  # day and month cannot be told apart: the year only
        ("August 1930", (1930, 8, 0)),
        ("5. März 1930", (1930, 3, 5)),
        ("1930", (1930, 0, 0)),
        ("c. 1930", (1930, 0, 0)),
        ("500 BC", (-500, 0, 0)),
        ("August 5, 1930 – July 25, 2012", (1930, 8, 5)),  # the first date written
    ],
)
def test_dates_in_their_written_forms(text: str, expected: tuple[int, int, int]) -> None:
    assert parse_date(text) == expected


@pytest.mark.parametrize("text", ["long ago", "1950s", "the 19th century", "from 1930 to 1940"])
def test_what_is_no_one_date_is_not_parsed(text: str) -> None:
    assert parse_date(text) is None


def test_dates_in_reads_every_date_and_both_readings_of_a_numeric_one() -> None:
    assert dates_in("Born 5 August 1930; died 2012-08-25.") == {(1930, 8, 5), (2012, 8, 25)}
    assert dates_in("the 5th of August 1930, then 1931") == {(1930, 8, 5)}
    assert parse_date("born on August 5, 1930 and died in 2012") == (1930, 8, 5)
    assert dates_in("03/04/1930") == {(1930, 4, 3), (1930, 3, 4)}


@pytest.mark.parametrize(
    ("text", "amount", "dimension"),
    [
        ("1,234", 1234.0, None),
        ("about 300 people", 300.0, None),
        ("3.5 million", 3.5e6, None),
        ("$4.2bn", 4.2e9, "currency:USD"),
        ("$12m", 12e6, "currency:USD"),
        ("12 km", 12000.0, "length"),
        ("12 m", 12.0, "length"),
        ("5 miles", 8046.72, "length"),
        ("twelve", 12.0, None),
        ("45%", 45.0, "percent"),
    ],
)
def test_numbers_with_commas_multipliers_and_units(
    text: str, amount: float, dimension: str | None
) -> None:
    quantity = parse_number(text)
    assert quantity is not None
    assert quantity.amount == pytest.approx(amount)
    assert quantity.dimension == dimension


@pytest.mark.parametrize("text", ["August 5, 1930", "1,200 (2010)", "many", ""])
def test_what_is_no_one_number_is_not_parsed(text: str) -> None:
    assert parse_number(text) is None


@pytest.mark.parametrize(
    ("question", "scale", "smallest_first", "rank"),
    [
        ("Who was born earlier, Ilsa Marr or Tom Reyl?", "time", True, 1),
        ("Who is younger, Ilsa Marr or Tom Reyl?", "time", False, 1),
        ("Which film came out first, Alpha or Beta?", "time", True, 1),
        ("Which of A, B and C was released most recently?", "time", False, 1),
        ("Who's born date is the second earliest, among A, B and C?", "time", True, 2),
        ("Who is the 3rd oldest of A, B, C and D?", "time", True, 3),
        ("Which is the second to last film, A, B or C?", "time", False, 2),
        ("Which city has the larger population, A or B?", "amount", False, 1),
        ("Which lake is the least deep?", "amount", True, 1),
        ("Which mountain is lower, A or B?", "amount", True, 1),
        ("Who scored the fewest goals, A or B?", "amount", True, 1),
    ],
)
def test_orderings_in_their_wordings(
    question: str, scale: str, smallest_first: bool, rank: int
) -> None:
    asked = comparison_asked(question)
    assert isinstance(asked, Ordering)
    assert (asked.scale, asked.smallest_first, asked.rank) == (scale, smallest_first, rank)


def test_the_first_cue_orders_and_capitalised_titles_do_not() -> None:
    # The description's "first person" comes after the question's own order.
    question = (
        "Who's born date is the third earliest, among Neil Armstrong, who was the first person "
        "to walk on the moon, Taylor Swift and Vladimir Putin?"
    )
    asked = comparison_asked(question)
    assert isinstance(asked, Ordering) and asked.rank == 3 and asked.smallest_first
    asked = comparison_asked("Which was released later, The First Wives Club or Heat?")
    assert isinstance(asked, Ordering) and not asked.smallest_first


@pytest.mark.parametrize(
    ("question", "smallest_first", "rank"),
    [
        # A sentence that only describes an entity comes before the one that asks.
        (
            "Ada Voss studied in Prynvale and later moved to Rynford after the war. Which of "
            "Ilsa Marr, Ada Voss and Bren Tolley is the oldest?",
            True,
            1,
        ),
        # A relative clause about a listed entity does not order; the clause that closes the
        # question does.
        (
            "Of Ilsa Marr, Ada Voss, who trained as a pilot and later became a test pilot before "
            "joining the agency, and Bren Tolley, who was born first?",
            True,
            1,
        ),
        (
            "Which of Ada Voss (who later moved abroad), Ilsa Marr and Bren Tolley is the "
            "youngest?",
            False,
            1,
        ),
        (
            "Which of Ilsa Marr, Bren Tolley and Ada Voss, who later became a test pilot, is the "
            "second oldest?",
            True,
            2,
        ),
        # A birth rank without another cue.
        ("Of Ilsa Marr, Ada Voss and Bren Tolley, who was born second?", True, 2),
        ("Among Ilsa Marr, Ada Voss and Bren Tolley, who is the third-born?", True, 3),
    ],
)
def test_the_cue_is_read_where_the_question_asks(
    question: str, smallest_first: bool, rank: int
) -> None:
    asked = comparison_asked(question)
    assert isinstance(asked, Ordering) and asked.scale == "time"
    assert (asked.smallest_first, asked.rank) == (smallest_first, rank)


def test_a_scale_picks_the_cue_of_that_scale() -> None:
    question = "Which of the most famous bridges, A or B, opened first?"
    assert comparison_asked(question).scale == "amount"  # type: ignore[union-attr]
    asked = comparison_asked(question, "time")
    assert isinstance(asked, Ordering) and asked.smallest_first and asked.cue == "first"


@pytest.mark.parametrize(
    ("question", "same"),
    [
        ("Is nationality of A, B and C the same?", True),
        ("Is nationality of A, B and C different?", False),
        ("Are Alpha and Beta of the same nationality?", True),
        ("Do Alpha and Beta share a director?", True),
        # The last cue closes the question; a description's "same" does not.
        ("Is nationality of A, who went to the same school as D, B and C different?", False),
    ],
)
def test_equalities(question: str, same: bool) -> None:
    assert comparison_asked(question) == Equality(same=same, cue=comparison_asked(question).cue)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("question", "same"),
    [
        # The yes/no question follows a sentence that describes, or a colon.
        (
            "Looking at Ada Voss, Ilsa Marr and Tom Reyl: are they citizens of different "
            "countries?",
            False,
        ),
        (
            "Ada Voss trained as a pilot and later joined the agency, the first woman there. Are "
            "Ada Voss, Ilsa Marr and Tom Reyl from the same country?",
            True,
        ),
    ],
)
def test_an_equality_is_read_where_the_question_asks(question: str, same: bool) -> None:
    asked = comparison_asked(question)
    assert isinstance(asked, Equality) and asked.same is same


@pytest.mark.parametrize(
    "question", ["What is the capital of France?", "Is Alpha older than Beta?", "", "?"]
)
def test_no_comparison_this_module_computes(question: str) -> None:
    assert comparison_asked(question) is None
    assert compare_values(question, [EntityValue("A", "1"), EntityValue("B", "2")]) is None


BIRTHS = [
    EntityValue("Neil Armstrong", "August 5, 1930", "p-armstrong"),
    EntityValue("Taylor Swift", "December 13, 1989", "p-swift"),
    EntityValue("Vladimir Putin", "October 07, 1952", "p-putin"),
]


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("Who's born date is the first earliest, among them?", "Neil Armstrong"),
        ("Who's born date is the second earliest, among them?", "Vladimir Putin"),
        ("Who's born date is the third earliest, among them?", "Taylor Swift"),
        ("Who is the youngest?", "Taylor Swift"),
        ("Who is the second oldest?", "Vladimir Putin"),
        ("Who was born last?", "Taylor Swift"),
    ],
)
def test_a_ranking_answers_with_the_entity_at_the_rank(question: str, answer: str) -> None:
    result = compare_values(question, BIRTHS)
    assert isinstance(result, ComparisonAnswer)
    assert result.answer == answer and result.chosen == (answer,)


def test_the_answer_lists_each_value_with_its_passage() -> None:
    result = compare_values("Who is the oldest?", BIRTHS)
    assert isinstance(result, ComparisonAnswer)
    assert [(r.entity, r.value, r.passage, r.parsed) for r in result.values] == [
        ("Neil Armstrong", "August 5, 1930", "p-armstrong", "1930-08-05"),
        ("Taylor Swift", "December 13, 1989", "p-swift", "1989-12-13"),
        ("Vladimir Putin", "October 07, 1952", "p-putin", "1952-10-07"),
    ]
    assert result.ordered == ("Neil Armstrong", "Vladimir Putin", "Taylor Swift")


def test_tied_values_are_chosen_together() -> None:
    values = [
        EntityValue("A", "1 May 1950"),
        EntityValue("B", "May 1, 1950"),
        EntityValue("C", "1960"),
    ]
    result = compare_values("Who was born first?", values)
    assert isinstance(result, ComparisonAnswer)
    assert result.tied and result.chosen == ("A", "B") and result.answer == "A and B"


def test_partial_dates_that_cannot_be_ordered_say_so() -> None:
    values = [EntityValue("A", "1955"), EntityValue("B", "March 3, 1955")]
    result = compare_values("Who was born earlier, A or B?", values)
    assert isinstance(result, CannotCompare)
    assert "cannot be ordered" in result.answer and result.answer.startswith("Cannot answer")
    # A year apart, the year decides.
    result = compare_values("Who was born earlier, A or B?", [values[0], EntityValue("B", "1948")])
    assert isinstance(result, ComparisonAnswer) and result.chosen == ("B",)


def test_a_value_that_does_not_parse_is_named() -> None:
    values = [EntityValue("A", "1955", "p1"), EntityValue("B", "long ago", "p2")]
    result = compare_values("Who was born earlier, A or B?", values)
    assert isinstance(result, CannotCompare)
    assert [(r.entity, r.value, r.passage) for r in result.unparsed] == [("B", "long ago", "p2")]
    assert "'long ago' (B) is not a date" in result.reason


def test_an_entity_without_a_value_is_named() -> None:
    values = [EntityValue("A", "1955", "p1"), EntityValue("Nobody Known", None)]
    result = compare_values("Is the birth year of A and Nobody Known the same?", values)
    assert isinstance(result, CannotCompare)
    assert result.missing == ("Nobody Known",)
    assert result.answer == "Cannot answer: no value was found for Nobody Known"


def test_a_rank_beyond_the_entities_is_no_guess() -> None:
    result = compare_values("Who is the fourth oldest?", BIRTHS)
    assert isinstance(result, CannotCompare) and "rank 4 of 3" in result.reason


def test_amounts_convert_units_and_refuse_units_that_do_not() -> None:
    values = [EntityValue("A", "2 miles"), EntityValue("B", "4 km")]  # 3.2 km against 4 km
    result = compare_values("Which trail is longer, A or B?", values)
    assert isinstance(result, ComparisonAnswer) and result.chosen == ("B",)
    values = [EntityValue("A", "3 miles"), EntityValue("B", "4 kg")]
    result = compare_values("Which is larger, A or B?", values)
    assert isinstance(result, CannotCompare) and "units" in result.reason


def test_ages_as_numbers_order_older_by_the_larger() -> None:
    values = [EntityValue("A", "45 years"), EntityValue("B", "52 years")]
    result = compare_values("Who is older, A or B?", values)
    assert isinstance(result, ComparisonAnswer) and result.chosen == ("B",)


@pytest.mark.parametrize(
    ("question", "nationalities", "answer"),
    [
        ("Is nationality of A, B and C the same?", ["American", "american", "the American"], "yes"),
        ("Is nationality of A, B and C the same?", ["American", "American", "Russian"], "no"),
        ("Is nationality of A, B and C different?", ["American", "American", "Russian"], "yes"),
        ("Is nationality of A, B and C different?", ["Polish", "Polish", "Polish"], "no"),
    ],
)
def test_an_equality_answers_yes_or_no(
    question: str, nationalities: list[str], answer: str
) -> None:
    values = [
        EntityValue(name, value, f"p{i}")
        for i, (name, value) in enumerate(zip("ABC", nationalities, strict=True))
    ]
    result = compare_values(question, values)
    assert isinstance(result, ComparisonAnswer)
    assert result.answer == answer and result.chosen == ()
    assert [r.passage for r in result.values] == ["p0", "p1", "p2"]


def test_an_equality_of_dates_compares_the_dates() -> None:
    values = [EntityValue("A", "1930-08-05"), EntityValue("B", "August 5, 1930")]
    result = compare_values("Were A and B born on the same day?", values)
    assert isinstance(result, ComparisonAnswer) and result.answer == "yes"


@pytest.mark.parametrize(
    ("answer", "sentence", "noun", "expected"),
    [
        ("1949", "Paul Manafort (born April 1, 1949) is a lawyer.", "", "April 1, 1949"),
        ("1936", "Hunter Davies (born 7 January 1936) is an author.", "date", "7 January 1936"),
        ("June 25, 1887", "George Abbott (June 25, 1887 - 1995)", "year", "1887"),
        ("1887", "He was born in 1887.", "year", "1887"),
        # Two dates in that year: which one was meant is not known.
        ("1936", "born 7 January 1936, died 3 March 1936", "", "1936"),
        ("long ago", "born 7 January 1936", "", "long ago"),
        ("1936", "born 7 January 1936", "decade", "1936"),
    ],
)
def test_a_date_answer_takes_the_precision_the_question_asks_for(
    answer: str, sentence: str, noun: str, expected: str
) -> None:
    assert date_as_asked(answer, sentence, noun) == expected
