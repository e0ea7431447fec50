"""DS-RAG and the paper's baselines as evaluation methods (Kwon et al. 2025, Section 3.3).

* ``dsrag``: the question analysis's sub-questions (one per entity asked about; EPQD's rule
  sub-questions under ``dsrag_extraction="rules"``), the top ``subq_k`` (3) chunks per
  sub-question, DICS (one chunk per selection criterion), answer.
* ``nonqd-rerank``: the question's top 7 chunks, reranked to 4.
* ``epqd-rerank-subq``: the top 3 chunks per sub-question, each list reranked against its
  sub-question, the best one kept per sub-question (a chunk kept twice counts once).
* ``epqd-rerank-origq``: the pooled per-sub-question chunks reranked against the original
  question, top 4.

No cross-encoder ships offline (the paper used BGE-Reranker-v2-m3), so the reranker here is
the strongest scorer available without a network: cosine similarity of the bundled
all-MiniLM-L6-v2 embeddings of query and chunk (:func:`minilm_rerank`).

The DS-RAG pieces import torch: they load on first use, so listing methods stays fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from dynakrag.configuration import Configuration, RetrieverName
from dynakrag.eval.methods.base import (
    Evidence,
    Method,
    MethodResult,
    Tally,
    final_answer,
    merge_evidence,
    retrieve,
)
from dynakrag.llm.client import LLMClient
from dynakrag.retrieval.base import Searcher

if TYPE_CHECKING:
    from dynakrag.dsrag.analysis import QuestionAnalysis
    from dynakrag.dsrag.epqd import Decomposition
    from dynakrag.dsrag.pipeline import DicsSelection
    from dynakrag.dsrag.text_encoder import TextEncoder

__all__ = [
    "DsragMethod",
    "EPQDRerankOriginalQMethod",
    "EPQDRerankSubQMethod",
    "NonQDRerankMethod",
    "minilm_rerank",
]

ORIGINAL_QUESTION_K = 7
"""Chunks retrieved for the original question (paper)."""
SUB_QUESTION_K = 3
"""Chunks retrieved per sub-question (paper)."""
RERANK_TOP_K = 4
"""Chunks kept after reranking (paper: questions hold 2-4 gold chunks)."""
FACT_SEARCH_K = 10
"""Chunks retrieved when searching one entity's fact that the selection does not state
("Donald Trump born date"). Chosen on train rows: of the 39 people of every 50th train ranking,
bm25 finds the chunk stating the birth date in the top 3 for 37, in the top 10 for all 39."""
DSRAG_RETRIEVER: RetrieverName = "bm25"
"""The retriever of DS-RAG's methods unless the user picks one. Its chunks tell people apart by
name, which MiniLM embeddings blur: on 30 train rankings (rules analysis, shipped selector)
DS-RAG's context F1 is 0.822 with bm25, 0.611 hybrid, 0.200 dense."""
RERANKER = "all-MiniLM-L6-v2 cosine (bi-encoder; no cross-encoder ships offline)"


@lru_cache(maxsize=1)
def _rerank_encoder() -> TextEncoder:
    from dynakrag.dsrag.text_encoder import TextEncoder
    from dynakrag.retrieval.embeddings import default_embeddings

    return TextEncoder(default_embeddings())  # memoised: pooled chunks repeat across methods


def minilm_rerank(query: str, docs: Sequence[Evidence], top: int) -> list[Evidence]:
    """The ``top`` of ``docs`` by MiniLM cosine to ``query`` (stable for ties)."""
    if not docs:
        return []
    encoder = _rerank_encoder()
    vectors = encoder.encode([doc["text"] for doc in docs])
    scores = vectors @ encoder.encode([query])[0]  # unit vectors: the dot product is the cosine
    order = sorted(range(len(docs)), key=lambda i: (-float(scores[i]), i))
    return [docs[i] for i in order[:top]]


