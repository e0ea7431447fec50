"""The rule-based splitters and the LLM decomposition in dynakrag.decomposition."""

from __future__ import annotations

import json

import pytest

from dynakrag.decomposition import (
    DOUBLE_QUOTES,
    decompose,
    joins_facts,
    quoted_mask,
    resolve_references,
    segment_question,
    split_facts,
    split_query,
)
from dynakrag.errors import UserInputError
from dynakrag.llm.client import LLMClient
from dynakrag.llm.fake import ScriptedChatModel


def test_split_query_on_conjunctions_and_commas_outside_quotes() -> None:
    assert split_query("A and B, 'C and D'") == ["A", "B", "'C and D'"]
    assert split_query('Is "War and Peace" longer than Ulysses?') == [
        'Is "War and Peace" longer than Ulysses'
    ]
    assert split_query("Who was born earlier, Ada Voss or Tom Reyl?") == [
        "Who was born earlier",
        "Ada Voss",
        "Tom Reyl",
    ]
    # Apostrophes never open a quotation; "Anderson"/"Portland" contain no conjunction.
    assert split_query("Marie Curie's lab and Pierre's 'brother and sister'") == [
        "Marie Curie's lab",
        "Pierre's 'brother and sister'",
    ]
    assert split_query("Anderson of Portland") == ["Anderson of Portland"]
    assert split_query("x; y; x") == ["x", "y"]  # repeats dropped
    assert split_query("a, b, c, d, e, f", max_parts=3) == ["a", "b", "c"]
    with pytest.raises(UserInputError):
        split_query("a", max_parts=0)


def test_segment_question_protects_double_quotes_only() -> None:
    # EPQD keeps single quotes unprotected: its splitter is the same, with other quote marks.
    assert segment_question('Did "War and Peace" or "Ulysses", come first?') == [
        'Did "War and Peace"',
        '"Ulysses"',
        "come first",
    ]
    assert segment_question("Is 'Salt and Pepper' a band?") == ["Is 'Salt", "Pepper' a band"]
    assert split_query("Is 'Salt and Pepper' a band?") == ["Is 'Salt and Pepper' a band"]


def test_quoted_mask_ignores_apostrophes_and_unclosed_quotes() -> None:
    text = "Curie's \"lab"
    assert not any(quoted_mask(text))
    assert quoted_mask('a "b" c') == [False, False, True, True, True, False, False]
    assert not any(quoted_mask("a 'b' c", DOUBLE_QUOTES))


def test_decompose_falls_back_to_the_question_and_caps_the_count() -> None:
    parts = [f"part {i}" for i in range(8)]
    replies = iter([json.dumps({"sub_questions": parts}), "not json"])
    llm = LLMClient(ScriptedChatModel(respond=lambda _messages: next(replies)))
    sub_questions, _ = decompose("Q?", llm)
    assert sub_questions == parts[:5]
    assert decompose("Q?", llm)[0] == ["Q?"]


def test_resolve_references_fills_known_answers_only() -> None:
    assert resolve_references("Where was #1 born, after #2?", ["Ada", None]) == (
        "Where was Ada born, after #2?"
    )


@pytest.mark.parametrize(
    ("sub_question", "parts"),
    [
        (
            "What products does Bordan Tkachuk's company provide?",
            ["What is Bordan Tkachuk's company?", "What products does #1 provide?"],
        ),
        (
            "What is the capital of Ada Voss's country?",
            ["What is Ada Voss's country?", "What is the capital of #1?"],
        ),
        ("Who is Ada Voss's father?", ["Who is Ada Voss's father?"]),  # asked itself
        ("Which album did Ada's band Zeta record?", ["Which album did Ada's band Zeta record?"]),
        ("What did Ada Voss's dog eat?", ["What did Ada Voss's dog eat?"]),  # no relation noun
        (  # one word singling the relation out, and the name's "the"
            "What event caused the Zeta Party of Norland's longest-serving leader to resign?",
            [
                "Who is the Zeta Party of Norland's longest-serving leader?",
                "What event caused #1 to resign?",
            ],
        ),
        (
            "Where was Ada Voss's eldest son born?",
            ["Who is Ada Voss's eldest son?", "Where was #1 born?"],
        ),
        ("Who is Ada Voss's eldest son?", ["Who is Ada Voss's eldest son?"]),  # asked itself
        ("What did Ada Voss's fastest dog eat?", ["What did Ada Voss's fastest dog eat?"]),
    ],
)
def test_a_thing_named_by_a_possessive_inside_a_relation_is_its_own_hop(
    sub_question: str, parts: list[str]
) -> None:
    assert joins_facts(sub_question) == (len(parts) > 1)
    assert split_facts([sub_question]) == parts
