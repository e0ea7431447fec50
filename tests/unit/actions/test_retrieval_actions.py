"""The actions that fetch passages, called directly on hand-made states: retrieve_more,
gap_query, bridge_entity_expand and rewrite_query (with its fallbacks)."""

from __future__ import annotations

from typing import Any

import pytest

from dynakrag import prompts
from dynakrag.actions.bridge_entities import detect_bridge_entities
from dynakrag.actions.bridge_entity_expand import bridge_entity_expand
from dynakrag.actions.gap_query import gap_query
from dynakrag.actions.retrieve_more import retrieve_more
from dynakrag.actions.rewrite_query import rewrite_query
from dynakrag.configuration import Configuration
from dynakrag.state import Document
from tests.unit.actions.support import (
    BY_ID,
    QUESTION,
    apply,
    check_accounting,
    doc,
    failing,
    fixed,
    make_state,
    resources,
)

# --- retrieve_more -------------------------------------------------------------------------


def test_retrieve_more_adds_unseen_docs_and_pages_deeper() -> None:
    res, searcher = resources()
    cfg = Configuration(docs_per_action=2)
    state = make_state(query="Ada Voss Kestrel Labs")
    first = retrieve_more(state, res, cfg)
    entry = check_accounting(state, first, "retrieve_more", retrieval_calls=1, llm_calls=0)
    assert [d["id"] for d in first["evidence"]] == ["ada", "kestrel"]
    assert entry["added"] == ["ada", "kestrel"] and first["last_new_docs"] == 2
    assert entry["search_query"] == "Ada Voss Kestrel Labs"
    assert searcher.calls == [("Ada Voss Kestrel Labs", cfg.frontier_depth)]
    for d in first["evidence"]:
        assert (d["title"], d["text"]) == (BY_ID[d["id"]].title, BY_ID[d["id"]].text)
        assert d["action"] == "retrieve_more" and d["step"] == 1 and d["score"] > 0
    assert first["frontier"]["query"] == "Ada Voss Kestrel Labs"
    assert first["frontier"]["depth_reached"] == 2
    assert first["frontier"]["unseen_left"] == 1
    # Bridge entities come from the evidence, not from the question.
    assert "Tom Reyl" in first["bridge_entities"]

    state = apply(state, first)
    second = retrieve_more(state, res, cfg)
    check_accounting(state, second, "retrieve_more", retrieval_calls=1, llm_calls=0)
    assert [d["id"] for d in second["evidence"]] == ["ada", "kestrel", "ada-painter"]
    assert second["trace"][0]["added"] == ["ada-painter"]
    assert second["frontier"]["depth_reached"] == 3
    assert second["frontier"]["unseen_left"] == 0
    assert second["exhausted_queries"] == ["Ada Voss Kestrel Labs"]
    assert "exhausted_queries" not in first
    assert second["evidence"][-1]["step"] == 2

    state = apply(state, second)
    assert state["retrieval_calls"] == 2 and state["steps"] == 2
    assert state["accounting"]["retrieve_more"]["calls"] == 2


def test_retrieve_more_uses_the_question_when_no_query_is_set() -> None:
    res, searcher = resources()
    update = retrieve_more(make_state(query=""), res, Configuration())
    assert searcher.calls[0][0] == QUESTION
    assert update["trace"][0]["search_query"] == QUESTION


# --- gap_query -----------------------------------------------------------------------------


def test_gap_query_queries_the_first_gap_and_marks_it_queried() -> None:
    res, searcher = resources()
    cfg = Configuration(docs_per_action=1)
    state = make_state(
        evidence=[doc("ada")],
        gaps=["Where was Tom Reyl born?", "Velford river"],
        queried_gaps=["Which company does Ada Voss work for?"],
    )
    update = gap_query(state, res, cfg)
    entry = check_accounting(state, update, "gap_query", retrieval_calls=1, llm_calls=0)
    assert searcher.calls == [("Where was Tom Reyl born?", cfg.frontier_depth)]
    assert entry["search_query"] == "Where was Tom Reyl born?"
    assert update["gaps"] == ["Velford river"]
    assert update["queried_gaps"] == [
        "Which company does Ada Voss work for?",
        "Where was Tom Reyl born?",
    ]
    assert [d["id"] for d in update["evidence"]] == ["ada", "tom"]
    assert update["evidence"][-1]["action"] == "gap_query"
    # The query the controller conditions on is unchanged.
    assert "query" not in update


# --- bridge_entity_expand ------------------------------------------------------------------


