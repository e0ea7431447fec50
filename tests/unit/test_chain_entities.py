"""Which entity a hop's sentence is about: namesakes, a passage going on about its subject, an
answer that repeats the question's own name, a plan that lost its first hop, and a reader that
stops at a bridge."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import BaseMessage

from dynakrag.actions.answer_kind import answers_what_is_asked, expected_kind, not_an_option
from dynakrag.actions.chain import (
    plan_hops,
    repeats_a_given_name,
)
from dynakrag.actions.chain_answer import chain_answer
from dynakrag.actions.frontier import nearness
from dynakrag.actions.statements import about, find_statement, kind_fits, namesake, sentences
from dynakrag.choices import compared_dates, offered_options
from dynakrag.decomposition import decompose, refers_ahead
from dynakrag.llm.client import LLMClient
from dynakrag.llm.fake import ScriptedChatModel
from dynakrag.retrieval.passage import Passage
from tests.unit.chain_support import graph_for, hop_responder

KENTON = {
    "id": "p-kenton",
    "title": "Kenton Richardson",
    "text": "Kenton Terry Richardson (born 26 July 1999) is an English footballer.",
}
TERRY = {
    "id": "p-terry",
    "title": "Terry Richardson",
    "text": "Terrence Richardson (born August 14, 1965) is an American photographer.",
}


def test_a_namesakes_passage_says_nothing_about_the_person_asked_about() -> None:
    assert namesake(KENTON, "Terry Richardson") and not about(KENTON, "Terry Richardson")
    assert find_statement("26 July 1999", ["Terry Richardson"], [KENTON]) is None
    found = find_statement("August 14, 1965", ["Terry Richardson"], [KENTON, TERRY])
    assert found is not None and found.passage == "p-terry"
    # A relative's passage naming the person on their own still states facts about them.
    peter = {
        "id": "p-peter",
        "title": "Peter Schmeichel",
        "text": "Peter Schmeichel is a goalkeeper. Peter Schmeichel is the father of "
        "Kasper Schmeichel.",
    }
    assert namesake(peter, "Kasper Schmeichel")
    found = find_statement("Peter Schmeichel", ["Kasper Schmeichel"], [peter])
    assert found is not None and found.sentence.endswith("father of Kasper Schmeichel.")
    # A longer or a qualified title of the same name is the same entity.
    hazlewood = {"id": "h", "title": "Lee Hazlewood", "text": "Barton Lee Hazlewood was a singer."}
    assert not namesake(hazlewood, "Barton Lee Hazlewood") and about(hazlewood, "Lee Hazlewood")
    queen = {"id": "q", "title": "Elizabeth II (queen)", "text": "Elizabeth II was a queen."}
    assert not namesake(queen, "Queen Elizabeth II")
    # One-word names and names with another last word are no namesakes.
    assert not namesake({"id": "r", "title": "Richardson", "text": ""}, "Terry Richardson")
    assert not namesake({"id": "t", "title": "Terry Riley", "text": ""}, "Terry Richardson")


def test_a_namesakes_passage_comes_after_those_naming_the_hops_entity() -> None:
    kenton = Passage(KENTON["id"], KENTON["title"], KENTON["text"])
    terry = Passage(TERRY["id"], TERRY["title"], TERRY["text"])
    other = Passage("p-x", "Photography", "Photography is an art, Terry Richardson said.")
    ranked = sorted([kenton, other, terry], key=lambda p: nearness(p, ["Terry Richardson"]))
    assert [p.id for p in ranked] == ["p-x", "p-terry", "p-kenton"]


def test_a_passage_going_on_about_its_subject_by_a_common_noun_states_it() -> None:
    team = {
        "id": "t",
        "title": "Lewiston Maineiacs",
        "text": "The Lewiston Maineiacs were a hockey team based in Lewiston. The team played "
        "its home games at the Androscoggin Bank Colisee. They won a cup in 2007.",
    }
    found = find_statement("Androscoggin Bank Colisee", ["Lewiston Maineiacs"], [team])
    assert found is not None and found.sentence.startswith("The team played")
    # Another passage's "The team ..." is not about it, nor is "The city of ..." its subject.
    other = {**team, "title": "Portland Pirates", "text": "The Portland Pirates were a team. "
             "The team played at the Androscoggin Bank Colisee once."}  # fmt: skip
    assert find_statement("Androscoggin Bank Colisee", ["Lewiston Maineiacs"], [other]) is None
    city = {**team, "text": "The Lewiston Maineiacs were a team. The city of Auburn is near."}
    assert find_statement("Auburn", ["Lewiston Maineiacs"], [city]) is None


def test_a_passage_titled_with_a_qualifier_or_a_class_noun_is_about_the_name() -> None:
    rugby = {
        "id": "r",
        "title": "David Jones (rugby)",
        "text": 'David "Tarw" Jones was a Welsh footballer. He played rugby league for Wigan.',
    }
    assert about(rugby, "David Jones")
    found = find_statement("rugby league", ["David Jones"], [rugby])
    assert found is not None and found.sentence.startswith("He played")
    river = {
        "id": "v",
        "title": "Tikhaya Sosna River",
        "text": "The river rises in Belgorod Oblast. It flows north and joins the Don.",
    }
    assert about(river, "Tikhaya Sosna") and about({**river, "title": "Bansaan"}, "Bansaan Island")
    found = find_statement("Don", ["Tikhaya Sosna"], [river])
    assert found is not None and found.sentence.startswith("It flows")
    # Another word than a class noun makes another entity: no statement from its passage.
    other = {**river, "title": "Tikhaya Sosna Festival"}
    assert not about(other, "Tikhaya Sosna")
    for university in ("Georgia State University", "University of Georgia"):
        assert not about({**river, "title": university}, "Georgia")
    assert find_statement("Don", ["Tikhaya Sosna"], [other]) is None
    # A passage goes on by a hyphenated last name, too.
    senator = {
        "id": "s",
        "title": "John Lynch-Staunton",
        "text": "John George Lynch-Staunton was a senator. Lynch-Staunton led the Conservative "
        "Party of Canada in 2003.",
    }
    found = find_statement("Conservative Party of Canada", ["John Lynch-Staunton"], [senator])
    assert found is not None and found.sentence.startswith("Lynch-Staunton led")


def test_a_longer_name_holding_the_questions_own_name_repeats_it() -> None:
    hop = "Who was the father of Kasper Schmeichel?"
    assert repeats_a_given_name("Kasper Peter Schmeichel", hop, hop)
    assert not repeats_a_given_name("Peter Schmeichel", hop, hop)
    # Asked for a name, the whole name holding the given one is the answer.
    full = "What is the full name of Lee Hazlewood?"
    assert not repeats_a_given_name("Barton Lee Hazlewood", full, full)
    # A part of the given place, or a place in it, is no repetition either.
    part = "What part of New York is Rochester in?"
    assert not repeats_a_given_name("western New York", part, part)
    played = "Where did the Nets play in New Jersey?"
    assert not repeats_a_given_name("Teaneck, New Jersey", played, played)
    assert repeats_a_given_name("New Jersey", played, played)
    # A one-word name inside the answer is no repetition ("Henry Ford" founded Ford).
    assert not repeats_a_given_name("Henry Ford", "Who founded Ford?", "Who founded Ford?")


def test_a_plan_referring_to_a_hop_it_does_not_have_gives_way() -> None:
    assert refers_ahead(["Who was the secretary during #1's administration?"])
    assert refers_ahead(["Who founded #2?", "Which company does Ada Voss work for?"])
    assert not refers_ahead(["Which company does Ada Voss work for?", "Who founded #1?"])
    question = (
        "Which river flows through the city where the founder of Selkthorn Robotics was born?"
    )
    broken = ["Which river flows through #2?", "Where was #1 born?"]

    def respond(messages: list[BaseMessage]) -> str:
        return json.dumps({"sub_questions": broken})

    parts, _ = decompose(question, LLMClient(ScriptedChatModel(respond=respond)), split_joined=True)
    assert parts != broken and not refers_ahead(parts)


def test_a_reader_stopping_at_the_chains_bridge_does_not_answer() -> None:
    question = "In which city was the founder of Selkthorn Robotics born?"
    plan = ["Who founded Selkthorn Robotics?", "In which city was #1 born?"]
    facts = {"Who founded Selkthorn Robotics?": "Ilsa Marr"}  # the second hop is never stated
    final = graph_for(hop_responder({question: plan}, facts, reads="Ilsa Marr")).invoke(
        {"question": question}
    )
    # The second hop is never stated: failed (the heuristic spends its searches first) or
    # still open (the forest answers after one); either way no answer stands on the bridge.
    assert final["hops"][0]["status"] == "resolved" and final["hops"][1]["status"] != "resolved"
    assert final["abstained"] and final["answer"] == ""
    assert "hop 1" in final["abstain_reason"]


def test_an_initial_or_an_abbreviation_ends_no_sentence() -> None:
    text = "Roger O. Egeberg was a physician in the U.S. Army. He served under Dr. Hale Vorn."
    assert sentences(text) == [
        "Roger O. Egeberg was a physician in the U.S. Army.",
        "He served under Dr. Hale Vorn.",
    ]
    doc = {"id": "r", "title": "Roger O. Egeberg", "text": text}
    found = find_statement("Dr. Hale Vorn", ["Roger O. Egeberg"], [doc])
    assert found is not None and found.sentence == "He served under Dr. Hale Vorn."


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("Who managed the club during the years when Ada Voss played there?", "person"),
        ("When was the man who founded Selkthorn Robotics born?", "date"),
        ("Where did the woman who wrote Miracle Lane die?", "place"),
        ("How many people live in the city where Ilsa Marr was born?", "number"),
        # "what"/"which" and its noun ask first; a later "when" or "where" opens a clause.
        ("What was the name of the fanzine that interviewed him when he was 19?", "text"),
        ("What is the nickname of the city where Darling's Pavilion is located?", "text"),
        ("What is the place of birth of the director of film When In Rome?", "place"),
        # A choice offered after an auxiliary is answered by one of its names, not yes/no.
        ("Is Muskegon County Airport or John Wayne Airport further west?", "text"),
        ("Is Ada Voss an engineer?", "yes/no"),
    ],
)
def test_the_first_question_word_says_what_a_hop_asks_for(question: str, kind: str) -> None:
    assert expected_kind(question)[0] == kind


def test_two_names_compared_with_no_comma_get_a_date_hop_each() -> None:
    assert compared_dates("who is younger Ilsa Marr or Tom Reyl ?") == [
        "When was Ilsa Marr born?",
        "When was Tom Reyl born?",
    ]
    assert compared_dates("Which album came out first, Blue Harbor or Night Train?") == [
        "When was Blue Harbor released?",
        "When was Night Train released?",
    ]
    assert compared_dates("Was Ilsa Marr or Tom Reyl born first?") == [
        "When was Ilsa Marr born?",
        "When was Tom Reyl born?",
    ]


def test_an_ampersand_and_its_word_name_the_same_thing() -> None:
    question = 'Who designed the game "Lanterns and Ladders"?'
    assert repeats_a_given_name("Lanterns &amp; Ladders", question, question)
    assert repeats_a_given_name("Lanterns & Ladders", question, question)


def test_a_count_does_not_answer_a_question_asking_which_thing() -> None:
    question = "The memorial commemorates the fallen of which war, that had 60 million casualties?"
    counted = plan_hops(
        ["Which war does the memorial commemorate?", "How many casualties did #1 have?"]
    )
    assert not answers_what_is_asked(question, counted[-1])
    share = "What percentage of the vote did the founder of Selkthorn Robotics win?"
    assert answers_what_is_asked(share, plan_hops(["How many votes did #1 win?"])[0])


def test_a_passage_goes_on_by_a_common_noun_only_about_its_own_subject() -> None:
    town = {
        "id": "b",
        "title": "Borrow, Ulmshire",
        "text": "Borrow is a town in Ulmshire. The borough had 66,900 people in 2001.",
    }
    assert find_statement("66,900", ["Ulmshire"], [town]) is None
    found = find_statement("66,900", ["Borrow"], [town])
    assert found is not None and found.sentence.startswith("The borough")


def test_a_reader_may_answer_what_a_plan_asked_twice() -> None:
    question = "Ilsa Marr founded a company. Which robotics company was it?"
    plan = ["Which company did Ilsa Marr found?", "Which robotics company is #1?"]
    facts = {
        "Which company did Ilsa Marr found?": "Selkthorn Robotics",
        "Which robotics company is Selkthorn Robotics?": "Selkthorn Robotics",
    }
    final = graph_for(hop_responder({question: plan}, facts, reads="Selkthorn Robotics")).invoke(
        {"question": question}
    )
    assert final["hops"][0]["status"] == "resolved" and final["hops"][1]["status"] != "resolved"
    assert not final["abstained"] and final["answer"] == "Selkthorn Robotics"


@pytest.mark.parametrize(
    ("reads", "answer"),
    [("Prynvale", "Prynvale"), ("Ilsa Marr", "Prynvale"), ("Paris", "Prynvale")],
)
def test_a_reader_may_answer_a_complete_chain_and_fall_back_on_it(reads: str, answer: str) -> None:
    question = "In which city was the founder of Selkthorn Robotics born?"
    plan = ["Who founded Selkthorn Robotics?", "In which city was #1 born?"]
    facts = {
        "Who founded Selkthorn Robotics?": "Ilsa Marr",
        "In which city was Ilsa Marr born?": "Prynvale",
    }
    model = hop_responder({question: plan}, facts, reads=reads)
    by_chain = graph_for(model).invoke({"question": question})
    assert by_chain["answer"] == "Prynvale" and by_chain["llm_calls"] == 3  # plan + 2 hops
    final = graph_for(model, chain_answer="reader").invoke({"question": question})
    assert [hop["status"] for hop in final["hops"]] == ["resolved", "resolved"]
    # The reader's answer when it stands; else (stated nowhere, a bridge) the chain's.
    assert final["answer"] == answer and not final["abstained"]
    assert final["llm_calls"] > by_chain["llm_calls"]


def test_a_chain_ending_in_a_date_answers_at_the_precision_asked() -> None:
    hops = plan_hops(["Who wrote Three Men on a Horse?", "When was #1 born?"])
    hops[0].update(status="resolved", answer="George Abbott", sentence="By George Abbott.")
    born = "George Abbott (born June 25, 1887) was a playwright."
    hops[1].update(status="resolved", answer="1887", sentence=born)
    # The hop's wording lost "which year"; the question's own wording decides.
    asked = "Three Men on a Horse is a play by a playwright born in which year?"
    assert chain_answer(asked, hops) == ("1887", "chain")
    assert chain_answer("When was the playwright of Three Men on a Horse born?", hops) == (
        "June 25, 1887",
        "chain",
    )


def test_a_reader_may_answer_with_a_hop_that_asked_for_what_the_question_asks() -> None:
    # The plan asked the question's own thing first ("which robotics company") and then a
    # hop the question does not ask; the first hop's answer is the answer.
    question = "Ilsa Marr founded which robotics company?"
    plan = ["Which robotics company did Ilsa Marr found?", "When did #1 open a branch?"]
    facts = {"Which robotics company did Ilsa Marr found?": "Selkthorn Robotics"}
    final = graph_for(hop_responder({question: plan}, facts, reads="Selkthorn Robotics")).invoke(
        {"question": question}
    )
    assert final["hops"][0]["status"] == "resolved" and final["hops"][1]["status"] != "resolved"
    assert not final["abstained"] and final["answer"] == "Selkthorn Robotics"


@pytest.mark.parametrize(
    ("question", "kind", "noun"),
    [
        ("An album by which country music star, with the single My Eyes?", "person", "star"),
        ("Which American film director hosted the awards in 2002?", "person", "director"),
        ("Maxeda is owned by which American multinational equity firm?", "organisation", "firm"),
        ("Which company's founder was born in Paris?", "person", "founder"),
        ("What year did the band form?", "date", "year"),
        ("In which country was the founder born?", "place", "country"),
    ],
)
def test_the_noun_asked_for_is_the_head_of_its_phrase(question: str, kind: str, noun: str) -> None:
    assert expected_kind(question) == (kind, noun)


@pytest.mark.parametrize(
    ("question", "options"),
    [
        (
            "Who won more awards,  Joseph L. Mankiewicz or Tony Kaye?",
            ("Joseph L. Mankiewicz", "Tony Kaye"),
        ),
        (
            "Which group has the most members, DC Talk, or Manchester Orchestra?",
            ("DC Talk", "Manchester Orchestra"),
        ),
        ("who is younger Keith Bostic or Jerry Glanville ?", ("Keith Bostic", "Jerry Glanville")),
        ("Between Ilsa Marr and Tom Reyl, who is older?", ("Ilsa Marr", "Tom Reyl")),
        # The options right after the auxiliary, the predicate after them.
        (
            "Is Prynvale Airport or Quarstead Airport further west?",
            ("Prynvale Airport", "Quarstead Airport"),
        ),
        ("Did Ilsa Marr or Tom Reyl found more firms?", ("Ilsa Marr", "Tom Reyl")),
        # A comparative with no comma, a colon, a comma inside closing quotes.
        (
            "Which will be higher Selkthorn Tower or Orbis Square ?",
            ("Selkthorn Tower", "Orbis Square"),
        ),
        ("Which genus has more species Sutera or Rhodotypos ?", ("Sutera", "Rhodotypos")),
        ("Which film came out first: Blue Harbor or Night Train?", ("Blue Harbor", "Night Train")),
        (
            'Which breed includes "Standard" and "Classic," the Vardon Hound or the Selk Hound?',
            ("the Vardon Hound", "the Selk Hound"),
        ),
        (
            "Is the fast bowler who joined the club in June, 2011 a left-hand or right-hand bat?",
            None,
        ),
        ("Were Ilsa Marr and Tom Reyl born in the same city?", None),
        ("What did she eat, apples or pears?", None),  # not written as names
    ],
)
def test_the_two_things_a_question_offers(question: str, options: tuple[str, str] | None) -> None:
    assert offered_options(question) == options


def test_an_answer_to_a_choice_is_one_of_the_two() -> None:
    question = "Who won more awards, Joseph L. Mankiewicz or Tony Kaye?"
    assert not not_an_option("Joseph Leo Mankiewicz", question)  # initials aside
    assert not not_an_option("Tony Kaye", question)
    assert not_an_option("Cyrtandra", question)
    assert not not_an_option("Cyrtandra", "Which genus has the most species?")  # no choice


def test_an_ordering_whose_plan_dropped_its_options_looks_each_one_up() -> None:
    question = "Which company is larger, Selkthorn Robotics or Selkmoor Appliances?"
    dropped = ["Which company is larger?"]

    def respond(messages: list[BaseMessage]) -> str:
        return json.dumps({"sub_questions": dropped})

    model = LLMClient(ScriptedChatModel(respond=respond))
    parts, _ = decompose(question, model, split_joined=True)
    assert parts == ["What is Selkthorn Robotics?", "What is Selkmoor Appliances?"]
    # A count compared looks each one's count up.
    counted = "Which company has more employees, Selkthorn Robotics or Selkmoor Appliances?"
    assert decompose(counted, model, split_joined=True)[0] == [
        "How many employees does Selkthorn Robotics have?",
        "How many employees does Selkmoor Appliances have?",
    ]
    # An ordering in time compares a date of each.
    dated = "Which company was founded first, Selkthorn Robotics or Selkmoor Appliances?"
    assert decompose(dated, model, split_joined=True)[0] == [
        "When was Selkthorn Robotics founded?",
        "When was Selkmoor Appliances founded?",
    ]


@pytest.mark.parametrize(("reads", "answer"), [("Ilsa Marr", "Ilsa Marr"), ("Ada Voss", "")])
def test_a_choice_answered_by_a_third_name_does_not_stand(reads: str, answer: str) -> None:
    question = "Who founded a robotics company, Ilsa Marr or Tom Reyl?"
    plan = ["Who founded a robotics company?"]
    facts = {"Who founded a robotics company?": "Ada Voss"}  # no passage states it
    final = graph_for(hop_responder({question: plan}, facts, reads=reads)).invoke(
        {"question": question}
    )
    assert final["answer"] == answer
    assert final["abstained"] == (answer == "")
    if not answer:
        assert "neither of the two" in final["abstain_reason"]


@pytest.mark.parametrize(
    ("answer", "fits"),
    [
        ("12 May 1990", True),
        ("During the Korean War", True),  # a time written without a date
        ("under Trajan", True),
        ("the middle of the summer", True),
        ("Winter Garden", False),  # a name, though it holds a season
        ("Paris", False),
        ("in Paris", False),
    ],
)
def test_a_date_hop_takes_a_date_or_a_time_phrase(answer: str, fits: bool) -> None:
    assert kind_fits(answer, "date") is fits
