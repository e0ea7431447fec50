"""DS-RAG Step 4: Algorithm 1 (core node), Algorithm 2 (selection criteria) and the pipeline."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from langchain_core.messages import BaseMessage

from dynakrag import prompts
from dynakrag.dsrag.criteria import (
    FALLBACK_EMPTY,
    FALLBACK_NO_CANDIDATE,
    FALLBACK_NO_CORE,
    criteria_for_question,
    find_core_node,
    selection_criteria,
)
from dynakrag.dsrag.epqd import rule_decompose
from dynakrag.dsrag.question_graph import LLMGraphExtractor, RuleGraphExtractor
from dynakrag.dsrag.types import Criterion, NodeKey, QEdge, QNode, QuestionGraph
from dynakrag.llm.client import LLMClient
from dynakrag.llm.fake import ScriptedChatModel

PAPER_QUESTION = (
    "Who has the earliest birth date for Taylor Swift or Neil Armstrong, who grew up in Wapakoneta?"
)
PAPER_SUBS = [
    "Who has the earliest birth date for Taylor Swift?",
    "What is the birth date of Neil Armstrong?",
    "Did Neil Armstrong grow up in Wapakoneta?",
]


def graph(
    nodes: Sequence[tuple[NodeKey, str] | tuple[NodeKey, str, bool]],
    edges: Sequence[tuple[NodeKey, NodeKey]],
) -> QuestionGraph:
    """A hand-made graph; a third item True marks a question word."""
    qnodes = tuple(
        sorted(QNode(key[0], key[1], text, bool(rest and rest[0])) for key, text, *rest in nodes)
    )
    return QuestionGraph(qnodes, tuple(QEdge(s, t) for s, t in edges))


def anchors(criteria: Sequence[Criterion], g: QuestionGraph) -> list[str]:
    return [g.node(c.anchor).text for c in criteria]


def assert_paper_criteria(criteria: Sequence[Criterion]) -> None:
    """Two criteria: birth date -> Taylor Swift; birth date -> Neil Armstrong -> Wapakoneta."""
    assert len(criteria) == 2
    swift, armstrong = criteria
    assert swift.text.startswith("birth date") and "Taylor Swift" in swift.text
    assert "Neil Armstrong" not in swift.text and "Wapakoneta" not in swift.text
    assert armstrong.text.startswith("birth date")
    assert "Neil Armstrong" in armstrong.text and "Wapakoneta" in armstrong.text
    assert "Taylor Swift" not in armstrong.text
    for criterion in criteria:
        view = criterion.as_graph()
        assert view.node_texts[view.anchor] in {"Taylor Swift", "Neil Armstrong"}


# ------------------------------------------------------------------------- the paper's example


def test_paper_example_with_the_rule_path() -> None:
    decomposition = rule_decompose(PAPER_QUESTION)
    result = criteria_for_question(
        PAPER_QUESTION, decomposition.sub_questions, RuleGraphExtractor()
    )
    assert result.fallback is None
    assert result.graph.node(result.core).text == "birth date"  # type: ignore[arg-type]
    assert_paper_criteria(result.criteria)


def test_paper_example_with_the_rule_extractor_on_llm_sub_questions() -> None:
    result = criteria_for_question(PAPER_QUESTION, PAPER_SUBS)  # rule extractor by default
    assert result.fallback is None
    assert_paper_criteria(result.criteria)


def test_paper_example_with_the_llm_extractor() -> None:
    entities = {
        PAPER_SUBS[0]: ["Who", "birth date", "Taylor Swift"],
        PAPER_SUBS[1]: ["What", "birth date", "Neil Armstrong"],
        PAPER_SUBS[2]: ["Did", "Neil Armstrong", "Wapakoneta"],
    }
    pairs = {
        PAPER_SUBS[0]: [
            ["Who", "has the earliest", "birth date"],
            ["birth date", "for", "Taylor Swift"],
        ],
        PAPER_SUBS[1]: [["What", "is the", "birth date"], ["birth date", "of", "Neil Armstrong"]],
        PAPER_SUBS[2]: [
            ["Did", "", "Neil Armstrong"],
            ["Neil Armstrong", "grow up in", "Wapakoneta"],
        ],
    }

    def respond(messages: list[BaseMessage]) -> str:
        system, last = str(messages[0].content), str(messages[-1].content)
        question = last.split("Question: ", 1)[1].splitlines()[0]
        if system == prompts.DSRAG_ENTITY_SYSTEM:
            return json.dumps({"entities": entities[question]})
        triples = [{"source": s, "relation": r, "target": t} for s, r, t in pairs[question]]
        return json.dumps({"triples": triples})

    llm = LLMClient(ScriptedChatModel(respond=respond), max_retries=0, backoff_s=0)
    result = criteria_for_question(PAPER_QUESTION, PAPER_SUBS, LLMGraphExtractor(llm))
    assert result.fallback is None and result.extraction_notes == ()
    assert result.usage.llm_calls == 6
    assert_paper_criteria(result.criteria)


def test_hop_limit_on_the_paper_example() -> None:
    result = criteria_for_question(PAPER_QUESTION, PAPER_SUBS, hops=1)
    armstrong = result.criteria[1]
    assert "Neil Armstrong" in armstrong.text and "Wapakoneta" not in armstrong.text
    unlimited = criteria_for_question(PAPER_QUESTION, PAPER_SUBS, hops=None).criteria[1]
    assert "Wapakoneta" in unlimited.text


# ------------------------------------------------------------------------- Algorithm 1


def test_single_root_walks_down_to_the_first_branching_node() -> None:
    g = graph(
        [((1, 0), "Who", True), ((1, 1), "A"), ((1, 2), "B"), ((1, 3), "C"), ((1, 4), "D")],
        [((1, 0), (1, 1)), ((1, 1), (1, 2)), ((1, 2), (1, 3)), ((1, 2), (1, 4))],
    )
    assert find_core_node(g) == (1, 2)


def test_single_root_question_word_defers_to_a_branching_successor() -> None:
    # "Who" branches first; its successors become roots and "A" (which branches) is the core.
    g = graph(
        [((1, 0), "Who", True), ((1, 1), "A"), ((1, 2), "X"), ((1, 3), "Y"), ((2, 1), "B")],
        [((1, 0), (1, 1)), ((1, 0), (2, 1)), ((1, 1), (1, 2)), ((1, 1), (1, 3))],
    )
    assert find_core_node(g) == (1, 1)


def test_question_word_is_the_core_when_nothing_else_branches() -> None:
    g = graph(
        [((1, 0), "Who", True), ((1, 1), "A"), ((1, 2), "B")],
        [((1, 0), (1, 1)), ((1, 0), (1, 2))],
    )
    assert find_core_node(g) == (1, 0)


def test_several_roots_are_visited_in_key_order() -> None:
    # Root (1, 0) leads to "Late" (branching), root (2, 0) is itself listed first in the
    # tuple of nodes but comes second in (sub_question, node_id) order.
    g = QuestionGraph(
        nodes=(
            QNode(2, 0, "What", True),
            QNode(2, 1, "Early"),
            QNode(2, 2, "e1"),
            QNode(2, 3, "e2"),
            QNode(1, 0, "Who", True),
            QNode(1, 1, "Late"),
            QNode(1, 2, "l1"),
            QNode(1, 3, "l2"),
        ),
        edges=(
            QEdge((2, 0), (2, 1)),
            QEdge((2, 1), (2, 2)),
            QEdge((2, 1), (2, 3)),
            QEdge((1, 0), (1, 1)),
            QEdge((1, 1), (1, 2)),
            QEdge((1, 1), (1, 3)),
        ),
    )
    assert find_core_node(g) == (1, 1)


def test_several_roots_skip_a_branching_question_word() -> None:
    g = graph(
        [
            ((1, 0), "Who", True),
            ((1, 1), "A"),
            ((1, 2), "B"),
            ((2, 0), "What", True),
            ((2, 1), "C"),
            ((2, 2), "c1"),
            ((2, 3), "c2"),
        ],
        [
            ((1, 0), (1, 1)),
            ((1, 0), (1, 2)),
            ((2, 0), (2, 1)),
            ((2, 1), (2, 2)),
            ((2, 1), (2, 3)),
        ],
    )
    assert find_core_node(g) == (2, 1)


def test_no_branching_node_gives_no_core() -> None:
    chain = graph(
        [((1, 0), "A"), ((1, 1), "B"), ((1, 2), "C")], [((1, 0), (1, 1)), ((1, 1), (1, 2))]
    )
    assert find_core_node(chain) is None
    assert find_core_node(QuestionGraph()) is None


def test_cycles_terminate() -> None:
    cycle = graph(
        [((1, 0), "A"), ((1, 1), "B"), ((1, 2), "C")],
        [((1, 0), (1, 1)), ((1, 1), (1, 2)), ((1, 2), (1, 0))],
    )
    assert find_core_node(cycle) is None
    assert len(selection_criteria(cycle, (1, 0))) == 1


# ------------------------------------------------------------------------- Algorithm 2


def predecessor_graph() -> QuestionGraph:
    # P2 -> P1 -> core -> A -> A1 -> A2 ; core -> B
    return graph(
        [
            ((1, 0), "P2"),
            ((1, 1), "P1"),
            ((1, 2), "core"),
            ((1, 3), "A"),
            ((1, 4), "A1"),
            ((1, 5), "A2"),
            ((2, 1), "B"),
        ],
        [
            ((1, 0), (1, 1)),
            ((1, 1), (1, 2)),
            ((1, 2), (1, 3)),
            ((1, 3), (1, 4)),
            ((1, 4), (1, 5)),
            ((1, 2), (2, 1)),
        ],
    )


def pairs(criterion: Criterion) -> set[tuple[NodeKey, NodeKey]]:
    return {(t.source, t.target) for t in criterion.triples}


def test_selection_criteria_with_predecessors() -> None:
    g = predecessor_graph()
    first, second = selection_criteria(g, (1, 2))
    assert first.anchor == (1, 3) and second.anchor == (2, 1)
    predecessors = {((1, 0), (1, 1)), ((1, 1), (1, 2))}
    assert pairs(first) == {((1, 2), (1, 3)), ((1, 3), (1, 4)), ((1, 4), (1, 5))} | predecessors
    assert pairs(second) == {((1, 2), (2, 1))} | predecessors
    assert first.text == "core -> P2 -> P1 -> A -> A1 -> A2"


@pytest.mark.parametrize(
    ("hops", "expected_first"),
    [
        (1, {((1, 2), (1, 3)), ((1, 1), (1, 2))}),
        (2, {((1, 2), (1, 3)), ((1, 3), (1, 4)), ((1, 1), (1, 2)), ((1, 0), (1, 1))}),
        (0, {((1, 2), (1, 3)), ((1, 1), (1, 2))}),  # below 1 counts as 1
    ],
)
def test_selection_criteria_hop_limit(hops: int, expected_first: set) -> None:
    first, second = selection_criteria(predecessor_graph(), (1, 2), hops=hops)
    assert pairs(first) == expected_first
    assert ((1, 2), (2, 1)) in pairs(second)


def test_selection_criteria_unknown_core() -> None:
    assert selection_criteria(predecessor_graph(), (9, 9)) == []
    assert selection_criteria(predecessor_graph(), None) == []


# ------------------------------------------------------------------------- fallbacks


def test_no_in_degree_two_gives_one_criterion_per_sub_question() -> None:
    subs = ["What is the capital of France?", "Who founded Kestrel Labs?"]
    result = criteria_for_question("q", subs)
    assert result.fallback == FALLBACK_NO_CANDIDATE and result.core is None
    assert [c.text for c in result.criteria] == [
        "What -> capital -> France",
        "Who -> Kestrel Labs",
    ]
    assert [c.anchor for c in result.criteria] == [(1, 2), (2, 1)]


def test_in_degree_two_without_a_branching_node_falls_back() -> None:
    # "Paris" is reached from both sub-questions but nothing branches.
    subs = ["Who lives in Paris?", "What about Paris?"]
    result = criteria_for_question("q", subs)
    assert result.fallback == FALLBACK_NO_CORE
    assert len(result.criteria) == 2


@pytest.mark.parametrize("subs", [[], ["", "   "], None])
def test_empty_graph_gives_the_whole_question(subs: list[str] | None) -> None:
    result = criteria_for_question("Who is it?", subs)  # type: ignore[arg-type]
    assert result.fallback == FALLBACK_EMPTY
    assert [c.text for c in result.criteria] == ["Who is it?"]
    assert result.criteria[0].as_graph().anchor == 0


def test_bad_input_never_raises() -> None:
    result = criteria_for_question(None, [None, 3, "Who?"])  # type: ignore[arg-type,list-item]
    assert result.criteria
    assert criteria_for_question("", []).criteria[0].nodes[0].text == ""


def test_template_question_gives_one_criterion_per_person() -> None:
    question = (
        "Is nationality of Ada Voss, who was born in Velford, Orvania, and later moved to "
        "Quarmouth, Will Smith and Martin Luther King Jr. different?"
    )
    result = criteria_for_question(question, rule_decompose(question).sub_questions)
    assert result.fallback is None
    assert result.graph.node(result.core).text == "nationality"  # type: ignore[arg-type]
    assert anchors(result.criteria, result.graph) == [
        "Ada Voss",
        "Will Smith",
        "Martin Luther King Jr.",
    ]
    ada = result.criteria[0]
    assert "Velford" in ada.text and "Quarmouth" in ada.text
    assert all("Velford" not in c.text for c in result.criteria[1:])
