"""An evaluation's per-question record, as read back: what every reader checks.

:func:`dynakrag.eval.runner.question_record` writes one record per question into the result's
``"questions"`` and into the journal beside ``--out`` (``<out>.partial.jsonl``) as the question
finishes. A resumed run reads the journal's records back through :class:`EvalRecord`, so a
line that is JSON but not such a record fails with one line naming the file and the line
instead of surfacing later as a ``KeyError`` in the summary. The record itself is passed on
as the dict it was written as: the written format is the runner's, unchanged.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["EvalRecord", "EvidenceItem", "check_eval_record"]


class EvidenceItem(BaseModel):
    """One passage of a question's final evidence."""

    model_config = ConfigDict(extra="allow")

    id: str
    title: str = ""
    text: str = ""


class EvalRecord(BaseModel):
    """One question's record (the keys :func:`~dynakrag.eval.runner.question_record` writes).

    Keys it does not know are kept (``extra="allow"``); the abstention keys, which journals
    written before abstention lack, are optional. A metric is None where it was not measured
    (the answer metrics of a ``no_answer`` run).
    """

    model_config = ConfigDict(extra="allow")

    id: str | int
    """The example's id (its row number for the DS-RAG datasets)."""
    question: str
    prediction: str
    gold_answers: list[str]
    gold_support: list[str]
    gold_sets: list[list[str]]
    evidence: list[EvidenceItem]
    actions: list[str]
    retrieval_calls: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    support_recall: float | None
    context_precision: float | None
    context_recall: float | None
    context_f1: float | None
    num_chunks: int
    em: float | None
    f1: float | None
    anls: float | None
    abstained: bool | None = None
    abstain_reason: str = ""
    answer_citations: list[str] = []
    details: dict[str, Any]


def check_eval_record(record: Any) -> EvalRecord:
    """``record`` read as an :class:`EvalRecord`; ``ValueError`` (pydantic's
    ``ValidationError``) saying what is wrong."""
    return EvalRecord.model_validate(record)
