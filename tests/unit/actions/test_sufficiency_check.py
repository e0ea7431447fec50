"""sufficiency_check called directly on hand-made states: the question decomposed once, each
part answered from the evidence (together or in sequence), unknown parts as gaps, answers
the evidence does not state rejected, and the fallbacks on unusable replies or a failing
model."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dynakrag import prompts
from dynakrag.actions.sufficiency_check import sufficiency_check
from dynakrag.configuration import Configuration
from dynakrag.state import Document
from tests.joint import joint_configuration
from tests.unit.actions.support import (
    QUESTION,
    SUB_QUESTIONS,
    Recorder,
    by_prompt,
    check_accounting,
    doc,
    failing,
    make_state,
    resources,
)


def _answers(*values: Any) -> str:
    return json.dumps({"answers": list(values)})


def test_sufficiency_check_decomposes_and_records_unknown_parts_as_resolved_gaps() -> None:
    recorder = by_prompt(
        decompose=json.dumps({"sub_questions": SUB_QUESTIONS}),
        sufficiency=_answers("Kestrel Labs", "UNKNOWN", "unknown."),
    )
    res, searcher = resources(recorder)
    state = make_state(evidence=[doc("ada")], queried_gaps=[])
    update = sufficiency_check(state, res, joint_configuration())
    entry = check_accounting(
        state,
        update,
        "sufficiency_check",
        retrieval_calls=0,
        llm_calls=2,
        tokens=recorder.tokens(),
    )
    assert searcher.calls == []
    assert recorder.kinds == [prompts.DECOMPOSE, prompts.SUFFICIENCY]
    assert update["sub_questions"] == [
        {"question": SUB_QUESTIONS[0], "answer": "Kestrel Labs"},
        {"question": "In which city is the headquarters of Kestrel Labs?", "answer": None},
        {"question": "Who founded Kestrel Labs?", "answer": None},
    ]
    assert update["gaps"] == [
        "In which city is the headquarters of Kestrel Labs?",
        "Who founded Kestrel Labs?",
    ]
    assert update["sufficient"] is False
    assert update["evidence_count_at_check"] == 1
    assert entry["gaps"] == update["gaps"] and entry["sufficient"] is False
    assert entry["parsed"] is True
    # The answered sub-question's entity is a bridge entity to expand.
    assert update["bridge_entities"][0] == "Kestrel Labs"


def test_sufficiency_check_does_not_decompose_again_when_sub_questions_exist() -> None:
    recorder = by_prompt(sufficiency=_answers("Kestrel Labs", "UNKNOWN"))
    res, _ = resources(recorder)
    known = [
        {"question": "Which company does Ada Voss work for?", "answer": None},
        {"question": "In which city is the headquarters of #1?", "answer": None},
    ]
    state = make_state(evidence=[doc("ada"), doc("ada-painter")], sub_questions=known)
    update = sufficiency_check(state, res, joint_configuration())
    assert prompts.DECOMPOSE not in recorder.kinds
    assert recorder.kinds == [prompts.SUFFICIENCY]
    prompt = str(recorder.calls[0][-1].content)
    assert "1. Which company does Ada Voss work for?" in prompt
    assert "2. In which city is the headquarters of #1?" in prompt
    check_accounting(state, update, "sufficiency_check", retrieval_calls=0, llm_calls=1)
    assert update["gaps"] == ["In which city is the headquarters of Kestrel Labs?"]
    assert update["evidence_count_at_check"] == 2


def test_sufficiency_check_leaves_unresolved_references_and_queried_gaps_out_of_the_gaps() -> None:
    recorder = by_prompt(
        decompose=json.dumps({"sub_questions": SUB_QUESTIONS}),
        sufficiency=_answers("UNKNOWN", "UNKNOWN", "UNKNOWN"),
    )
    res, _ = resources(recorder)
    state = make_state(evidence=[doc("ada")], queried_gaps=[SUB_QUESTIONS[0].upper()])
    update = sufficiency_check(state, res, joint_configuration())
    # Part 1 was queried already (case does not matter); parts 2 and 3 still say #1.
    assert update["gaps"] == []
    assert [s["question"] for s in update["sub_questions"]] == SUB_QUESTIONS
    assert update["sufficient"] is False


def test_a_sub_question_that_depends_on_an_unknown_answer_stays_unknown() -> None:
    # The model shifts answers across parts: the first part (the company) is not answered, yet it
    # names a city for "the headquarters of #1". With #1 unknown that city is a guess.
    recorder = by_prompt(
        decompose=json.dumps({"sub_questions": SUB_QUESTIONS[:2]}),
        sufficiency=_answers("UNKNOWN", "Velford"),
    )
    res, _ = resources(recorder)
    state = make_state(evidence=[doc("ada"), doc("kestrel")])
    update = sufficiency_check(state, res, joint_configuration())
    assert [sub["answer"] for sub in update["sub_questions"]] == [None, None]
    assert update["sufficient"] is False


def test_sequential_answering_asks_each_sub_question_alone_with_earlier_answers_filled_in() -> None:
    def reply(kind: str, human: str) -> str:
        if kind == prompts.DECOMPOSE:
            return json.dumps({"sub_questions": SUB_QUESTIONS[:2]})
        asked = human.split("Sub-questions:\n", 1)[1]
        return _answers("Velford" if "headquarters of Kestrel Labs" in asked else "Kestrel Labs")

    recorder = Recorder(reply)
    res, _ = resources(recorder)
    cfg = Configuration(sub_question_answering="sequential")
    state = make_state(evidence=[doc("ada"), doc("kestrel")])
    update = sufficiency_check(state, res, cfg)
    assert recorder.kinds == [prompts.DECOMPOSE, prompts.SUFFICIENCY, prompts.SUFFICIENCY]
    requests = [str(call[-1].content) for call in recorder.calls[1:]]
    assert "1. Which company does Ada Voss work for?" in requests[0]
    assert "1. In which city is the headquarters of Kestrel Labs?" in requests[1]
    # Asked alone, a sub-question goes without the main question (it would draw the answer).
    assert all("Main question:" not in request for request in requests)
    assert [sub["answer"] for sub in update["sub_questions"]] == ["Kestrel Labs", "Velford"]
    assert update["sufficient"] is True
    check_accounting(state, update, "sufficiency_check", retrieval_calls=0, llm_calls=3)


def test_sequential_answering_does_not_ask_a_sub_question_whose_reference_is_unknown() -> None:
    recorder = by_prompt(
        decompose=json.dumps({"sub_questions": SUB_QUESTIONS}), sufficiency=_answers("UNKNOWN")
    )
    res, _ = resources(recorder)
    cfg = Configuration(sub_question_answering="sequential")
    update = sufficiency_check(make_state(evidence=[doc("ada")]), res, cfg)
    assert recorder.kinds == [prompts.DECOMPOSE, prompts.SUFFICIENCY]  # parts 2 and 3 say #1
    assert [sub["answer"] for sub in update["sub_questions"]] == [None, None, None]
    assert update["gaps"] == [SUB_QUESTIONS[0]]


def test_sufficiency_check_is_sufficient_when_every_part_is_answered() -> None:
    recorder = by_prompt(
        decompose=json.dumps({"sub_questions": SUB_QUESTIONS[:2]}),
        sufficiency="```json\n" + _answers("Kestrel Labs", "Velford") + "\n```",
    )
    res, _ = resources(recorder)
    state = make_state(evidence=[doc("ada"), doc("kestrel")])
    update = sufficiency_check(state, res, joint_configuration())
    assert update["sufficient"] is True
    assert update["gaps"] == []
    assert [s["answer"] for s in update["sub_questions"]] == ["Kestrel Labs", "Velford"]
    assert update["sub_questions"][1]["question"] == (
        "In which city is the headquarters of Kestrel Labs?"
    )


def test_sufficiency_check_rejects_answers_the_evidence_does_not_state() -> None:
    recorder = by_prompt(
        decompose=json.dumps({"sub_questions": SUB_QUESTIONS[:2]}),
        sufficiency=_answers("Kestrel Labs", "Paris"),
    )
    res, _ = resources(recorder)
    update = sufficiency_check(
        make_state(evidence=[doc("ada"), doc("kestrel")]), res, joint_configuration()
    )
    assert update["sufficient"] is False
    assert update["sub_questions"][1]["answer"] is None
    assert update["gaps"] == ["In which city is the headquarters of Kestrel Labs?"]


@pytest.mark.parametrize(
    "reply",
    ["I think the answer is Velford.", '{"answers": "Velford"}', '{"verdict": "yes"}', "[1, 2]"],
    ids=["prose", "answers-not-a-list", "wrong-key", "json-array"],
)
def test_sufficiency_check_treats_an_unusable_reply_as_all_unknown(reply: str) -> None:
    recorder = by_prompt(
        decompose=json.dumps(
            {
                "sub_questions": [
                    "Which company does Ada Voss work for?",
                    "Who founded Kestrel Labs?",
                ]
            }
        ),
        sufficiency=reply,
    )
    res, _ = resources(recorder)
    state = make_state(evidence=[doc("ada"), doc("kestrel")])
    update = sufficiency_check(state, res, joint_configuration())
    assert [s["answer"] for s in update["sub_questions"]] == [None, None]
    assert update["gaps"] == ["Which company does Ada Voss work for?", "Who founded Kestrel Labs?"]
    assert update["sufficient"] is False
    check_accounting(state, update, "sufficiency_check", retrieval_calls=0, llm_calls=2)


def test_sufficiency_check_falls_back_to_the_question_on_an_unusable_decomposition() -> None:
    recorder = by_prompt(decompose="no idea", sufficiency=_answers("UNKNOWN"))
    res, _ = resources(recorder)
    update = sufficiency_check(make_state(evidence=[doc("ada")]), res, joint_configuration())
    assert update["sub_questions"] == [{"question": QUESTION, "answer": None}]
    assert update["gaps"] == [QUESTION]


def test_sufficiency_check_survives_a_failing_model() -> None:
    recorder = failing()
    res, _ = resources(recorder)
    state = make_state(evidence=[doc("ada")])
    update = sufficiency_check(state, res, joint_configuration())
    assert update["sub_questions"] == [{"question": QUESTION, "answer": None}]
    assert update["sufficient"] is False
    check_accounting(state, update, "sufficiency_check", retrieval_calls=0, llm_calls=2)


def test_sufficiency_check_counts_a_null_answer_as_unknown() -> None:
    recorder = by_prompt(sufficiency=_answers(None))
    res, _ = resources(recorder)
    evidence = [Document(id="x", title="Ada Voss", text="None of Ada Voss's robots can swim.")]
    state = make_state(
        evidence=evidence,
        sub_questions=[{"question": "Which robots of Ada Voss can swim?", "answer": None}],
    )
    update = sufficiency_check(state, res, joint_configuration())
    assert update["sub_questions"][0]["answer"] is None
    assert update["sufficient"] is False