class _EPQDMethod(Method):
    """Shared by the methods that start from EPQD sub-questions."""

    default_retriever = DSRAG_RETRIEVER

    def decompose(
        self, question: str, llm: LLMClient, cfg: Configuration, tally: Tally
    ) -> Decomposition:
        from dynakrag.dsrag.pipeline import decompose_question

        decomposition = decompose_question(question, llm, cfg)
        tally.add(decomposition.usage)
        return decomposition

    @staticmethod
    def per_sub_question(
        searcher: Searcher, sub_questions: Sequence[str], tally: Tally
    ) -> list[list[Evidence]]:
        lists = []
        for sub_question in sub_questions:
            lists.append(retrieve(searcher, sub_question, SUB_QUESTION_K, SUB_QUESTION_K))
            tally.add(retrievals=1)
        return lists

    def answer(
        self,
        question: str,
        evidence: list[Evidence],
        llm: LLMClient,
        tally: Tally,
        selection: str,
        split: Decomposition | QuestionAnalysis,
        **details: Any,
    ) -> MethodResult:
        """Answer from ``evidence`` (chosen by the action ``selection``) and report the
        sub-questions ``split`` made, with the method's own ``details``."""
        actions = ["epqd", "retrieve_per_sub_question", selection]
        prediction = final_answer(self, question, evidence, llm, tally, actions)
        return tally.result(
            prediction,
            evidence,
            actions,
            sub_questions=list(split.sub_questions),
            decomposition=split.method,
            **details,
        )

    def options(self) -> dict[str, Any]:
        return {**super().options(), "subq_k": SUB_QUESTION_K}


class DsragMethod(_EPQDMethod):
    """The paper's pipeline: sub-questions, retrieval per sub-question, DICS, answer.

    The sub-questions and selection criteria come from one question analysis
    (:func:`dynakrag.dsrag.pipeline.analyse`: the generator's one call with the rules as
    repair, or the rules, per ``dsrag_extraction``), so the criteria cost no further call.
    """

    name = "dsrag"

    def run(
        self, question: str, searcher: Searcher, llm: LLMClient, cfg: Configuration
    ) -> MethodResult:
        from dynakrag.dsrag.pipeline import analyse, covered_with, select_for_analysis

        tally = Tally()
        analysis = analyse(question, llm, cfg)
        tally.add(analysis.usage)
        candidates = merge_evidence(*self.per_sub_question(searcher, analysis.sub_questions, tally))
        selection = select_for_analysis(
            analysis, [(doc["id"], doc["text"]) for doc in candidates], cfg
        )
        searched = self.search_unstated_facts(analysis, selection, searcher, tally)
        if searched:
            candidates = merge_evidence(candidates, *searched)
            selection = covered_with(selection, [(doc["id"], doc["text"]) for doc in candidates])
        by_id = {doc["id"]: doc for doc in candidates}
        evidence = [by_id[chunk_id] for chunk_id in selection.selected_ids]
        criteria = selection.criteria
        details: dict[str, Any] = {
            "extraction": analysis.record(),
            "candidates": len(candidates),
            "criteria": [criterion.text for criterion in criteria.criteria],
            "core": criteria.graph.node(criteria.core).text if criteria.core else None,
            "criteria_fallback": criteria.fallback,
            "dics_mode": selection.dics.mode,
            "dics_choices": selection.choices(),
        }
        if evidence and not self.no_answer:  # no passages: "insufficient evidence", as before
            computed = self.computed_result(question, analysis, evidence, selection, tally, details)
            if computed is not None:
                return computed
        return self.answer(question, evidence, llm, tally, "dics", analysis, **details)

    @staticmethod
    def search_unstated_facts(
        analysis: QuestionAnalysis, selection: DicsSelection, searcher: Searcher, tally: Tally
    ) -> list[list[Evidence]]:
        """For a ranking or comparison whose selection states some entity's value nowhere,
        one search per such entity for that fact ("Donald Trump born date"), top
        :data:`FACT_SEARCH_K`: the sub-questions' searches may have missed it (the rule
        sub-questions carry the whole ranking's wording)."""
        from dynakrag.dsrag.value_answer import fact_query, unstated_targets

        chunks = selection.dics.chunks
        found = []
        for target in unstated_targets(analysis, chunks) if chunks else []:
            found.append(retrieve(searcher, fact_query(target), FACT_SEARCH_K, FACT_SEARCH_K))
            tally.add(retrievals=1)
        return found

    @staticmethod
    def computed_result(
        question: str,
        analysis: QuestionAnalysis,
        evidence: list[Evidence],
        selection: DicsSelection,
        tally: Tally,
        details: dict[str, Any],
    ) -> MethodResult | None:
        """The result of a ranking or comparison answered from the values the evidence states
        (:func:`dynakrag.dsrag.value_answer.answer_from_values`; no model call, a value not
        found or not parsed gives an answer that says so), citing the values' passages; None
        when a reader must answer."""
        from dynakrag.dsrag.value_answer import answer_from_values, chosen_passages

        computed = answer_from_values(
            question,
            analysis,
            [(doc["id"], doc["text"]) for doc in evidence],
            chosen_passages(selection.choices()),
        )
        if computed is None:
            return None
        actions = ["epqd", "retrieve_per_sub_question", "dics", "answer_from_values"]
        result = tally.result(
            computed.text,
            evidence,
            actions,
            sub_questions=list(analysis.sub_questions),
            decomposition=analysis.method,
            value_answer=computed.record(),
            **details,
        )
        result.answer_citations = computed.passages
        return result

    def options(self) -> dict[str, Any]:
        return {**super().options(), "selection": "dics"}


