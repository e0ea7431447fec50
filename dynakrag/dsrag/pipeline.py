"""The DS-RAG steps wired together: question analysis (or EPQD's rules), criteria, DICS.

One place decides, from the :class:`~dynakrag.configuration.Configuration`, how the
sub-questions and selection criteria are made (``dsrag_extraction``: the one-call question
analysis of :mod:`dynakrag.dsrag.extraction` with the rules as its repair, the rules alone, or
``auto``), how many hops a criterion keeps (``dics_hops``) and which selection model scores
chunks (``selector``). The ``dsrag`` evaluation methods and the graph's
``compress_answer_evidence`` node (``compression="dics"``) and ``sufficiency_check``
(``decomposition="epqd"``) all call it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from dynakrag.configuration import Configuration
from dynakrag.decomposition import segment_question
from dynakrag.dsrag.analysis import QuestionAnalysis
from dynakrag.dsrag.criteria import CriteriaResult
from dynakrag.dsrag.dics import DicsResult, dics_select
from dynakrag.dsrag.epqd import Decomposition, rule_decompose
from dynakrag.dsrag.extraction import analyse_question
from dynakrag.dsrag.selector import GraphSelector, load_default_selector
from dynakrag.dsrag.value_answer import covering_selection
from dynakrag.llm.client import LLMClient, Usage

__all__ = [
    "DicsSelection",
    "analyse",
    "covered_with",
    "decompose_question",
    "resolve_selector",
    "select_context",
    "select_for_analysis",
]


def analyse(
    question: str,
    llm: LLMClient | None,
    cfg: Configuration,
    sub_questions: Sequence[str] | None = None,
) -> QuestionAnalysis:
    """Targets, sub-questions and criteria of ``question`` as ``dsrag_extraction`` says (for
    the given ``sub_questions`` when the caller has them)."""
    return analyse_question(
        question, llm, cfg.dsrag_extraction, sub_questions=sub_questions, hops=cfg.dics_hops
    )


def decompose_question(question: str, llm: LLMClient | None, cfg: Configuration) -> Decomposition:
    """EPQD sub-questions: the rule path's (``rules``, or no model), else the question
    analysis's (one sub-question per entity asked about; the rules when it falls back)."""
    if cfg.dsrag_extraction == "rules" or llm is None:
        return rule_decompose(question)
    analysis = analyse(question, llm, cfg)
    text = analysis.question
    return Decomposition(
        text,
        tuple(segment_question(text)),
        analysis.sub_questions,
        analysis.method,
        analysis.usage,
        "; ".join(analysis.notes) or None,
    )


def resolve_selector(cfg: Configuration) -> GraphSelector:
    """The shipped GS model, or the file named by ``selector`` (hash-checked, never unpickled)."""
    return load_default_selector(None if cfg.selector == "default" else cfg.selector)


@dataclass(frozen=True)
class DicsSelection:
    """What DICS chose for one question, with how it got there."""

    selected_ids: tuple[str, ...]
    criteria: CriteriaResult
    dics: DicsResult
    usage: Usage
    analysis: QuestionAnalysis | None = None

    def choices(self) -> list[dict[str, Any]]:
        """Which criterion chose which passage (JSON-safe; ``criterion`` is None for the
        passages of a fallback without criteria)."""
        criteria = self.criteria.criteria
        records = []
        for choice in self.dics.choices:
            criterion = criteria[choice.criterion] if choice.criterion is not None else None
            anchor = None
            if criterion is not None:
                anchor = next(n.text for n in criterion.nodes if n.key == criterion.anchor)
            records.append(
                {
                    "criterion": criterion.text if criterion is not None else None,
                    "anchor": anchor,
                    "passage": str(choice.chunk_id),
                    "score": round(choice.score, 4),
                    "shared": choice.shared,
                }
            )
        return records


def select_for_analysis(
    analysis: QuestionAnalysis,
    candidates: Sequence[tuple[str, str]],
    cfg: Configuration,
    selector: GraphSelector | None = None,
) -> DicsSelection:
    """One candidate ``(id, text)`` per criterion of ``analysis``, and for a ranking or
    comparison no more than state every compared entity's value
    (:func:`~dynakrag.dsrag.value_answer.covering_selection`); never raises for bad input (the
    DICS fallbacks are recorded in the result)."""
    chosen = dics_select(
        analysis.criteria.criteria,
        candidates,
        selector or resolve_selector(cfg),
        question=analysis.question,
    )
    chosen = covering_selection(analysis, chosen, candidates)
    return DicsSelection(
        selected_ids=tuple(str(chunk_id) for chunk_id in chosen.chunk_ids),
        criteria=analysis.criteria,
        dics=chosen,
        usage=analysis.usage,
        analysis=analysis,
    )


def covered_with(selection: DicsSelection, candidates: Sequence[tuple[str, str]]) -> DicsSelection:
    """``selection`` with its ranking's or comparison's values covered from ``candidates``
    (more retrieved chunks: :func:`~dynakrag.dsrag.value_answer.covering_selection`); DICS's
    own choice is not redone."""
    if selection.analysis is None:
        return selection
    chosen = covering_selection(selection.analysis, selection.dics, candidates)
    if chosen is selection.dics:
        return selection
    return replace(
        selection,
        selected_ids=tuple(str(chunk_id) for chunk_id in chosen.chunk_ids),
        dics=chosen,
    )


def select_context(
    question: str,
    sub_questions: Sequence[str],
    candidates: Sequence[tuple[str, str]],
    llm: LLMClient | None,
    cfg: Configuration,
    selector: GraphSelector | None = None,
) -> DicsSelection:
    """Criteria from ``sub_questions`` (:func:`analyse`), then one candidate per criterion."""
    analysis = analyse(question, llm, cfg, sub_questions=list(sub_questions))
    return select_for_analysis(analysis, candidates, cfg, selector)
