"""DICS: one distinct chunk per criterion, de-duplication and the fallbacks that never raise."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from dynakrag.dsrag.dics import DEFAULT_FALLBACK_K, DicsResult, dics_select
from dynakrag.dsrag.types import Criterion, CriterionGraph, QEdge, QNode


def criterion(core: str, anchor: str) -> Criterion:
    core_node, anchor_node = QNode(1, 0, core), QNode(1, 1, anchor)
    return Criterion(
        core_node.key,
        anchor_node.key,
        (QEdge(core_node.key, anchor_node.key, None),),
        (core_node, anchor_node),
    )


class WordOverlapScorer:
    """Scores a criterion against a chunk by the share of its anchor's words in the chunk."""

    def __init__(self) -> None:
        self.scored: list[tuple[int, int]] = []

    @staticmethod
    def _overlap(words: str, text: str) -> float:
        wanted = set(words.lower().split())
        return len(wanted & set(text.lower().split())) / max(1, len(wanted))

    def score(
        self, criteria_graphs: Sequence[CriterionGraph], chunk_texts: Sequence[str]
    ) -> np.ndarray:
        self.scored.append((len(criteria_graphs), len(chunk_texts)))
        return np.array(
            [
                [self._overlap(g.node_texts[g.anchor], t) for t in chunk_texts]
                for g in criteria_graphs
            ],
            dtype=np.float32,
        )

    def text_similarity(self, query: str, texts: Sequence[str]) -> np.ndarray:
        return np.array([self._overlap(query, t) for t in texts], dtype=np.float32)


CHUNKS = [
    ("c1", "neil armstrong was born in 1930"),
    ("c2", "taylor swift was born in 1989"),
    ("c3", "vladimir putin was born in 1952"),
    ("c4", "the weather is mild"),
    ("c5", "armstrong walked on the moon"),
]


def test_one_chunk_per_criterion() -> None:
    criteria = [criterion("born", "Neil Armstrong"), criterion("born", "Taylor Swift")]
    result = dics_select(criteria, CHUNKS, WordOverlapScorer())
    assert result.mode == "criteria"
    assert result.chunk_ids == ("c1", "c2")
    assert [c.criterion for c in result.choices] == [0, 1]
    assert len(result) == 2  # the context follows the number of criteria
    three = dics_select(
        [*criteria, criterion("born", "Vladimir Putin")], CHUNKS, WordOverlapScorer()
    )
    assert three.chunk_ids == ("c1", "c2", "c3")


def test_two_criteria_wanting_one_chunk_get_distinct_chunks() -> None:
    # Both prefer c1; "Neil Armstrong" matches it better (1.0 vs 0.75), so the first
    # criterion takes its best unused chunk instead.
    criteria = [criterion("born", "Neil Armstrong 1930 xyz"), criterion("born", "Neil Armstrong")]
    scorer = WordOverlapScorer()
    scores = scorer.score([c.as_graph() for c in criteria], [t for _, t in CHUNKS])
    assert scores[0].argmax() == scores[1].argmax() == 0
    result = dics_select(criteria, CHUNKS, scorer)
    assert {c.criterion: c.chunk_id for c in result.choices} == {0: "c5", 1: "c1"}
    assert result.chunk_ids == ("c5", "c1")  # criterion order
    assert not any(c.shared for c in result.choices)


def test_same_best_chunk_goes_to_the_more_similar_criterion() -> None:
    chunks = [("a", "x y"), ("b", "x q")]
    criteria = [criterion("c", "x z"), criterion("c", "x y")]  # both best on "a"
    result = dics_select(criteria, chunks, WordOverlapScorer())
    assert {c.criterion: c.chunk_id for c in result.choices} == {1: "a", 0: "b"}


def test_more_criteria_than_chunks_share() -> None:
    criteria = [criterion("born", "Neil Armstrong"), criterion("born", "Taylor Swift")]
    result = dics_select(criteria, CHUNKS[:1], WordOverlapScorer())
    assert result.chunk_ids == ("c1",)
    assert sorted(c.shared for c in result.choices) == [False, True]


def test_duplicate_candidates_count_once() -> None:
    chunks = [CHUNKS[0], CHUNKS[1], CHUNKS[0], ("c1", "a different text, same id")]
    scorer = WordOverlapScorer()
    result = dics_select([criterion("born", "Neil Armstrong")], chunks, scorer)
    assert scorer.scored == [(1, 2)]
    assert result.chunks == (CHUNKS[0],)


def test_no_candidates_gives_an_empty_selection() -> None:
    result = dics_select([criterion("born", "Neil Armstrong")], [], WordOverlapScorer())
    assert result == DicsResult((), (), "empty", "no candidate chunks were retrieved")


def test_no_criteria_falls_back_to_question_similarity() -> None:
    result = dics_select([], CHUNKS, WordOverlapScorer(), question="when was taylor swift born")
    assert result.mode == "question"
    assert result.chunk_ids[0] == "c2"
    assert len(result) == DEFAULT_FALLBACK_K
    assert all(c.criterion is None for c in result.choices)
    assert "4 chunks most similar to the question" in result.reason
    two = dics_select([], CHUNKS, WordOverlapScorer(), question="moon", fallback_k=2)
    assert two.chunk_ids[0] == "c5" and len(two) == 2


def test_no_criteria_and_no_question_keeps_retrieval_order() -> None:
    result = dics_select([], CHUNKS, WordOverlapScorer(), fallback_k=3)
    assert result.mode == "order" and result.chunk_ids == ("c1", "c2", "c3")
    assert dics_select([], CHUNKS[:2], WordOverlapScorer()).chunk_ids == ("c1", "c2")


def test_malformed_criteria_are_dropped_not_raised() -> None:
    broken = Criterion((1, 0), (9, 9), (), (QNode(1, 0, "born"),))  # anchor not among nodes
    result = dics_select([broken, criterion("born", "Taylor Swift")], CHUNKS, WordOverlapScorer())
    assert result.mode == "criteria" and result.chunk_ids == ("c2",)
    assert result.choices[0].criterion == 1
    assert "dropped malformed criterion 0" in result.reason
    only_broken = dics_select([broken], CHUNKS, WordOverlapScorer(), question="putin")
    assert only_broken.mode == "question" and only_broken.chunk_ids[0] == "c3"


@pytest.mark.parametrize("k", [0, 10])
def test_fallback_k_is_clipped(k: int) -> None:
    result = dics_select([], CHUNKS, WordOverlapScorer(), question="born", fallback_k=k)
    assert len(result) == min(k, len(CHUNKS))


def test_with_a_fitted_graph_selector() -> None:
    from dynakrag.dsrag.selector_training import fit_selector
    from tests.unit.test_dsrag_selector import PEOPLE, small_selector, synthetic

    selector = fit_selector(small_selector(epochs=5), synthetic(PEOPLE[:6]))
    chunks = [("g", "Ava Stone was born on alpha"), ("n", "Ava Stone has nationality beta")]
    result = dics_select(
        [criterion("born date", "Ava Stone"), criterion("nationality", "Ava Stone")],
        chunks,
        selector,
    )
    assert sorted(result.chunk_ids) == ["g", "n"] and len(result.choices) == 2
