"""DS-RAG's ranking and comparison answers from the passages' values, and the selection that
stops once every compared entity's value is covered (:mod:`dynakrag.dsrag.value_answer`).

No model: the questions are read by the rule path (:func:`rule_analysis`), the passages are
written here in the DS-RAG corpus's style.
"""

from __future__ import annotations

import pytest

from dynakrag.dsrag.dics import DicsChoice, DicsResult
from dynakrag.dsrag.rule_extraction import rule_analysis
from dynakrag.dsrag.value_answer import (
    answer_from_values,
    compared_targets,
    covering_selection,
    fact_query,
    read_value,
    unstated_targets,
)

RANKING = (
    "Who's born date is the {rank} earliest, among Neil Armstrong, who was born to a "
    "middle-class family in Wapakoneta, Ohio, Taylor Swift and Vladimir Putin?"
)
COMPARISON = (
    "Is nationality of Neil Armstrong, who attended Purdue University on a Navy scholarship, "
    "Taylor Swift and Vladimir Putin {cue}?"
)
PASSAGES = [
    ("p-armstrong", "Neil Armstrong was born on August 5, 1930. He grew up in Ohio."),
    (
        "p-swift",
        "Taylor Swift's nationality is American. Taylor Swift was born on December 13, 1989.",
    ),
    ("p-putin", "Vladimir Putin was born on October 07, 1952. Putin studied law."),
    ("p-armstrong-nation", "Neil Armstrong's nationality is American."),
    ("p-putin-nation", "Vladimir Putin's nationality is Russian."),
]


# --- reading one value ------------------------------------------------------------------------


def test_a_date_is_read_from_the_sentence_naming_the_entity_and_the_fact() -> None:
    read = read_value("Taylor Swift", "born date", PASSAGES, "date")
    assert read is not None
    assert (read.value, read.passage) == ("December 13, 1989", "p-swift")
    assert read.sentence == "Taylor Swift was born on December 13, 1989."
    # "birth date" asks the same fact a passage writes as "was born on".
    assert read_value("Neil Armstrong", "birth date", PASSAGES, "date").value == "August 5, 1930"  # type: ignore[union-attr]


def test_a_name_like_value_is_read_after_the_fact_word() -> None:
    read = read_value("Vladimir Putin", "nationality", PASSAGES, "text")
    assert read is not None and (read.value, read.passage) == ("Russian", "p-putin-nation")
    # "citizenship" asks the fact a passage writes as "nationality is".
    read = read_value("Vladimir Putin", "citizenship", PASSAGES, "text")
    assert read is not None and read.value == "Russian"


def test_a_sentence_about_another_fact_or_person_is_not_read() -> None:
    assert read_value("Neil Armstrong", "nationality", PASSAGES[:1], "text") is None
    assert read_value("Rihanna", "born date", PASSAGES, "date") is None
    # The father shares the surname: "Koenig Armstrong" is someone else.
    father = [("p-father", "Stephen Koenig Armstrong was born on May 3, 1907.")]
    assert read_value("Neil Armstrong", "born date", father, "date") is None


def test_a_surname_is_read_when_no_full_name_states_the_fact() -> None:
    passages = [
        ("p1", "Chopra Jonas was born on July 18, 1982."),
        ("p2", "Grasse Tyson was born on October 05, 1958."),
    ]
    read = read_value("Priyanka Chopra Jonas", "born date", passages, "date")
    assert read is not None and read.value == "July 18, 1982"
    read = read_value("Neil deGrasse Tyson", "born date", passages, "date")
    assert read is not None and read.value == "October 05, 1958"
    # A full-name sentence wins over an earlier surname-only one.
    passages = [
        ("p1", "Jonas was born on May 1, 1900."),
        ("p2", "Priyanka Chopra Jonas was born on July 18, 1982."),
    ]
    assert read_value("Priyanka Chopra Jonas", "born date", passages, "date").passage == "p2"  # type: ignore[union-attr]


def test_a_number_is_read_with_its_unit() -> None:
    passages = [("p1", "The Danube has a length of 2,850 km, and it flows east.")]
    read = read_value("Danube", "length", passages, "number")
    assert read is not None and read.value.startswith("2,850 km")


# --- answers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rank", "answer"),
    [("first", "Neil Armstrong"), ("second", "Vladimir Putin"), ("third", "Taylor Swift")],
)
def test_a_ranking_is_answered_with_the_entity_at_the_rank(rank: str, answer: str) -> None:
    question = RANKING.format(rank=rank)
    result = answer_from_values(question, rule_analysis(question), PASSAGES)
    assert result is not None and result.answered and result.text == answer


def test_the_provenance_lists_each_value_with_its_passage_and_sentence() -> None:
    question = RANKING.format(rank="first")
    result = answer_from_values(question, rule_analysis(question), PASSAGES)
    assert result is not None
    record = result.record()
    assert record["status"] == "answered" and record["chosen"] == ["Neil Armstrong"]
    assert [(v["entity"], v["value"], v["parsed"], v["passage"]) for v in record["values"]] == [
        ("Neil Armstrong", "August 5, 1930", "1930-08-05", "p-armstrong"),
        ("Taylor Swift", "December 13, 1989", "1989-12-13", "p-swift"),
        ("Vladimir Putin", "October 07, 1952", "1952-10-07", "p-putin"),
    ]
    assert record["values"][2]["sentence"] == "Vladimir Putin was born on October 07, 1952."
    assert record["ordered"] == ["Neil Armstrong", "Vladimir Putin", "Taylor Swift"]
    assert result.passages == ["p-armstrong", "p-swift", "p-putin"]


