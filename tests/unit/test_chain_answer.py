"""The chain's own answer: comparisons computed from the hops' parsed values (written as the
question offers them), yes/no hops and the yes/no questions computed from them."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import BaseMessage

from dynakrag import prompts
from dynakrag.actions.chain import plan_hops, resolve_hops
from dynakrag.actions.chain_answer import chain_answer, comparison_answer, yes_no_choice
from dynakrag.choices import compared_dates, compared_quantities, predicate_choice
from dynakrag.decomposition import decompose
from dynakrag.llm.client import LLMClient
from dynakrag.llm.fake import ScriptedChatModel
from tests.unit.chain_support import PASSAGES, graph_for, hop_responder


def test_a_comparison_is_computed_from_the_parsed_values() -> None:
    hops = plan_hops(["When was Ilsa Marr born?", "When was Tom Reyl born?"])
    for hop, year in zip(hops, ["1955", "March 3, 1948"], strict=True):
        hop.update(status="resolved", answer=year)
    assert comparison_answer("Who was born earlier, Ilsa Marr or Tom Reyl?", hops)[0] == "Tom Reyl"
    assert comparison_answer("Who is younger, Ilsa Marr or Tom Reyl?", hops)[0] == "Ilsa Marr"
    assert chain_answer("Who is younger, Ilsa Marr or Tom Reyl?", hops) == (
        "Ilsa Marr",
        "comparison",
    )
    hops[1]["answer"] = "long ago"
    assert comparison_answer("Who was born earlier, Ilsa Marr or Tom Reyl?", hops) is None


@pytest.mark.parametrize(
    "title",
    ["No Path Through Fire", "Boundaries Of The Heart", "Yohan: The Child Wanderer", "Bright Leaf"],
)
def test_a_computed_choice_is_the_option_as_the_question_words_it(title: str) -> None:
    # A name read off the hop loses the title's function words ("Boundaries", "Heart").
    question = f"Which film came out earlier, {title} or Leaf?"
    hops = plan_hops([f"When was {title} released?", "When was Leaf released?"])
    for hop, year in zip(hops, ["1950", "1968"], strict=True):
        hop.update(status="resolved", answer=year)
    assert chain_answer(question, hops) == (title, "comparison")


@pytest.mark.parametrize(
    ("first", "second"),
    [("May 1, 1950", "1 May 1950"), ("1955", "March 3, 1955")],  # a tie; an undecided order
)
def test_a_comparison_the_values_do_not_decide_is_left_to_the_reader(
    first: str, second: str
) -> None:
    hops = plan_hops(["When was Ilsa Marr born?", "When was Tom Reyl born?"])
    for hop, value in zip(hops, [first, second], strict=True):
        hop.update(status="resolved", answer=value)
    assert comparison_answer("Who was born earlier, Ilsa Marr or Tom Reyl?", hops) is None
    assert chain_answer("Who was born earlier, Ilsa Marr or Tom Reyl?", hops) is None


def test_two_names_compared_by_age_get_a_date_hop_each() -> None:
    question = "Between Ada Voss and Tom Reyl, who is the older one?"
    model = hop_responder(
        {question: [question]},  # the model kept the comparison as one question
        {"When was Ada Voss born?": "1970", "When was Tom Reyl born?": "1948"},
    )
    final = graph_for(model).invoke({"question": question})
    assert [hop["question"] for hop in final["hops"]] == [
        "When was Ada Voss born?",
        "When was Tom Reyl born?",
    ]
    assert final["answer"] == "Tom Reyl"
    assert compared_dates("Which firm was founded first, Selkthorn Robotics or Selkmoor?") == [
        "When was Selkthorn Robotics founded?",
        "When was Selkmoor founded?",
    ]
    # No date comparison of two names: the plan stays the model's.
    assert compared_dates("Is Ada Voss older than Tom Reyl?") is None
    assert compared_dates("Who is older, the founder of Orbis or Tom Reyl?") is None
    assert compared_dates("Which city is larger, Prynvale or Ambelwyn?") is None
    # The date of a thing the options have (their director's) is not the options' own.
    assert (
        compared_dates("Which film has the director who died later, Blue Harbor or Dust?") is None
    )
    assert compared_dates("Which film has the producer who is older, Blue Harbor or Dust?") is None
    assert compared_dates("Which film whose director was born first, Blue Harbor or Dust?") is None
    # A title written with a colon is one option.
    assert compared_dates("Which film came out first, V-Day: Until Dawn or Dust Roads?") == [
        "When was V-Day: Until Dawn released?",
        "When was Dust Roads released?",
    ]


def test_two_names_compared_by_a_measure_or_a_count_get_one_hop_each() -> None:
    question = "Which mountain is taller, Mount Arvel or Brenn Peak?"
    assert compared_quantities(question) == ["How tall is Mount Arvel?", "How tall is Brenn Peak?"]
    assert compared_quantities("Which band has more members, Lumen or The Vanes?") == [
        "How many members does Lumen have?",
        "How many members does The Vanes have?",
    ]
    assert compared_quantities("Who won more academy awards, Ada Voss or Tom Reyl?") == [
        "How many academy awards does Ada Voss have?",
        "How many academy awards does Tom Reyl have?",
    ]
    # An adjective after "more", a comparative of several measures, or no two names: none.
    assert compared_quantities("Who is more famous, Ada Voss or Tom Reyl?") is None
    assert compared_quantities("Which city is larger, Prynvale or Ambelwyn?") is None
    assert compared_quantities("Is Mount Arvel taller than Brenn Peak?") is None
    assert compared_quantities("Which probe ran for longer, Vela 1 or Vela 2?") is None
    # The model kept it as one question: the plan looks each one up.
    parts, _ = decompose(
        question, LLMClient(hop_responder({question: [question]}, {})), split_joined=True
    )
    assert parts == compared_quantities(question)
    # One hop each, the answer computed from the two measures.
    hops = plan_hops(compared_quantities(question) or [])
    for hop, height in zip(hops, ["2,950 m", "3,120 metres"], strict=True):
        hop.update(status="resolved", answer=height)
    assert chain_answer(question, hops) == ("Brenn Peak", "comparison")


def test_a_choice_by_what_is_said_of_one_asks_it_of_each_and_takes_the_one_said_yes() -> None:
    question = "Which singer is American, Ada Voss or Tom Reyl?"
    assert predicate_choice(question) == ["Is Ada Voss American?", "Is Tom Reyl American?"]
    assert predicate_choice("Which is a genus of ferns, Osmunda or Pinus?") == [
        "Is Osmunda a genus of ferns?",
        "Is Pinus a genus of ferns?",
    ]
    assert predicate_choice("Who was born in Paris, Ada Voss or Tom Reyl?") == [
        "Was Ada Voss born in Paris?",
        "Was Tom Reyl born in Paris?",
    ]
    # No auxiliary before the options, or no options: none.
    assert predicate_choice("Which film follows poetry, Dust or Blue Harbor?") is None
    assert predicate_choice("Which singer is American?") is None
    # The plan asked neither on its own: a yes/no of each.
    model = LLMClient(hop_responder({question: ["Who is American?"]}, {}))
    assert decompose(question, model, split_joined=True)[0] == predicate_choice(question)
    hops = plan_hops(predicate_choice(question) or [])
    for hop, said in zip(hops, ["no", "yes"], strict=True):
        hop.update(status="resolved", answer=said)
    assert chain_answer(question, hops) == ("Tom Reyl", "choice")
    # Both yes, or one unresolved: the reader chooses.
    hops[0]["answer"] = "yes"
    assert yes_no_choice(question, hops) is None
    hops[0].update(status="open", answer=None)
    assert yes_no_choice(question, hops) is None


def test_a_yes_no_hop_stands_only_on_a_passage_about_its_entity() -> None:
    hops = plan_hops(["Was Ilsa Marr an entrepreneur?"])
    hops[0]["queries"] = ["Was Ilsa Marr an entrepreneur?"]  # searched: every naming passage shown
    crewmate = {"id": "p-tom", "title": "Tom Reyl", "text": "Tom Reyl is an entrepreneur. "
                "Tom Reyl once worked with Ilsa Marr."}  # fmt: skip
    own = {"id": "p-ilsa", "title": "Ilsa Marr", "text": PASSAGES[3].text}
    model = LLMClient(ScriptedChatModel(respond=lambda _: json.dumps({"answer": "yes"})))
    # A passage that names her in passing does not describe her: the hop is not answered.
    passing, _, _ = resolve_hops(hops, "Was Ilsa Marr an entrepreneur?", [crewmate], model)
    assert passing[0]["status"] != "resolved"
    resolved, _, _ = resolve_hops(hops, "Was Ilsa Marr an entrepreneur?", [crewmate, own], model)
    assert resolved[0]["status"] == "resolved" and resolved[0]["passage"] == "p-ilsa"


def test_a_yes_no_hop_is_asked_to_say_no_when_its_passage_rules_it_out() -> None:
    asked: list[str] = []

    def respond(messages: list[BaseMessage]) -> str:
        asked.append(str(messages[-1].content))
        return json.dumps({"answer": "no"})

    hops = plan_hops(["Was Ilsa Marr a pilot?"])
    own = {"id": "p-ilsa", "title": "Ilsa Marr", "text": PASSAGES[3].text}
    model = LLMClient(ScriptedChatModel(respond=respond))
    resolved, _, _ = resolve_hops(hops, "Was Ilsa Marr a pilot?", [own], model)
    assert resolved[0]["answer"] == "no" and prompts.HOP_YES_NO_TASK in asked[0]
    other = plan_hops(["In which city was Ilsa Marr born?"])
    resolve_hops(other, "In which city was Ilsa Marr born?", [own], model)
    assert prompts.HOP_TASK in asked[1] and prompts.HOP_YES_NO_TASK not in asked[1]


@pytest.mark.parametrize(
    ("question", "parts", "answers", "expected"),
    [
        ("Are Ilsa Marr and Tom Reyl both entrepreneurs?",
         ["Is Ilsa Marr an entrepreneur?", "Is Tom Reyl an entrepreneur?"], ["yes", "no"], "no"),
        ("Are Ilsa Marr and Tom Reyl both entrepreneurs?",
         ["Is Ilsa Marr an entrepreneur?", "Is Tom Reyl an entrepreneur?"], ["Yes", "yes"], "yes"),
        ("Is Prynvale a city? And is Vardonia a country?",
         ["Is Prynvale a city?", "Is Vardonia a country?"], ["yes", "yes"], "yes"),
        # A choice, or a question asking which one, is not a conjunction: a choice names the
        # one said yes of.
        ("Is Ilsa Marr or Tom Reyl an entrepreneur?",
         ["Is Ilsa Marr an entrepreneur?", "Is Tom Reyl an entrepreneur?"], ["yes", "no"],
         "Ilsa Marr"),
        ("Which of Ilsa Marr and Tom Reyl is an entrepreneur?",
         ["Is Ilsa Marr an entrepreneur?", "Is Tom Reyl an entrepreneur?"], ["yes", "no"], None),
        # A hop the model did not answer yes or no leaves it to the reader.
        ("Are Ilsa Marr and Tom Reyl both entrepreneurs?",
         ["Is Ilsa Marr an entrepreneur?", "Is Tom Reyl an entrepreneur?"], ["yes", "Ambelwyn"],
         None),
    ],
)  # fmt: skip
def test_a_yes_no_question_holding_when_each_part_does_is_computed_from_its_hops(
    question: str, parts: list[str], answers: list[str], expected: str | None
) -> None:
    hops = plan_hops(parts)
    for hop, answer in zip(hops, answers, strict=True):
        hop.update(status="resolved", answer=answer)
    given = chain_answer(question, hops)
    assert (given[0] if given else None) == expected
    assert given is None or given[1] == ("choice" if " or " in question else "conjunction")