class NonQDRerankMethod(Method):
    """No decomposition: the question's top 7 chunks reranked to 4."""

    name = "nonqd-rerank"
    default_retriever = DSRAG_RETRIEVER

    def run(
        self, question: str, searcher: Searcher, llm: LLMClient, cfg: Configuration
    ) -> MethodResult:
        tally = Tally()
        pool = retrieve(searcher, question, ORIGINAL_QUESTION_K, ORIGINAL_QUESTION_K)
        tally.add(retrievals=1)
        evidence = minilm_rerank(question, pool, RERANK_TOP_K)
        actions = ["retrieve", "rerank"]
        prediction = final_answer(self, question, evidence, llm, tally, actions)
        return tally.result(prediction, evidence, actions, candidates=len(pool))

    def options(self) -> dict[str, Any]:
        return {
            **super().options(),
            "k": ORIGINAL_QUESTION_K,
            "top": RERANK_TOP_K,
            "reranker": RERANKER,
        }


class _EPQDRerankMethod(_EPQDMethod):
    """EPQD, retrieval per sub-question, a rerank (:meth:`rerank`), answer."""

    def run(
        self, question: str, searcher: Searcher, llm: LLMClient, cfg: Configuration
    ) -> MethodResult:
        tally = Tally()
        decomposition = self.decompose(question, llm, cfg, tally)
        lists = self.per_sub_question(searcher, decomposition.sub_questions, tally)
        evidence, details = self.rerank(question, decomposition.sub_questions, lists)
        return self.answer(question, evidence, llm, tally, "rerank", decomposition, **details)

    def rerank(
        self, question: str, sub_questions: Sequence[str], lists: list[list[Evidence]]
    ) -> tuple[list[Evidence], dict[str, Any]]:
        """The evidence kept from each sub-question's chunks, and details for the result."""
        raise NotImplementedError


class EPQDRerankSubQMethod(_EPQDRerankMethod):
    """EPQD, then the best reranked chunk of each sub-question's top 3."""

    name = "epqd-rerank-subq"

    def rerank(
        self, question: str, sub_questions: Sequence[str], lists: list[list[Evidence]]
    ) -> tuple[list[Evidence], dict[str, Any]]:
        best = [
            minilm_rerank(sub_question, docs, 1)
            for sub_question, docs in zip(sub_questions, lists, strict=True)
        ]
        return merge_evidence(*best), {}

    def options(self) -> dict[str, Any]:
        return {**super().options(), "top_per_sub_question": 1, "reranker": RERANKER}


class EPQDRerankOriginalQMethod(_EPQDRerankMethod):
    """EPQD, then the pooled sub-question chunks reranked against the question, top 4."""

    name = "epqd-rerank-origq"

    def rerank(
        self, question: str, sub_questions: Sequence[str], lists: list[list[Evidence]]
    ) -> tuple[list[Evidence], dict[str, Any]]:
        pool = merge_evidence(*lists)
        return minilm_rerank(question, pool, RERANK_TOP_K), {"candidates": len(pool)}

    def options(self) -> dict[str, Any]:
        return {**super().options(), "top": RERANK_TOP_K, "reranker": RERANKER}