def test_the_passage_chosen_for_an_entity_is_read_first() -> None:
    question = RANKING.format(rank="first")
    passages = [*PASSAGES, ("p-armstrong-2", "Neil Armstrong was born on August 5, 1930, in Ohio.")]
    chosen = {"neil armstrong": "p-armstrong-2"}
    result = answer_from_values(question, rule_analysis(question), passages, chosen)
    assert result is not None and result.record()["values"][0]["passage"] == "p-armstrong-2"


@pytest.mark.parametrize(("cue", "answer"), [("the same", "no"), ("different", "yes")])
def test_a_comparison_is_answered_yes_or_no(cue: str, answer: str) -> None:
    question = COMPARISON.format(cue=cue)
    result = answer_from_values(question, rule_analysis(question), PASSAGES)
    assert result is not None and result.text == answer
    assert [v["value"] for v in result.record()["values"]] == ["American", "American", "Russian"]


def test_an_entity_missing_from_the_passages_is_named_not_guessed() -> None:
    question = RANKING.format(rank="first")
    result = answer_from_values(question, rule_analysis(question), PASSAGES[:2])
    assert result is not None and not result.answered
    assert (
        result.text == "Cannot answer: no selected passage states the born date of Vladimir Putin"
    )
    record = result.record()
    assert record["status"] == "cannot_answer" and record["missing"] == ["Vladimir Putin"]


def test_no_rankable_values_say_so() -> None:
    question = RANKING.format(rank="second")
    passages = [("p1", "Neil Armstrong walked on the moon."), ("p2", "Taylor Swift sings.")]
    result = answer_from_values(question, rule_analysis(question), passages)
    assert result is not None and result.text == (
        "Cannot answer: no selected passage states the born date of Neil Armstrong, "
        "Taylor Swift and Vladimir Putin"
    )


@pytest.mark.parametrize(
    "question", ["What is the capital of France?", "Who founded Selkthorn Robotics?", ""]
)
def test_a_question_that_compares_nothing_is_left_to_the_reader(question: str) -> None:
    assert answer_from_values(question, rule_analysis(question), PASSAGES) is None


def test_a_quotation_the_rules_took_for_a_name_is_not_compared() -> None:
    question = (
        "Who's born date is the first earliest, among Neil Armstrong, who said \"That's one "
        'small step for [a] man, one giant leap for mankind,", Taylor Swift and Vladimir Putin?'
    )
    targets = compared_targets(rule_analysis(question))
    assert all("[a]" not in t.entity for t in targets)


# --- the selection's stop --------------------------------------------------------------------


def _dics(chunks: list[tuple[str, str]]) -> DicsResult:
    choices = tuple(DicsChoice(i, chunk_id, i, 0.5) for i, (chunk_id, _) in enumerate(chunks))
    return DicsResult(
        tuple(chunks), choices, "criteria", f"one chunk for each of {len(chunks)} criteria"
    )


BOTH = (
    "p-both",
    "Neil Armstrong was born on August 5, 1930. Taylor Swift was born on December 13, 1989.",
)


def test_the_selection_keeps_the_fewest_chunks_that_state_every_value() -> None:
    question = RANKING.format(rank="first")
    analysis = rule_analysis(question)
    chosen = _dics([BOTH, PASSAGES[1], PASSAGES[2], ("p-ohio", "Wapakoneta is in Ohio.")])
    kept = covering_selection(analysis, chosen)
    assert kept.chunk_ids == ("p-both", "p-putin")
    assert [c.chunk_id for c in kept.choices] == ["p-both", "p-putin"]
    assert "dropped p-swift, p-ohio" in kept.reason


def test_an_unstated_value_is_taken_from_the_retrieved_chunks() -> None:
    question = RANKING.format(rank="first")
    analysis = rule_analysis(question)
    chosen = _dics([PASSAGES[0], PASSAGES[1], ("p-putin-law", "Vladimir Putin studied law.")])
    candidates = [*chosen.chunks, PASSAGES[2]]
    kept = covering_selection(analysis, chosen, candidates)
    assert kept.chunk_ids == ("p-armstrong", "p-swift", "p-putin")
    added = next(c for c in kept.choices if c.chunk_id == "p-putin")
    assert added.criterion is not None  # the criterion anchored at Vladimir Putin
    assert "added p-putin for Vladimir Putin" in kept.reason


def test_a_value_no_chunk_states_keeps_its_criterion_s_chunk_and_asks_a_search() -> None:
    question = RANKING.format(rank="first")
    analysis = rule_analysis(question)
    chosen = _dics([PASSAGES[0], PASSAGES[1], ("p-putin-law", "Vladimir Putin studied law.")])
    assert covering_selection(analysis, chosen, chosen.chunks) is chosen
    # The others' values are still covered with the fewest chunks.
    chosen = _dics([BOTH, PASSAGES[1], ("p-putin-law", "Vladimir Putin studied law.")])
    kept = covering_selection(analysis, chosen, chosen.chunks)
    assert kept.chunk_ids == ("p-both", "p-putin-law")
    missing = unstated_targets(analysis, chosen.chunks)
    assert [fact_query(t) for t in missing] == ["Vladimir Putin born date"]


def test_other_questions_keep_the_dics_choice() -> None:
    analysis = rule_analysis("Who founded Selkthorn Robotics and where is it based?")
    chosen = _dics([PASSAGES[0], PASSAGES[1]])
    assert covering_selection(analysis, chosen) is chosen
