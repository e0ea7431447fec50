"""DS-RAG question graph (Section 2.3.1, Steps 1-3): entities, triples and the merged graph."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import pytest
from langchain_core.messages import BaseMessage

from dynakrag import prompts
from dynakrag.dsrag.question_graph import (
    Extraction,
    LLMGraphExtractor,
    RuleGraphExtractor,
    build_question_graph,
    extract_question_graph,
    find_entities,
)
from dynakrag.dsrag.types import QEdge, QNode
from dynakrag.llm.client import LLMClient
from dynakrag.llm.fake import ScriptedChatModel

PAPER_SUBS = [
    "Who has the earliest birth date for Taylor Swift?",
    "What is the birth date of Neil Armstrong?",
    "Did Neil Armstrong grow up in Wapakoneta?",
]

# What a good model answers for the paper's sub-questions (entities, then pairs).
PAPER_ENTITIES = {
    PAPER_SUBS[0]: ["Who", "birth date", "Taylor Swift"],
    PAPER_SUBS[1]: ["What", "birth date", "Neil Armstrong"],
    PAPER_SUBS[2]: ["Did", "Neil Armstrong", "Wapakoneta"],
}
PAPER_PAIRS = {
    PAPER_SUBS[0]: [
        ("Who", "has the earliest", "birth date"),
        ("birth date", "for", "Taylor Swift"),
    ],
    PAPER_SUBS[1]: [("What", "is the", "birth date"), ("birth date", "of", "Neil Armstrong")],
    PAPER_SUBS[2]: [("Neil Armstrong", "grow up in", "Wapakoneta")],  # "Did" left unpaired
}


def graph_responder(
    entities: Mapping[str, object], pairs: Mapping[str, object]
) -> Callable[[list[BaseMessage]], str]:
    """A fake LLM for both extraction prompts; a str value is sent as the raw reply."""

    def respond(messages: list[BaseMessage]) -> str:
        system, last = str(messages[0].content), str(messages[-1].content)
        question = last.split("Question: ", 1)[1].splitlines()[0]
        if system == prompts.DSRAG_ENTITY_SYSTEM:
            value = entities[question]
            return value if isinstance(value, str) else json.dumps({"entities": value})
        assert system == prompts.DSRAG_RELATION_SYSTEM
        value = pairs[question]
        if isinstance(value, str):
            return value
        triples = [{"source": s, "relation": r, "target": t} for s, r, t in value]  # type: ignore[attr-defined]
        return json.dumps({"triples": triples})

    return respond


def llm(respond: Callable[[list[BaseMessage]], str]) -> LLMClient:
    return LLMClient(ScriptedChatModel(respond=respond), max_retries=0, backoff_s=0)


def texts(extraction: Extraction) -> list[str]:
    return [node.text for node in extraction.nodes]


# ------------------------------------------------------------------------- Step 1 (rules)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        (
            "Who has the earliest birth date for Taylor Swift or Neil Armstrong?",
            ["Who", "birth date", "Taylor Swift", "Neil Armstrong"],
        ),
        (
            "Who's born date is the earliest among Neil deGrasse Tyson and Vincent van Gogh?",
            ["Who", "born date", "Neil deGrasse Tyson", "Vincent van Gogh"],
        ),
        (
            "Is nationality of Martin Luther King Jr. and Will Smith the same?",
            ["Is", "nationality", "Martin Luther King Jr.", "Will Smith"],
        ),
        (
            "Is it true that he criticised NASA's handling of the Apollo 11 mission?",
            ["Is", "NASA", "Apollo 11"],
        ),
        ("In what country are Ugni native plants?", ["what", "country", "Ugni"]),
        (
            'Which novel sold more, "The Salt Orchard" or “Glass Rivers”?',
            ["Which", "novel", "The Salt Orchard", "Glass Rivers"],
        ),
        (
            "How many derivative breeds does the German Spitz have?",
            ["How", "derivative breeds", "German Spitz"],
        ),
        ("Will Smith acted in which film?", ["Will Smith"]),
    ],
)
def test_rule_entities(question: str, expected: list[str]) -> None:
    assert [span.text for span in find_entities(question)] == expected


def test_rule_question_word_flag() -> None:
    spans = find_entities("Did Ada Voss found Kestrel Labs?")
    assert [(s.text, s.is_question_word) for s in spans] == [
        ("Did", True),
        ("Ada Voss", False),
        ("Kestrel Labs", False),
    ]


def test_rule_extractor_chain_with_relations() -> None:
    extraction = RuleGraphExtractor().extract(PAPER_SUBS[0], 1)
    assert extraction.method == "rule"
    assert extraction.nodes == (
        QNode(1, 0, "Who", is_question_word=True),
        QNode(1, 1, "birth date"),
        QNode(1, 2, "Taylor Swift"),
    )
    assert extraction.edges == (
        QEdge((1, 0), (1, 1), "has the earliest"),
        QEdge((1, 1), (1, 2), "for"),
    )


def test_no_entity_gives_one_node() -> None:
    whole = RuleGraphExtractor().extract("is it raining today", 2)
    assert [(n.text, n.is_question_word) for n in whole.nodes] == [("is", True)]
    nothing = RuleGraphExtractor().extract("lots of rain today", 3)
    assert nothing.nodes == (QNode(3, 0, "lots of rain today"),) and nothing.edges == ()


# ------------------------------------------------------------------------- Step 3 (merge)


def test_merge_same_entities_but_not_question_words() -> None:
    graph = build_question_graph(PAPER_SUBS, RuleGraphExtractor())
    keys = {node.text: node.key for node in graph.nodes if not node.is_question_word}
    assert keys == {
        "birth date": (1, 1),
        "Taylor Swift": (1, 2),
        "Neil Armstrong": (2, 2),
        "Wapakoneta": (3, 2),
    }
    question_words = [node.key for node in graph.nodes if node.is_question_word]
    assert question_words == [(1, 0), (2, 0), (3, 0)]
    assert {(e.source, e.target) for e in graph.edges} == {
        ((1, 0), (1, 1)),
        ((1, 1), (1, 2)),
        ((2, 0), (1, 1)),
        ((1, 1), (2, 2)),
        ((3, 0), (2, 2)),
        ((2, 2), (3, 2)),
    }
    assert list(graph.nodes) == sorted(graph.nodes)


class Fixed:
    """An extractor that returns hand-made triples."""

    def __init__(self, per_question: Mapping[str, tuple[list[str], list[tuple[int, int, str]]]]):
        self.per_question = per_question

    def extract(self, sub_question: str, number: int) -> Extraction:
        names, links = self.per_question[sub_question]
        nodes = tuple(QNode(number, i, name) for i, name in enumerate(names))
        edges = tuple(QEdge((number, a), (number, b), r) for a, b, r in links)
        return Extraction(number, sub_question, nodes, edges, "rule")


def test_merge_removes_redundant_triples_keeping_the_first() -> None:
    extractor = Fixed(
        {
            "q1": (["A", "B"], [(0, 1, "first")]),
            "q2": (["a", "b"], [(0, 1, "second")]),  # same pair again: dropped
            "q3": (["B", "A"], [(0, 1, "reverse")]),  # reverse direction: dropped as well
            "q4": (["A", "A "], [(0, 1, "loop")]),  # merges into a self-loop: dropped
        }
    )
    graph = build_question_graph(["q1", "q2", "q3", "q4"], extractor)
    assert [node.key for node in graph.nodes] == [(1, 0), (1, 1)]
    assert graph.edges == (QEdge((1, 0), (1, 1), "first"),)


def test_empty_sub_questions_give_an_empty_graph() -> None:
    built = extract_question_graph(["", "  "], RuleGraphExtractor())
    assert built.graph.nodes == () and built.extractions == ()
    assert build_question_graph([], RuleGraphExtractor()).edges == ()


def test_a_raising_extractor_is_replaced_by_rules() -> None:
    class Broken:
        def extract(self, sub_question: str, number: int) -> Extraction:
            raise ValueError("broken")

    built = extract_question_graph(PAPER_SUBS[:1], Broken())
    assert built.extractions[0].method == "rule-fallback"
    assert "ValueError" in built.notes[0]
    assert [n.text for n in built.graph.nodes] == ["Who", "birth date", "Taylor Swift"]


# ------------------------------------------------------------------------- LLM extractor


def test_llm_extractor_paper_example() -> None:
    extractor = LLMGraphExtractor(llm(graph_responder(PAPER_ENTITIES, PAPER_PAIRS)))
    built = extract_question_graph(PAPER_SUBS, extractor)
    assert [e.method for e in built.extractions] == ["llm", "llm", "llm"]
    third = built.extractions[2]
    assert texts(third) == ["Did", "Neil Armstrong", "Wapakoneta"]
    assert third.nodes[0].is_question_word
    # "Did" was left unpaired and is the first entity: linked to the entity after it.
    assert third.edges == (
        QEdge((3, 0), (3, 1), None),
        QEdge((3, 1), (3, 2), "grow up in"),
    )
    assert built.usage.llm_calls == 6
    assert built.notes == ()


def test_llm_extractor_direction_unpaired_and_invented_relation() -> None:
    question = "Who directed Titanic in Halifax for Fox?"
    entities = {question: ["Who", "Titanic", "Halifax", "Fox", "Paris"]}  # Paris is not there
    pairs = {
        question: [
            ("Titanic", "directed", "Who"),  # reversed: direction comes from the text
            ("Halifax", "was filmed at", "Titanic"),  # invented relation type
        ]
    }
    extraction = LLMGraphExtractor(llm(graph_responder(entities, pairs))).extract(question, 1)
    assert extraction.method == "llm"
    assert texts(extraction) == ["Who", "Titanic", "Halifax", "Fox"]
    assert "1 entities not in the text dropped" in (extraction.note or "")
    assert extraction.edges == (
        QEdge((1, 0), (1, 1), "directed"),
        QEdge((1, 1), (1, 2), None),
        QEdge((1, 2), (1, 3), None),  # "Fox" unpaired: null edge from the entity before it
    )


def test_llm_extractor_bad_entity_json_falls_back_to_rules() -> None:
    extractor = LLMGraphExtractor(
        llm(graph_responder({PAPER_SUBS[0]: "I think the entities are Who and Taylor"}, {}))
    )
    built = extract_question_graph(PAPER_SUBS[:1], extractor)
    extraction = built.extractions[0]
    assert extraction.method == "rule-fallback"
    assert texts(extraction) == ["Who", "birth date", "Taylor Swift"]
    assert extraction.usage.llm_calls == 1
    assert "not the asked JSON" in built.notes[0]


def test_llm_extractor_entities_not_in_text_fall_back() -> None:
    extractor = LLMGraphExtractor(llm(graph_responder({PAPER_SUBS[0]: ["Paris"]}, {})))
    assert extractor.extract(PAPER_SUBS[0], 1).method == "rule-fallback"


def test_llm_extractor_bad_pair_json_links_entities_in_order() -> None:
    extractor = LLMGraphExtractor(
        llm(graph_responder(PAPER_ENTITIES, {PAPER_SUBS[0]: "{not json"}))
    )
    extraction = extractor.extract(PAPER_SUBS[0], 1)
    assert extraction.method == "llm"
    assert [(e.source, e.target, e.relation) for e in extraction.edges] == [
        ((1, 0), (1, 1), None),
        ((1, 1), (1, 2), None),
    ]
    assert "pair reply is not the asked JSON" in (extraction.note or "")


def test_llm_extractor_request_error_falls_back_and_never_raises() -> None:
    def fail(messages: list[BaseMessage]) -> str:
        raise RuntimeError("down")

    extraction = LLMGraphExtractor(llm(fail)).extract(PAPER_SUBS[1], 2)
    assert extraction.method == "rule-fallback"
    assert texts(extraction) == ["What", "birth date", "Neil Armstrong"]


def test_llm_relation_prompt_gives_entities_and_relation_types() -> None:
    seen: list[str] = []
    respond = graph_responder(PAPER_ENTITIES, PAPER_PAIRS)

    def record(messages: list[BaseMessage]) -> str:
        seen.append(str(messages[-1].content))
        return respond(messages)

    LLMGraphExtractor(llm(record)).extract(PAPER_SUBS[0], 1)
    assert 'Entities: ["Who", "birth date", "Taylor Swift"]' in seen[1]
    assert 'Relation types: ["has the earliest", "for"]' in seen[1]
