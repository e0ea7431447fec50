"""What a DS-RAG question analysis gives: its targets, sub-questions and selection criteria,
and how they were made (:mod:`dynakrag.dsrag.extraction` makes them with the model,
:mod:`dynakrag.dsrag.rule_extraction` with the rules)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from dynakrag.dsrag.criteria import CriteriaResult
from dynakrag.dsrag.question_graph import normalize_entity
from dynakrag.llm.client import NO_USAGE, Usage

__all__ = ["AnalysisMethod", "QuestionAnalysis", "Target", "fact_question", "unique_targets"]

AnalysisMethod = Literal["llm", "repaired", "rules", "fallback"]
"""How an analysis was obtained (see :mod:`dynakrag.dsrag.extraction`)."""


@dataclass(frozen=True)
class Target:
    """One entity a question asks about: what is asked of it, the names describing it, and
    the sub-question that asks it."""

    entity: str
    asks: str
    question: str
    details: tuple[str, ...] = ()
    source: Literal["model", "rules"] = "model"

    def record(self) -> dict[str, Any]:
        """JSON-safe form for traces and benchmark records."""
        return {
            "entity": self.entity,
            "asks": self.asks,
            "question": self.question,
            "details": list(self.details),
            "source": self.source,
        }


@dataclass(frozen=True)
class QuestionAnalysis:
    """Sub-questions, targets and selection criteria of one question, and how they were made."""

    question: str
    sub_questions: tuple[str, ...]
    criteria: CriteriaResult
    method: AnalysisMethod
    targets: tuple[Target, ...] = ()
    usage: Usage = NO_USAGE
    notes: tuple[str, ...] = ()
    given: tuple[str, ...] = field(default=())
    """The sub-questions the caller gave (empty: the analysis wrote its own)."""
    reused: bool = False
    """True when a memoised analysis answered without a model call."""

    def record(self) -> dict[str, Any]:
        """JSON-safe summary for traces and benchmark records."""
        return {
            "method": self.method,
            "targets": [target.record() for target in self.targets],
            "notes": list(self.notes),
            "reused": self.reused,
        }


def fact_question(entity: str, asks: str) -> str:
    """The sub-question written for a target whose reply gave none (or an unusable one)."""
    return f"What is the {asks} of {entity}?"


def unique_targets(targets: Sequence[Target]) -> list[Target]:
    """``targets`` without repeats (one per entity and fact asked, the first kept)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for target in targets:
        key = (normalize_entity(target.entity), normalize_entity(target.asks))
        if key not in seen:
            seen.add(key)
            out.append(target)
    return out
