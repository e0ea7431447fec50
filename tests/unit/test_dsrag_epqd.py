"""EPQD (DS-RAG, Section 2.2.2): segmentation, the LLM path, its repair and its fallbacks."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from langchain_core.messages import BaseMessage

from dynakrag import prompts
from dynakrag.decomposition import segment_question
from dynakrag.dsrag.epqd import (
    EPQD,
    baseline_decompose,
    rule_decompose,
    rule_sub_questions,
)
from dynakrag.errors import ModelUnavailableError
from dynakrag.llm.client import LLMClient
from dynakrag.llm.fake import ScriptedChatModel

PAPER_QUESTION = (
    "Who has the earliest birth date for Taylor Swift or Neil Armstrong, who grew up in Wapakoneta?"
)
PAPER_PARTS = [
    "Who has the earliest birth date for Taylor Swift",
    "Neil Armstrong",
    "who grew up in Wapakoneta",
]
PAPER_SUBS = [
    "Who has the earliest birth date for Taylor Swift?",
    "What is the birth date of Neil Armstrong?",
    "Did Neil Armstrong grow up in Wapakoneta?",
]


class Script:
    """Replies in turn; records the messages of every call."""

    def __init__(self, *replies: str | Exception) -> None:
        self.replies = list(replies)
        self.calls: list[list[BaseMessage]] = []

    def __call__(self, messages: list[BaseMessage]) -> str:
        self.calls.append(messages)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


def client(respond: Callable[[list[BaseMessage]], str]) -> LLMClient:
    return LLMClient(ScriptedChatModel(respond=respond), max_retries=0, backoff_s=0)


def subs(*items: str) -> str:
    return json.dumps({"sub_questions": list(items)})


# ------------------------------------------------------------------------- segmentation


def test_segment_paper_example() -> None:
    assert segment_question(PAPER_QUESTION) == PAPER_PARTS


def test_segment_never_inside_straight_or_curly_quotes() -> None:
    question = 'Which sold more, "Salt, Sand and Sea" or “Rivers, Roads and Rain”, in 2020?'
    assert segment_question(question) == [
        "Which sold more",
        '"Salt, Sand and Sea"',
        "“Rivers, Roads and Rain”",
        "in 2020",
    ]


def test_segment_conjunctions_are_whole_words() -> None:
    # "and" inside "Andorra"/"brand", "or" inside "Oregon"/"for" never split.
    assert segment_question("Is the brand from Andorra or Oregon?") == [
        "Is the brand from Andorra",
        "Oregon",
    ]
    assert segment_question("Who wrote A as well as B, but not C?") == [
        "Who wrote A",
        "B",
        "not C",
    ]


def test_segment_without_a_split_gives_the_whole_question() -> None:
    assert segment_question("What is the capital of France?") == ["What is the capital of France?"]
    assert segment_question("  and , or ") == ["and , or"]
    assert segment_question("") == []
    assert segment_question(None) == []  # type: ignore[arg-type]


# ------------------------------------------------------------------------- rule path


def test_rule_sub_questions_paper_example() -> None:
    assert rule_sub_questions(PAPER_PARTS) == [
        "Who has the earliest birth date for Taylor Swift?",
        "Who has the earliest birth date for Neil Armstrong?",
        "Is it true that Neil Armstrong grew up in Wapakoneta?",
    ]


def test_rule_sub_questions_ranking_template() -> None:
    question = (
        "Who's born date is the second earliest, among Ada Voss, who grew up in Velford, "
        "Orvania, and later studied at Kestrel College, Tom Reyl and Will Smith?"
    )
    decomposition = rule_decompose(question)
    assert decomposition.method == "rules"
    assert list(decomposition.sub_questions) == [
        "Who's born date is the second earliest?",
        "Who's born date is the second earliest among Ada Voss?",
        "Is it true that Ada Voss grew up in Velford?",
        "Is it true that Ada Voss grew up in Orvania?",  # "Velford, Orvania": a place
        "Is it true that Ada Voss later studied at Kestrel College?",
        "Who's born date is the second earliest among Tom Reyl?",
        "Who's born date is the second earliest among Will Smith?",
    ]


def test_rule_sub_questions_comparison_template_keeps_tail_words() -> None:
    parts = segment_question(
        "Is nationality of Ada Voss, who has won many awards, Martin Luther King Jr. and Tom "
        "Reyl the same?"
    )
    assert rule_sub_questions(parts) == [
        "Is nationality of Ada Voss?",
        "Is it true that Ada Voss has won many awards?",
        "Is nationality of Martin Luther King Jr.?",
        "Is nationality of Tom Reyl the same?",
    ]


def test_rule_sub_questions_quoted_items_and_pronouns() -> None:
    assert rule_sub_questions(["Which novel sold more", '"Salt Sea"', "“Glass Rivers”"]) == [
        "Which novel sold more?",
        'Which novel sold more, "Salt Sea"?',
        "Which novel sold more, “Glass Rivers”?",
    ]
    assert rule_sub_questions(["Where was Ada Voss born", "his father worked there"]) == [
        "Where was Ada Voss born?",
        "Is it true that Ada Voss's father worked there?",
    ]
    assert rule_sub_questions([]) == []


# ------------------------------------------------------------------------- LLM path


def test_epqd_llm_path_prompt_and_result() -> None:
    script = Script(subs(*PAPER_SUBS))
    result = EPQD(client(script)).decompose(PAPER_QUESTION)
    assert result.method == "llm"
    assert list(result.sub_questions) == PAPER_SUBS
    assert list(result.parts) == PAPER_PARTS
    assert result.usage.llm_calls == 1 and result.note is None
    messages = script.calls[0]
    assert messages[0].content == prompts.EPQD_SYSTEM
    assert "complete the meaning of the sentence using the previous part" in prompts.EPQD_SYSTEM
    assert "must match the number of separated parts" in prompts.EPQD_SYSTEM
    last = str(messages[-1].content)
    assert f"Original question: {PAPER_QUESTION}" in last
    assert "1. Who has the earliest birth date for Taylor Swift\n2. Neil Armstrong\n3. who" in last
    # Few-shot examples: preserve context and remove duplicated entities.
    shots = " ".join(str(m.content) for m in messages[1:-1])
    assert "in its first year" in shots and "Did Ada Voss found Kestrel Labs?" in shots


def test_epqd_count_mismatch_fixed_by_asking_again() -> None:
    script = Script(subs(*PAPER_SUBS[:2]), subs(*PAPER_SUBS))
    result = EPQD(client(script)).decompose(PAPER_QUESTION)
    assert result.method == "repaired"
    assert list(result.sub_questions) == PAPER_SUBS
    assert result.usage.llm_calls == 2
    assert "Write exactly 3 sub-questions" in str(script.calls[1][-1].content)
    assert "2 sub-questions for 3 parts" in (result.note or "")


def test_epqd_count_mismatch_padded_with_the_part_as_a_question() -> None:
    script = Script(subs(PAPER_SUBS[0]), subs(PAPER_SUBS[0], PAPER_SUBS[1]))
    result = EPQD(client(script)).decompose(PAPER_QUESTION)
    assert result.method == "repaired"
    # The re-ask came closer (2 of 3); the third is the rule-based question of part 3.
    assert list(result.sub_questions) == [
        PAPER_SUBS[0],
        PAPER_SUBS[1],
        "Is it true that Neil Armstrong grew up in Wapakoneta?",
    ]
    assert "padded" in (result.note or "")


def test_epqd_count_mismatch_truncated() -> None:
    extra = [*PAPER_SUBS, "Who is Taylor Swift?"]
    script = Script(subs(*extra), "not json at all")
    result = EPQD(client(script)).decompose(PAPER_QUESTION)
    assert result.method == "repaired"
    assert list(result.sub_questions) == PAPER_SUBS
    assert "cut" in (result.note or "")


@pytest.mark.parametrize(
    "reply",
    [
        "Sure! Here are the sub-questions: 1. Who ...",
        json.dumps({"questions": PAPER_SUBS}),
        json.dumps({"sub_questions": "Who?"}),
        json.dumps({"sub_questions": ["", "  "]}),
    ],
)
def test_epqd_bad_json_falls_back_to_rules(reply: str) -> None:
    result = EPQD(client(Script(reply))).decompose(PAPER_QUESTION)
    assert result.method == "fallback"
    assert list(result.sub_questions) == rule_sub_questions(PAPER_PARTS)
    assert result.usage.llm_calls == 1
    assert "rule-based" in (result.note or "")


@pytest.mark.parametrize("error", [RuntimeError("boom"), ModelUnavailableError("gone")])
def test_epqd_llm_error_falls_back_and_never_raises(error: Exception) -> None:
    result = EPQD(client(Script(error))).decompose(PAPER_QUESTION)
    assert result.method == "fallback"
    assert len(result.sub_questions) == len(PAPER_PARTS)


def test_epqd_without_llm_and_empty_question() -> None:
    assert EPQD(None).decompose(PAPER_QUESTION).method == "fallback"
    empty = EPQD(client(Script())).decompose("   ")
    assert empty.sub_questions == () and empty.method == "fallback"


def test_baseline_decompose_free_count() -> None:
    many = ["Who is Taylor Swift?", "Who is Neil Armstrong?", "When was each born?", "Compare."]
    script = Script(subs(*many))
    result = baseline_decompose(client(script), PAPER_QUESTION)
    assert result.method == "llm" and list(result.sub_questions) == many
    assert script.calls[0][0].content == prompts.MULTI_QUERY_DECOMPOSE_SYSTEM
    bad = baseline_decompose(client(Script("no")), PAPER_QUESTION)
    assert bad.method == "fallback" and bad.sub_questions == (PAPER_QUESTION,)
    failed = baseline_decompose(client(Script(RuntimeError("x"))), PAPER_QUESTION)
    assert failed.sub_questions == (PAPER_QUESTION,)


def test_rule_sub_questions_organisations_and_relatives_continue_a_description() -> None:
    # "the X" after "and" is an organisation the description goes on with, not a new person.
    parts = segment_question(
        "Who is older among Ada Voss, who attended Kestrel College and the University of "
        "Velford, Tom Reyl and Will Smith?"
    )
    assert rule_sub_questions(parts) == [
        "Who is older among Ada Voss?",
        "Is it true that Ada Voss attended Kestrel College?",
        "Is it true that Ada Voss attended the University of Velford?",
        "Who is older among Tom Reyl?",
        "Who is older among Will Smith?",
    ]
    # A second parent after "the son of X and" is coordinated with X.
    parts = segment_question(
        "Is nationality of Ada Voss, who was the son of Tom Voss and Mara Lind, Will Smith "
        "and Tom Reyl the same?"
    )
    subs = rule_sub_questions(parts)
    assert "Is it true that Ada Voss was the son of Mara Lind?" in subs
    assert [s for s in subs if s.startswith("Is nationality of")] == [
        "Is nationality of Ada Voss?",
        "Is nationality of Will Smith?",
        "Is nationality of Tom Reyl the same?",
    ]