def test_bridge_entity_expand_queries_the_first_pending_entity() -> None:
    res, searcher = resources()
    cfg = Configuration(docs_per_action=1)
    state = make_state(
        evidence=[doc("ada")],
        bridge_entities=["Kestrel Labs", "Tom Reyl", "Velford"],
        expanded_entities=["kestrel labs"],
    )
    update = bridge_entity_expand(state, res, cfg)
    entry = check_accounting(state, update, "bridge_entity_expand", retrieval_calls=1, llm_calls=0)
    assert searcher.calls[0][0] == "Tom Reyl"
    assert entry["entity"] == "Tom Reyl" and entry["search_query"] == "Tom Reyl"
    assert update["expanded_entities"] == ["kestrel labs", "Tom Reyl"]
    assert [d["id"] for d in update["evidence"]] == ["ada", "tom"]
    # The expanded entity's passage now titles the evidence: it is no longer a bridge entity.
    assert "Tom Reyl" not in update["bridge_entities"]


def test_bridge_entities_leave_out_names_whose_passage_is_in_evidence() -> None:
    evidence = [
        Document(id="a", title="Ada Voss", text="At Kestrel Labs, Ada Voss builds robots."),
        doc("kestrel"),
    ]
    found = detect_bridge_entities(QUESTION, evidence, [])
    assert not [name for name in found if "kestrel labs" in name.lower()], found


# --- rewrite_query -------------------------------------------------------------------------


def test_rewrite_query_uses_the_model_rewrite() -> None:
    recorder = fixed('New query: "Kestrel Labs headquarters"\nsecond line')
    res, searcher = resources(recorder)
    state = make_state(evidence=[doc("ada")], rewrites=1)
    update = rewrite_query(state, res, Configuration(docs_per_action=2))
    entry = check_accounting(
        state, update, "rewrite_query", retrieval_calls=1, llm_calls=1, tokens=recorder.tokens()
    )
    assert recorder.kinds == [prompts.REWRITE]
    assert "Ada Voss is an engineer" in str(recorder.calls[0][-1].content)
    assert update["query"] == "Kestrel Labs headquarters"
    assert searcher.calls[0][0] == "Kestrel Labs headquarters"
    assert entry["rewritten_query"] == "Kestrel Labs headquarters" and entry["fallback"] is False
    assert update["rewrites"] == 2
    assert update["evidence"][1]["id"] == "kestrel"
    assert update["frontier"]["query"] == "Kestrel Labs headquarters"


@pytest.mark.parametrize(
    ("extra", "expected_tail"),
    [
        (
            {"gaps": ["Who founded Kestrel Labs?"], "bridge_entities": ["Tom Reyl"]},
            " Who founded Kestrel Labs?",
        ),
        ({"bridge_entities": ["Tom Reyl"]}, " Tom Reyl"),
        ({}, ""),
    ],
    ids=["gap", "bridge-entity", "question-only"],
)
def test_rewrite_query_falls_back_on_an_empty_reply(
    extra: dict[str, Any], expected_tail: str
) -> None:
    """Documented fallback: the question widened by the first gap, else the first bridge entity."""
    recorder = fixed("")
    res, searcher = resources(recorder)
    state = make_state(evidence=[doc("ada")], **extra)
    update = rewrite_query(state, res, Configuration())
    entry = check_accounting(state, update, "rewrite_query", retrieval_calls=1, llm_calls=1)
    assert update["query"] == QUESTION + expected_tail
    assert searcher.calls[0][0] == QUESTION + expected_tail
    assert entry["fallback"] is True
    assert update["rewrites"] == 1


def test_rewrite_query_falls_back_when_the_reply_repeats_the_query_or_the_model_fails() -> None:
    state = make_state(evidence=[doc("ada")], gaps=["Who founded Kestrel Labs?"])
    expected = f"{QUESTION} Who founded Kestrel Labs?"
    res, _ = resources(fixed(QUESTION.upper()))
    assert rewrite_query(state, res, Configuration())["query"] == expected
    recorder = failing()
    res, _ = resources(recorder)
    update = rewrite_query(state, res, Configuration())
    assert update["query"] == expected and update["trace"][0]["fallback"] is True
    # A failed request still counts as a call (its prompt was sent).
    assert len(recorder.calls) == 1
    check_accounting(state, update, "rewrite_query", retrieval_calls=1, llm_calls=1)
    assert update["completion_tokens"] == 0 and update["prompt_tokens"] > 0
