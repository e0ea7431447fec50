"""The DS-RAG steps wired together: EPQD, question graph, criteria, DICS.

One place decides, from the :class:`~dynakrag.configuration.Configuration`, whether the
generator or the deterministic rules build the sub-questions and the question graph
(``dsrag_extraction``), how many hops a criterion keeps (``dics_hops``) and which selection
model scores chunks (``selector``). The ``dsrag`` evaluation method and the graph's
``compress_answer_evidence`` node (``compression="dics"``) both call it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dynakrag.configuration import Configuration
from dynakrag.dsrag.criteria import CriteriaResult, criteria_for_question
from dynakrag.dsrag.dics import DicsResult, dics_select
from dynakrag.dsrag.epqd import EPQD, Decomposition, rule_decompose
from dynakrag.dsrag.question_graph import Extractor, LLMGraphExtractor, RuleGraphExtractor
from dynakrag.dsrag.selector import GraphSelector, load_default_selector
from dynakrag.llm.client import LLMClient, Usage

__all__ = [
    "DicsSelection",
    "decompose_question",
    "graph_extractor",
    "resolve_selector",
    "select_context",
]


def decompose_question(question: str, llm: LLMClient | None, cfg: Configuration) -> Decomposition:
    """EPQD sub-questions: the generator's (paper) or the rule path, per ``dsrag_extraction``."""
    if cfg.dsrag_extraction == "rules" or llm is None:
        return rule_decompose(question)
    return EPQD(llm).decompose(question)


def graph_extractor(llm: LLMClient | None, cfg: Configuration) -> Extractor:
    """The question-graph extractor the configuration asks for."""
    if cfg.dsrag_extraction == "rules" or llm is None:
        return RuleGraphExtractor()
    return LLMGraphExtractor(llm)


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


def select_context(
    question: str,
    sub_questions: Sequence[str],
    candidates: Sequence[tuple[str, str]],
    llm: LLMClient | None,
    cfg: Configuration,
    selector: GraphSelector | None = None,
) -> DicsSelection:
    """Criteria from the sub-questions' graph, then one candidate ``(id, text)`` per criterion.

    Never raises for bad input: the criteria and DICS fallbacks are recorded in the result.
    """
    criteria = criteria_for_question(
        question, list(sub_questions), graph_extractor(llm, cfg), cfg.dics_hops
    )
    chosen = dics_select(
        criteria.criteria, candidates, selector or resolve_selector(cfg), question=question
    )
    return DicsSelection(
        selected_ids=tuple(str(chunk_id) for chunk_id in chosen.chunk_ids),
        criteria=criteria,
        dics=chosen,
        usage=criteria.usage,
    )
